"""Settings -> TRL configs. Everything TRL 1.16 defaults differently from what we want is set here."""

from __future__ import annotations

from pathlib import Path

from rubricrl.core.errors import ConfigError
from rubricrl.core.resume import accelerate_digest, file_digest
from rubricrl.config import CommonSettings, GRPOSettings, LoRASettings, SFTSettings
from rubricrl.inference.hf import resolve_precision

def _checkpointing_field() -> str:
    import dataclasses

    from transformers import TrainingArguments

    names = {f.name for f in dataclasses.fields(TrainingArguments)}
    return "activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing"


_CHECKPOINTING = _checkpointing_field()


def tf32(device: str, precision: str) -> bool | None:
    """TF32 matmuls for fp32 training on an Ampere-or-newer GPU (measured on an H200: fp32 + TF32 ran GRPO clean
    where bf16 autocast gave NaN gradients at step 12); None leaves torch's default elsewhere."""
    import torch

    if device == "cpu" or precision != "fp32" or not torch.cuda.is_available():
        return None
    return True if torch.cuda.get_device_capability()[0] >= 8 else None


def stamp_settings(s: CommonSettings) -> dict:
    """The settings as this host trains with them, for a resume stamp (rubricrl.core.resume): precision and device
    resolved as common_kwargs gives them to the trainer (auto is bf16 on one host, fp32 on another), the accelerate
    and DeepSpeed configs by content (the same path may hold another file)."""
    import torch

    return {**s.model_dump(mode="json"), "precision": resolve_precision(s.device, s.precision),
            "device": "cpu" if s.device == "cpu" or not torch.cuda.is_available() else "cuda",
            "accelerate_config": accelerate_digest(s.accelerate_config), "deepspeed": file_digest(s.deepspeed)}


def common_kwargs(s: CommonSettings) -> dict:
    import torch

    precision = resolve_precision(s.device, s.precision)
    return {
        # auto on a machine without a GPU is the CPU: with use_cpu off there, transformers leaves the process
        # group of an accelerate launch unused and each process trains alone (found by the miniature).
        "use_cpu": s.device == "cpu" or not torch.cuda.is_available(),
        # TRL's base config turns bf16 on whenever fp16 is off (trl/trainer/base_config.py, __post_init__).
        "bf16": precision == "bf16",
        "tf32": tf32(s.device, precision),
        # TRL defaults gradient_checkpointing to True (trl/trainer/base_config.py:62), which transformers 5
        # renamed activation_checkpointing (5.22); setting the new name also sets the old one TRL reads. The GPU
        # image pins an older transformers for vLLM, which knows only the old name.
        _CHECKPOINTING: s.gradient_checkpointing,
        "deepspeed": s.deepspeed,  # a DeepSpeed JSON (configs/deepspeed_zero3.json); HF fills in its "auto" values
        "report_to": "none",  # metrics go to MLflow through our own callback (rubricrl.train.mlflow_log)
        "dataloader_num_workers": 0,
        "ddp_find_unused_parameters": False,  # every parameter (or LoRA adapter) gets a gradient
    }


def peft_config(lora: LoRASettings | None):
    if lora is None:
        return None
    from peft import LoraConfig

    return LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                      target_modules=lora.target_modules, task_type="CAUSAL_LM")


def grpo_config(s: GRPOSettings, output_dir: Path, beta: float, reward_weights: list[float]):
    """TRL's GRPOConfig for these settings. An `auto` micro-batch still unplanned (train_grpo plans it on the card
    first) is the CPU default's split of the step: the same step, for the process state and dry checks."""
    from trl import GRPOConfig

    from rubricrl.train.memory import plan_micro_batch

    if s.per_device_batch_size == "auto":
        s = s.split(plan_micro_batch(s.step_completions).micro_batch)
    extra = {}
    if s.use_vllm:
        extra = {"vllm_mode": s.vllm_mode, "vllm_max_model_length": s.max_prompt_length + s.max_completion_length}
    try:
        return GRPOConfig(
            output_dir=str(output_dir),
            learning_rate=s.learning_rate,
            beta=beta,  # TRL's default is 0.0, which drops the reference model and the `kl` log
            num_generations=s.num_generations,
            temperature=s.temperature,
            top_p=s.top_p,
            max_completion_length=s.max_completion_length,
            max_steps=s.max_steps,
            per_device_train_batch_size=s.per_device_batch_size,
            gradient_accumulation_steps=s.grad_accum,
            reward_weights=reward_weights,
            loss_type=s.loss_type,
            multi_objective_aggregation=s.multi_objective_aggregation,
            scale_rewards=s.scale_rewards,
            logging_steps=1,  # the rollback monitor judges every step
            save_strategy="steps",
            save_steps=s.save_steps,
            save_total_limit=None,  # we prune ourselves so the last good checkpoint is never deleted
            seed=s.seed,
            disable_dropout=True,  # policy and reference log-probs must be comparable
            use_vllm=s.use_vllm,
            **extra,
            **common_kwargs(s),
        )
    except ValueError as err:  # TRL checks batch/group divisibility against the real process count
        raise ConfigError(f"grpo: {err}") from None


def sft_config(s: SFTSettings, output_dir: Path, save: bool = False):
    """save: a checkpoint every s.save_steps steps into output_dir (the stage resumes from it after a kill)."""
    from trl import SFTConfig

    return SFTConfig(
        output_dir=str(output_dir),
        learning_rate=s.learning_rate,
        num_train_epochs=s.epochs,
        max_steps=s.max_steps,
        per_device_train_batch_size=s.per_device_batch_size,
        gradient_accumulation_steps=s.grad_accum,
        warmup_steps=s.warmup_ratio,  # transformers 5 reads a value below 1 as a share of the steps
        max_length=s.max_length,
        completion_only_loss=True,  # loss on the answer only, never on the prompt
        packing=False,
        # Batches of similar length: with random batches of 4, padding made the embedded data's SFT 31% more
        # tokens than the examples have (lengths 291-1066); grouped, 3%. Every example is still seen once.
        train_sampling_strategy="group_by_length",
        logging_steps=1,
        save_strategy="steps" if save else "no",  # the finished model is published atomically either way
        save_steps=s.save_steps,
        save_total_limit=None,  # rubricrl.train.checkpoints prunes: only marked-complete ones count
        seed=s.seed,
        **common_kwargs(s),
    )
