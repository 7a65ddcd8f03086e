"""Typed settings for the `sft` and `grpo` params sections.

The defaults are sized for a 2-core CPU box (see params.yaml). The seed's production run (Qwen2.5-7B
on 8 GPUs) is written once, in configs/production.yaml.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class LoRASettings(Strict):
    r: int = Field(8, ge=1)  # adapter rank
    alpha: int = Field(16, ge=1)  # scaling numerator (scale = alpha / r)
    dropout: float = Field(0.0, ge=0, lt=1)  # 0 keeps policy and reference log-probs comparable
    target_modules: list[str] | Literal["all-linear"] = "all-linear"  # which linear layers get adapters


class CommonSettings(Strict):
    """Shared by SFT and GRPO: where and how the weights are trained."""

    device: Literal["cpu", "auto"] = "cpu"  # cpu forces CPU even where a GPU exists; auto: what accelerate picks
    precision: Literal["fp32", "bf16"] = "fp32"  # bf16 = mixed precision (GPU; slow or unsupported on most CPUs)
    gradient_checkpointing: bool = False  # trades ~20% speed for memory; only worth it for big models
    deepspeed: str | None = None  # a DeepSpeed JSON config (production: configs/deepspeed_zero3.json)
    accelerate_config: str | None = None  # grpo: the stage relaunches itself under `accelerate launch --config_file`
    lora: LoRASettings | None = None  # train LoRA adapters (merged into the saved model) instead of all weights


class SFTSettings(CommonSettings):
    learning_rate: float = Field(2e-5, gt=0)  # AdamW peak learning rate
    epochs: float = Field(1.0, gt=0)  # passes over the train tasks (ignored when max_steps > 0)
    max_steps: int = -1  # > 0: stop after this many optimizer steps instead of `epochs`
    per_device_batch_size: int = Field(4, ge=1)  # examples per device per micro-step
    grad_accum: int = Field(1, ge=1)  # micro-steps per optimizer step
    max_length: int = Field(2048, ge=16)  # prompt + answer tokens; longer examples are skipped, never truncated
    warmup_ratio: float = Field(0.0, ge=0, lt=1)  # share of steps with a linear warm-up
    seed: int = 0  # data order and initialisation
    max_tasks: int | None = Field(None, ge=1)  # stage: train on the first N train tasks (None: all)


class RollbackSettings(Strict):
    enabled: bool = True  # watch KL and reward each step; roll back on a spike or a collapse
    kl_max: float = Field(1.0, gt=0)  # a step KL above this is a spike (the seed saw ~0.02 -> 0.08 over 200 steps)
    kl_ratio: float = Field(5.0, gt=1)  # ... or above kl_ratio x the median of the last kl_window KL values
    kl_window: int = Field(10, ge=2)  # KL values the median needs before the ratio test applies
    kl_median_floor: float = Field(1e-3, ge=0)  # medians below this count as this: early KL is ~0
    reward_drop: float | None = Field(0.5, gt=0)  # collapse: reward < median - reward_drop x |median|; null = off
    reward_window: int = Field(10, ge=2)  # reward values the median needs before the collapse test applies
    beta_factor: float = Field(2.0, gt=1)  # beta is multiplied by this on each rollback ...
    beta_max: float = Field(0.2, gt=0)  # ... up to this cap
    max_rollbacks: int = Field(3, ge=0)  # one more spike after this many rollbacks is a TrainingError


class HackMonitorSettings(Strict):
    """rubricrl.train.monitor: reward up while the strict true metric goes down -> roll back."""

    enabled: bool = True
    every: int = Field(4, ge=1)  # greedy-decode the monitor's tasks every N steps (and before the first)
    n_tasks: int = Field(8, ge=1)  # validation tasks with gold answers (the stage takes the last N of val)
    max_new_tokens: int | None = Field(None, ge=8)  # None: grpo.max_completion_length
    batch_size: int = Field(8, ge=1)  # prompts decoded together
    window: int = Field(1, ge=1)  # compare each evaluation with the one this many evaluations back
    tolerance: float = Field(0.1, ge=0, le=1)  # a strict field accuracy drop beyond this, while the reward rose
    min_reward_rise: float = Field(0.0, ge=0)  # ... by more than this, is treated like a KL spike


class GRPOSettings(CommonSettings):
    learning_rate: float = Field(1e-6, gt=0)  # the seed's value; 5e-6 broke generation
    beta: float = Field(0.02, gt=0)  # KL coefficient; > 0 always (0 drops the reference model and the KL log)
    num_generations: int = Field(4, ge=2)  # completions per prompt; divides per-device batch x processes x grad_accum
    temperature: float = Field(0.7, gt=0)  # sampling temperature of the rollouts
    top_p: float = Field(1.0, gt=0, le=1)  # nucleus sampling of the rollouts
    max_prompt_length: int = Field(1024, ge=16)  # prompts longer than this (tokens) are left out of training
    max_completion_length: int = Field(128, ge=1)  # tokens generated per completion
    max_steps: int = Field(20, ge=1)  # optimizer steps
    save_steps: int = Field(5, ge=1)  # a checkpoint every this many steps (and at the end)
    save_total_limit: int | None = Field(3, ge=1)  # newest checkpoints kept; the last good one is always kept too
    per_device_batch_size: int = Field(4, ge=1)  # completions per device per micro-step
    grad_accum: int = Field(1, ge=1)  # micro-steps per optimizer step (one generation round per step)
    seed: int = 0  # sampling, data order and initialisation
    general_share: float = Field(0.1, ge=0, lt=1)  # share of general instructions mixed in (fixed medium reward)
    use_vllm: bool = False  # generate rollouts with vLLM (GPU, needs the vllm package)
    vllm_mode: Literal["colocate", "server"] = "colocate"  # colocate: vLLM shares the training GPUs
    table_every: int = Field(10, ge=0)  # log sampled completions with their scores to MLflow every N steps; 0 = never
    table_rows: int = Field(8, ge=1)  # completions per logged table
    rollback: RollbackSettings = RollbackSettings()
    monitor: HackMonitorSettings = HackMonitorSettings()
    start_from: Literal["sft", "base"] = "sft"  # stage: the SFT model (GRPO from base never wrote JSON here)
    max_tasks: int | None = Field(None, ge=1)  # stage: prompts drawn from the first N train tasks (None: all)

    @model_validator(mode="after")
    def _check(self):
        if self.rollback.beta_max < self.beta:
            raise ValueError(f"rollback.beta_max ({self.rollback.beta_max}) must be at least beta ({self.beta})")
        return self
