"""Every settings model: one typed section per stage of params.yaml, the judge endpoint, the trainers.

One source of truth: the defaults written here *are* the CPU default, and params.yaml spells every key with
exactly these values (tests/config/test_config.py fails on any key whose value differs from its default here, and on
any key missing from params.yaml). A GPU profile (configs/production.yaml, configs/gpu.yaml) is an overlay that
holds only the keys that differ; `rubricrl config apply OVERLAY` writes it into params.yaml, and
`load_params(path, overlays)` (or RUBRICRL_PARAMS_OVERLAY, a list of files separated by ':') reads it on top
without writing anything (the flow's general-gate retrain).

A params file must name every section (a missing one is an error, never a silent fallback to the code
defaults); inside a section, a key left out takes its default. Keys given twice, unknown keys, and non-finite
numbers (.inf, .nan) are errors, each naming the file, line and key. Imports: core only.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, ClassVar, Literal, Union

from pydantic import AfterValidator, Field, ValidationError, field_validator, model_validator

from rubricrl.core.errors import ConfigError
from rubricrl.core.yamlfile import Strict, read_mapping, validation_error

# Generation engines (rubricrl.inference.generate): transformers on the profile's device, or llama.cpp on an F16 GGUF;
# auto (greedy answers): transformers on a GPU, llama.cpp on a CPU (continuous batching; measured 1.99x HF batches on
# AVX2 and 2.06x on AVX-512: benchmarks/generation_engines.py, README "Speed").
Engine = Literal["transformers", "llama_cpp", "auto"]


def _gen_batch(value: int | str) -> int | str:
    if value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return value
    raise ValueError(f"a generation batch is an integer >= 1 or 'auto', got {value!r}")


# A generation batch: prompts per generate call, or "auto": sized to the card's free memory on a GPU, the CPU default
# (the field's default) elsewhere (rubricrl.inference.batching).
GenBatch = Annotated[Union[int, str], AfterValidator(_gen_batch)]


def _count_or_auto(value: int | str) -> int | str:
    if value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return value
    raise ValueError(f"an integer >= 1 or 'auto', got {value!r}")


# GRPO's micro-batch and accumulation: a number, or "auto": the step's split sized to the card (rubricrl.train.memory)
AutoCount = Annotated[Union[int, str], AfterValidator(_count_or_auto)]

DEFAULT_PARAMS = "params.yaml"
OVERLAY_ENV = "RUBRICRL_PARAMS_OVERLAY"  # overlay files read on top of params.yaml by every stage (os.pathsep list)
Section = Strict


# --- the judge endpoint (scoring.openai_judge, a rubric's judges) --------------------------------------------

class JudgeConfig(Strict):
    """A judge of judge criteria: grounded (deterministic) or openai (an OpenAI-compatible endpoint)."""


    type: Literal["grounded", "openai", "embedding"]  # embedding: rubric items only (rubric.item_judge)
    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None  # name of the environment variable holding the key
    samples: int = Field(3, ge=1)  # median of k; stops early when the first two agree
    adaptive_samples: bool = False  # one sample once the judge proved consistent (audited); see OpenAIJudge
    warmup_verdicts: int = Field(5, ge=1)  # agreeing verdicts in a row before single samples
    audit_every: int = Field(10, ge=2)  # every n-th verdict still takes all samples
    temperature: float = 0.0
    timeout_s: float = Field(60.0, gt=0)
    max_retries: int = Field(4, ge=0)
    backoff_s: float = Field(0.5, ge=0)
    concurrency: int = Field(4, ge=1)
    max_tokens: int = Field(256, ge=16)
    response_format: Literal["auto", "json_schema", "json_object", "none"] = "auto"
    cache_dir: str | None = ".cache/judge"
    item_batch: int = Field(4, ge=1)  # a free-text task's rubric items graded per call (rubric.item_judge)
    # embedding: the cosine at which a reply sentence meets an item / shows a pitfall's mistake; the bars with the
    # best balanced accuracy on the embedded English replies (benchmarks/embedding_items.py)
    similarity: float = Field(0.2, gt=0, lt=1)
    pitfall_similarity: float = Field(0.425, gt=0, lt=1)

    @model_validator(mode="after")
    def _check(self):
        if self.type == "openai" and not (self.base_url and self.model):
            raise ValueError("an openai judge needs base_url and model")
        return self


def same_model(a: str | None, b: str | None) -> bool:
    """Two model names that plausibly name one model: equal ignoring case and a trailing slash, or by their last
    path part (Qwen/Qwen2.5-72B-Instruct and /models/qwen2.5-72b-instruct)."""
    if not (a and b):
        return False
    a, b = a.strip().rstrip("/\\").lower(), b.strip().rstrip("/\\").lower()
    return a == b or os.path.basename(a) == os.path.basename(b)


def _same_url(a: str | None, b: str | None) -> bool:
    return bool(a and b) and a.strip().rstrip("/").lower() == b.strip().rstrip("/").lower()


# --- the trainers (sft, grpo sections) -------------------------------------------------------------------

class LoRASettings(Strict):
    r: int = Field(8, ge=1)  # adapter rank
    alpha: int = Field(16, ge=1)  # scaling numerator (scale = alpha / r)
    dropout: float = Field(0.0, ge=0, lt=1)  # 0 keeps policy and reference log-probs comparable
    target_modules: list[str] | Literal["all-linear"] = "all-linear"  # which linear layers get adapters


class CommonSettings(Strict):
    """Shared by SFT and GRPO: where and how the weights are trained."""

    device: Literal["cpu", "auto"] = "cpu"  # cpu forces CPU even where a GPU exists; auto: what accelerate picks
    precision: Literal["fp32", "bf16", "auto"] = "fp32"  # bf16 = mixed precision; auto: bf16 where the GPU or CPU has it
    gradient_checkpointing: bool = False  # trades ~20% speed for memory; only worth it for big models
    deepspeed: str | None = None  # a DeepSpeed JSON config (production: configs/deepspeed_zero3.json)
    accelerate_config: str | None = None  # grpo: the stage relaunches itself under `accelerate launch --config_file`
    lora: LoRASettings | None = None  # train LoRA adapters (merged into the saved model) instead of all weights
    max_skipped_updates: int = Field(2, ge=0)  # non-finite updates skipped in a row; one more: GRPO rolls back, SFT stops


class SFTSettings(CommonSettings):
    # Measured on the CPU default (benchmarks/precision.py, README "Precision"): bf16 autocast made an SFT step 1.6x
    # faster with the same loss curve; auto takes it where the CPU has native bf16 (GRPO stays fp32: 1.1x).
    precision: Literal["fp32", "bf16", "auto"] = "auto"
    learning_rate: float = Field(5e-5, gt=0)  # AdamW peak; measured: 5 steps of batch 8 took SmolLM2 from 0% to 100% valid JSON
    epochs: float = Field(1.0, gt=0)  # passes over the train tasks (ignored when max_steps > 0)
    max_steps: int = 10  # > 0: stop after this many optimizer steps instead of `epochs`; -1: `epochs` passes
    per_device_batch_size: int = Field(4, ge=1)  # examples per device per micro-step
    grad_accum: int = Field(2, ge=1)  # micro-steps per optimizer step (8 examples a step on CPU)
    max_length: int = Field(1280, ge=16)  # prompt + answer tokens; longer examples are skipped, never truncated
    warmup_ratio: float = Field(0.0, ge=0, lt=1)  # share of steps with a linear warm-up
    seed: int = 0  # data order and initialisation
    max_tasks: int | None = Field(80, ge=1)  # stage: train on the first N train tasks (None: all); CPU: 80
    # A checkpoint (weights, optimizer, scheduler, RNG, data position) every N optimizer steps in
    # .cache/resume/sft: a kill loses at most N steps. CPU: 5 of 10 (a save of SmolLM2 with Adam: 1.6 GB, ~3 s).
    save_steps: int = Field(5, ge=1)


def sized_window(max_steps: int) -> int:
    """A null rollback window: half the steps, 2 to 10. The CPU default's 6 steps give 3 (the ratio and collapse
    tests judge steps 4-6; 10 could never apply); from 20 steps on it is the fixed 10 of before. Under 3 steps no
    window of 2 or more can apply: the report's safety-net table says so (rubricrl.train.nets)."""
    return min(10, max(2, max_steps // 2))


def sized_every(max_steps: int, window: int) -> int:
    """A null monitor.every: evaluations at 0, every, 2 x every, ... leave at least two comparisons with the
    evaluation `window` back (the CPU default: 0, 3, 6 for 6 steps and window 1)."""
    return max(1, max_steps // (window + 1))


class RollbackSettings(Strict):
    enabled: bool = True  # watch KL and reward each step; roll back on a spike or a collapse
    kl_max: float = Field(1.0, gt=0)  # a step KL above this is a spike (the seed saw ~0.02 -> 0.08 over 200 steps)
    kl_ratio: float = Field(5.0, gt=1)  # ... or above kl_ratio x the median of the last kl_window KL values
    # KL values the median needs before the ratio test applies (it first judges step kl_window + 1); null: sized
    # from grpo.max_steps (sized_window). A number the run cannot reach is refused (GRPOSettings).
    kl_window: int | None = Field(None, ge=2)
    kl_median_floor: float = Field(1e-3, ge=0)  # medians below this count as this: early KL is ~0
    reward_drop: float | None = Field(0.5, gt=0)  # collapse: reward < median - reward_drop x |median|; null = off
    # ... and below the median by more than reward_spread x the window's standard deviation: a step's reward is the
    # mean over its few prompts, so the prompt draw alone moves it (measured on the uncapped prices: -10 to +4 between
    # steps with KL at 0.0007, heavy-tailed, so not a median absolute deviation); a drop within that noise is the draw,
    # not a collapse. null: the drop alone decides (as before).
    reward_spread: float | None = Field(3.0, gt=0)
    reward_window: int | None = Field(None, ge=2)  # reward values the collapse test needs, as kl_window; null: sized
    beta_factor: float = Field(2.0, gt=1)  # beta is multiplied by this on each rollback ...
    beta_max: float = Field(0.2, gt=0)  # ... up to this cap
    max_rollbacks: int = Field(3, ge=0)  # one more spike after this many rollbacks is a TrainingError


class HackMonitorSettings(Strict):
    """rubricrl.train.monitor: reward up while the strict true metric goes down, or abstention up whatever the
    reward did, each on evidence -> restore the last good state, then roll back and go on or stop (after_trip)."""

    enabled: bool = True
    # Greedy-decode the monitor's tasks every N steps (and before the first); null: sized from grpo.max_steps so that
    # it compares at least twice (sized_every). A number the run cannot reach is refused (GRPOSettings).
    every: int | None = Field(None, ge=1)
    # Validation tasks with gold answers (a stratified slice of val). The rule counts a rise only when its one-sided
    # 97.5% bound, paired by task, clears the tolerance (rubricrl.metrics.rise): 8 tasks see a null rise of +0.30 with
    # 80% power, 16 +0.13 (target_rise 0.15), 32 +0.06; below 6 tasks it can only watch.
    n_tasks: int = Field(16, ge=1)
    # The null-for-present rise the monitor is sized to catch: `rubricrl config validate` and the GRPO report say
    # whether n_tasks sees it with 80% power ("acts") or the monitor can only watch.
    target_rise: float = Field(0.15, gt=0, le=1)
    max_new_tokens: int | None = Field(None, ge=8)  # None: grpo.max_completion_length
    batch_size: GenBatch = 8  # prompts decoded together
    window: int = Field(1, ge=1)  # compare each evaluation with the one this many evaluations back
    # ... and with the run's first evaluation (before any training): a drift in steps each inside the tolerances, or a
    # rollback that took its new baseline on an already drifted checkpoint, still fires (benchmarks/hackable_rubric.py)
    against_first: bool = True
    # A strict field accuracy fall whose lower bound is above this, while the reward's rise has its lower bound above
    # min_reward_rise: reward hacking. 0: any fall the monitor's tasks show beyond noise.
    tolerance: float = Field(0.0, ge=0, le=1)
    # ... or a null-for-present rise whose lower bound is above this (points: 0.05 = five stated values in a hundred
    # newly answered null): abstention, the seed's hack, trips whatever the reward did (on CPU nulls went 0.17 -> 0.86
    # in 3 steps while field accuracy fell only 0.08: benchmarks/hackable_rubric.py). A point rise whose interval
    # reaches the tolerance trips nothing (issue 44: 0.167 -> 0.222 on 8 tasks, +0.056, was noise).
    null_tolerance: float = Field(0.0, ge=0, le=1)
    min_reward_rise: float = Field(0.0, ge=0)  # the reward's rise counts when its lower bound is above this
    # After a trip: rollback (restore the last good evaluation's checkpoint, raise beta, train on) or stop (restore it
    # and end there: the restored weights are the GRPO model, the initial model when no step was good). CPU: stop, since
    # a redone step costs ~100 s and the run has 4; production rolls back.
    after_trip: Literal["rollback", "stop"] = "stop"


class GRPOSettings(CommonSettings):
    learning_rate: float = Field(3e-6, gt=0)  # CPU runs few steps; the seed's 1e-6 (production) is for 500
    beta: float = Field(0.02, gt=0)  # KL coefficient; > 0 always (0 drops the reference model and the KL log)
    num_generations: int = Field(4, ge=2)  # completions per prompt; divides per-device batch x processes x grad_accum
    temperature: float = Field(0.9, gt=0)  # sampling temperature of the rollouts
    # TRL's loss and advantage choices, said out loud (TRL 1.16's defaults): dapo normalises token losses by the active
    # tokens of the accumulated batch; sum_then_normalize sums the weighted criteria, then scales per group
    # (scale_rewards: group); normalize_then_sum (GDPO) scales each criterion within its group first, so a criterion
    # that varies little is not drowned by one that varies much (benchmarks/grpo_curve.py compares them).
    loss_type: Literal["grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo"] = "dapo"
    multi_objective_aggregation: Literal["sum_then_normalize", "normalize_then_sum"] = "sum_then_normalize"
    scale_rewards: Literal["group", "batch", "none"] = "group"
    top_p: float = Field(1.0, gt=0, le=1)  # nucleus sampling of the rollouts
    max_prompt_length: int = Field(1024, ge=16)  # prompts longer than this (tokens) are left out of training
    max_completion_length: int = Field(128, ge=1)  # tokens generated per completion
    max_steps: int = Field(4, ge=1)  # optimizer steps
    save_steps: int = Field(2, ge=1)  # a checkpoint every this many steps (and at the end)
    save_total_limit: int | None = Field(3, ge=1)  # newest checkpoints kept; the last good one is always kept too
    # completions per device per micro-step; auto: the largest divisor of step_completions whose activations fit the
    # card's free memory (rubricrl.train.memory), off a GPU the largest divisor up to the CPU default's 4
    per_device_batch_size: AutoCount = 4
    grad_accum: AutoCount = 2  # micro-steps per optimizer step (one generation round per step); auto: the step's rest
    # completions per device per optimizer step (one generate call); null: per_device_batch_size x grad_accum. Set, it
    # fixes the step whatever the micro-batch: both above auto, or numbers whose product it is.
    step_completions: int | None = Field(None, ge=1)
    seed: int = 0  # sampling, data order and initialisation
    general_share: float = Field(0.0, ge=0, lt=1)  # share of general instructions mixed in (fixed medium reward)
    use_vllm: bool = False  # generate rollouts with vLLM (GPU, needs the vllm package)
    vllm_mode: Literal["colocate", "server"] = "colocate"  # colocate: vLLM shares the training GPUs
    table_every: int = Field(2, ge=0)  # log sampled completions with their scores to MLflow every N steps; 0 = never
    table_rows: int = Field(8, ge=1)  # completions per logged table
    rollback: RollbackSettings = RollbackSettings()
    monitor: HackMonitorSettings = HackMonitorSettings()
    start_from: Literal["sft", "base"] = "sft"  # stage: the SFT model (GRPO from base never wrote JSON here)
    max_tasks: int | None = Field(400, ge=1)  # stage: prompts drawn from the first N train tasks (None: all)

    @model_validator(mode="after")
    def _check(self):
        self._check_batches()
        if self.rollback.beta_max < self.beta:
            raise ValueError(f"rollback.beta_max ({self.rollback.beta_max}) must be at least beta ({self.beta})")
        problems = self._nets_that_cannot_fire()
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def _check_batches(self) -> None:
        micro, accum, step = self.per_device_batch_size, self.grad_accum, self.step_completions
        autos = [k for k, v in (("per_device_batch_size", micro), ("grad_accum", accum)) if v == "auto"]
        if autos and step is None:
            raise ValueError(f"grpo.{autos[0]}: auto splits grpo.step_completions, which is null: set it (completions "
                             "a step) or give numbers")
        if len(autos) == 1:
            raise ValueError(f"grpo.{autos[0]} is auto but the other of per_device_batch_size and grad_accum is a "
                             "number: set both auto (the micro-batch sized to the card, the rest accumulated)")
        if step is not None and not autos and micro * accum != step:
            raise ValueError(f"grpo.step_completions={step} but per_device_batch_size x grad_accum = {micro} x {accum} "
                             f"= {micro * accum}: make them agree or set both auto")
        if step is not None and step % self.num_generations:
            raise ValueError(f"grpo.step_completions={step} is not a multiple of num_generations="
                             f"{self.num_generations} (a step holds whole prompt groups)")

    def split(self, micro: int) -> GRPOSettings:
        """These settings with the step's completions split into micro-batches of `micro` (an auto plan's)."""
        step = self.step_completions or self.per_device_batch_size * self.grad_accum
        return self.model_copy(update={"per_device_batch_size": micro, "grad_accum": step // micro,
                                       "step_completions": step})

    def sized(self) -> GRPOSettings:
        """These settings with every null window and monitor.every sized from max_steps (what training uses)."""
        r, m, n = self.rollback, self.monitor, self.max_steps
        return self.model_copy(update={
            "rollback": r.model_copy(update={"kl_window": r.kl_window or sized_window(n),
                                             "reward_window": r.reward_window or sized_window(n)}),
            "monitor": m.model_copy(update={"every": m.every or sized_every(n, m.window)})})

    def _nets_that_cannot_fire(self) -> list[str]:
        """Explicit windows and monitor.every under which a switched-on safety net never judges a step of this run
        (rubricrl.train.nets reports the same arithmetic, sized values included)."""
        r, m, n = self.rollback, self.monitor, self.max_steps
        out = []
        for key, window, what, on in (("kl_window", r.kl_window, "KL", True),
                                      ("reward_window", r.reward_window, "reward", r.reward_drop is not None)):
            if r.enabled and on and window is not None and window >= n:
                fix = (f"set it <= {n - 1}, null (sized from max_steps)" if n > 2 else f"no window fits {n} steps: "
                       f"set it null (the test stays off), raise grpo.max_steps to {window + 1}")
                out.append(f"grpo.rollback.{key}={window} needs {window} logged {what} values before a step it judges "
                           f"(the first: step {window + 1}) but grpo.max_steps={n}: {fix} or disable grpo.rollback")
        if m.enabled:
            every = m.every or sized_every(n, m.window)
            # The first judged evaluation: the first after step 0 against it (against_first), else evaluation `window`
            first = 1 if m.against_first else m.window
            if first * every > n:
                named = f"grpo.monitor.every={m.every}" if m.every else f"grpo.monitor.every=null (sized: {every})"
                out.append(f"{named} with grpo.monitor.window={m.window}"
                           + ("" if m.against_first else " (against_first: false)")
                           + f" first compares at step {first * every} but grpo.max_steps={n}: "
                           + (f"set every <= {n // first}, null (sized from max_steps)" if m.every and n >= first
                              else f"set window <= {n}") + " or disable grpo.monitor")
        return out


# --- params sections -----------------------------------------------------------------------------------------

class DataParams(Section):
    source: Literal["generate", "file"] = "generate"
    tasks_file: str | None = None  # source=file: a JSONL task file in the public task format
    # Generated data: JSON extraction (rubricrl/data/generate.py), free-text customer-service replies graded by their
    # own rubric items (rubricrl/data/replies.py), or both (mixed: each family half of every split).
    task_family: Literal["extraction", "free_text", "mixed"] = "extraction"
    seed: int = 0
    n_train: int = Field(800, ge=1)
    n_test: int = Field(200, ge=1)
    n_val: int = Field(50, ge=0)  # taken out of train: the rubric stage calibrates on these
    heldout_domains: list[str] | None = None  # generated data: domains kept out of training
    heldout_scenarios: list[str] | None = None  # generated free text: scenarios kept out (None: double_charge)
    test_fraction: float = Field(0.2, gt=0, lt=1)  # source=file without meta.part: share held out

    @model_validator(mode="after")
    def _check(self):
        if self.source == "file" and not self.tasks_file:
            raise ValueError("tasks_file: required when source is 'file'")
        return self


class ScoringParams(Section):
    rubric: str = "json_extraction"  # a shipped rubric by name, or a YAML path
    judge: Literal["grounded", "openai"] = "grounded"  # openai: every judge criterion uses openai_judge
    openai_judge: JudgeConfig | None = None  # endpoint settings when judge is 'openai'
    # The judge panel of the free-text checklist (rubricrl.metrics.checklist_judge): a second endpoint, serving a model
    # other than openai_judge's, grades the checklist's fact and guard entries in eval and the GRPO hack monitor;
    # null: the checklist's own procedure grades every entry.
    checklist_judge: JudgeConfig | None = None

    @model_validator(mode="after")
    def _check(self):
        if self.judge == "openai" and self.openai_judge is None:
            raise ValueError("openai_judge: required when judge is 'openai'")
        if self.openai_judge is not None and self.openai_judge.type != "openai":
            raise ValueError("openai_judge.type: must be 'openai'")
        panel, reward = self.checklist_judge, self.openai_judge
        if panel is not None:
            if panel.type != "openai":
                raise ValueError("checklist_judge.type: must be 'openai'")
            if reward is not None and reward.type == "openai" and same_model(panel.model, reward.model):
                where = " at the same endpoint" if _same_url(panel.base_url, reward.base_url) else ""
                raise ValueError(f"checklist_judge.model: {panel.model!r} is the reward's judge "
                                 f"(openai_judge.model {reward.model!r}{where}): the checklist is graded by another "
                                 "model, so that the true metric does not share the reward's blind spots")
        return self

    def judge_config(self) -> JudgeConfig | None:
        """The judge that replaces every judge a rubric names; None keeps the rubric's own judges."""
        return self.openai_judge if self.judge == "openai" else None


class RubricParams(Section):
    """The rubric stage: draft from the task data, then calibrate on validation tasks."""

    llm_proposals: bool = False  # also ask scoring.openai_judge for semantic criteria (the seed's method)
    n_answers: int = Field(20, ge=4)  # sampled good and bad answers shown to that model
    n_calibration: int = Field(50, ge=5)  # validation tasks (gold + one corruption per failure mode each)
    policy_responses: str | None = None  # optional JSONL (id, response) of policy samples, instead of sampling
    policy_samples: int = Field(4, ge=0)  # on-policy calibration: samples per task from the GRPO start model (0: off)
    policy_tasks: int = Field(6, ge=1)  # ... on N calibration tasks (stratified), at grpo.temperature / max_completion_length
    sample_engine: Engine = "llama_cpp"  # llama_cpp: an F16 GGUF, each prompt processed once for its k samples (CPU)
    sample_batch: GenBatch = 2  # transformers: prompts per generate call (each with its policy_samples sequences)
    min_auc: float = Field(0.6, ge=0.5, le=1.0)  # a component must separate gold from its targets this well
    keep_weak: bool = False  # keep non-discriminating components (with a warning) instead of dropping
    min_margin: float = Field(0.4, ge=0)  # every probe must score at least this far below gold, on every task
    min_spearman: float = Field(0.5, ge=-1, le=1)  # Spearman(reward, strict field accuracy) on the corruption set
    min_policy_spearman: float = Field(0.4, ge=-1, le=1)  # ... on the policy's own samples (seed 004: > 0.4)
    min_policy_pairwise: float = Field(0.7, ge=0, le=1)  # reward orders two samples of a task as the true metric does
    # Which figures the bars above apply to: the calibration as given (referenced: the reward reads each task's
    # reference) or with the references hidden from the reward (label_free: what the reward is worth on data
    # without gold answers), or both. Referenced here: the generated data and its training tasks all have one.
    gate_on: Literal["referenced", "label_free", "both"] = "referenced"
    allow_gate_failures: bool = False  # explicit override: train despite failed probes (logged)
    # Free text: the reward and the checklist measured on the hand-written reference set (scenarios the generator
    # does not write, rubricrl/calibrate/reference.py): the share of its good-above-bad pairs each orders. The bars
    # are issue 45's goals: 0.97 for the reward (measured 0.973 on 864 pairs), 0.95 for the checklist (measured
    # 0.971). No good reply may score 0.
    reference: bool = True
    reference_min_reward: float = Field(0.97, ge=0, le=1)
    reference_min_checklist: float = Field(0.95, ge=0, le=1)
    seed: int = 0


class EvalParams(Section):
    """eval_task: greedy generations on the test split from base, SFT and GRPO."""

    max_per_part: int | None = Field(20, ge=1)  # CPU: N test tasks of each part, stratified (None: all)
    base_per_part: int | None = Field(10, ge=1)  # the base model on N of them (stratified); None: as max_per_part
    batch_size: GenBatch = 8  # prompts generated together
    max_new_tokens: int = Field(200, ge=8)  # per answer; gold answers: median 78 tokens, max 184
    n_boot: int = Field(1000, ge=100)  # resamples: per-model bootstrap 95% intervals, the paired permutation p
    samples_table: int = Field(20, ge=0)  # sample outputs with per-criterion reasons, per model
    engine: Engine = "auto"  # greedy decoding: transformers (batched, the profile's device), llama_cpp (F16 GGUF), auto
    # Answers are generated this many tasks at a time and journaled (.cache/resume/eval_task): a kill loses at most
    # one chunk per model. A chunk is generated as one call, so a rerun's answers are the uninterrupted run's.
    save_every: int = Field(32, ge=1)


class SuiteSizes(Section):
    """Items per general suite (None: the whole suite; 0: not run; the CPU default runs a fixed prefix of each)."""

    # the CPU default's sizes are chosen by power (rubricrl.release.plan: `rubricrl config validate`)
    ifeval: int | None = Field(240, ge=0)  # IFEval-style prompts (304, EN/ZH alternating; 240 short-answer ones first)
    humaneval: int | None = Field(0, ge=0)  # HumanEval (164); CPU 0: SmolLM2-135M passed 0/5 for base, SFT and GRPO (uninformative)
    qa: int | None = Field(120, ge=0)  # project-written factual questions (200, EN/ZH alternating)
    perplexity: int | None = Field(24, ge=0)  # paragraphs of the held-out text (24)


class GeneralRetrain(Section):
    """When the general gate fails, the flow retrains GRPO with learning_rate x lr_factor and beta x beta_factor."""

    max_attempts: int = Field(2, ge=0)  # 0: no retraining, the flow stops at the first failure
    lr_factor: float = Field(0.5, gt=0, lt=1)
    beta_factor: float = Field(2.0, gt=1)
    beta_floor: float = Field(0.01, gt=0)  # beta 0 (no KL term) becomes this before the factor applies


class SandboxParams(Section):
    """Limits of one HumanEval program in the code sandbox (rubricrl.general.sandbox says which mechanism enforces
    each on a host: `sandbox.isolation()`)."""

    # All the program's processes together where a cgroup can be made (cgroup v2 memory.max, v1 memory.limit_in_bytes);
    # elsewhere each process gets RLIMIT_AS = memory_mb / max_processes, so the processes together stay under it too.
    memory_mb: int = Field(512, ge=64)
    max_processes: int = Field(4, ge=1)  # processes and threads at once, the program's own included (pids.max, RLIMIT_NPROC)
    files_mb: int = Field(64, ge=1)  # its private file space (one tmpfs: its folder, TMPDIR, /tmp, /var/tmp, /dev/shm)
    max_files: int = Field(1024, ge=16)  # files and folders in that space

    @model_validator(mode="after")
    def _check(self):
        if self.memory_mb // self.max_processes < 64:
            raise ValueError("memory_mb / max_processes: must be >= 64 (a process's share where no cgroup bounds the "
                             "whole program; Python itself needs ~60 MB of address space)")
        return self


class GeneralParams(Section):
    """eval_general: base, SFT and GRPO on general suites; the gate is each suite's drop vs base."""

    sizes: SuiteSizes = SuiteSizes()
    engine: Engine = "llama_cpp"  # greedy replies: transformers batches, or llama.cpp continuous batching (F16 GGUF)
    batch_size: GenBatch = 8
    max_new_tokens: dict[Literal["ifeval", "humaneval", "qa"], int] = {"ifeval": 64, "humaneval": 192, "qa": 24}
    code_timeout_s: float = Field(5.0, gt=0)  # per program, in the sandbox
    sandbox: SandboxParams = SandboxParams()  # each program's memory, process and file limits
    perplexity_max_tokens: int = Field(256, ge=8)
    n_boot: int = Field(1000, ge=100)  # sign flips for the paired permutation p
    # Replies are generated this many items at a time and journaled per model and suite (.cache/resume/eval_general):
    # a kill loses at most one chunk; a chunk is one call, so a rerun's replies are the uninterrupted run's.
    save_every: int = Field(48, ge=1)
    # The non-inferiority margin per suite: the gate passes when the 95% interval of (model - base) lies above
    # -margin (rubricrl.metrics.decide); perplexity in nats per token (0.1 nats ~ +10.5% perplexity).
    tolerance: dict[Literal["ifeval", "humaneval", "qa", "perplexity"], float] = {
        "ifeval": 0.10, "humaneval": 0.10, "qa": 0.10, "perplexity": 0.10}
    gated: list[Literal["sft", "grpo"]] = ["grpo"]  # a failure of these makes the flow retrain GRPO (every model's
    # verdict is recorded, and the registry's general gate reads it)
    retrain: GeneralRetrain = GeneralRetrain()

    @field_validator("max_new_tokens")
    @classmethod
    def _every_generation_suite(cls, v: dict) -> dict:
        missing = {"ifeval", "humaneval", "qa"} - set(v)
        if missing:
            raise ValueError(f"missing suite(s): {', '.join(sorted(missing))}")
        if any(x < 8 for x in v.values()):
            raise ValueError("every suite needs at least 8 new tokens")
        return v

    @field_validator("tolerance")
    @classmethod
    def _every_suite(cls, v: dict) -> dict:
        missing = {"ifeval", "humaneval", "qa", "perplexity"} - set(v)
        if missing:
            raise ValueError(f"missing suite(s): {', '.join(sorted(missing))}")
        if any(x < 0 for x in v.values()):
            raise ValueError("tolerances must be >= 0")
        return v


class DistillParams(Section):
    """distill: the GRPO policy (teacher) into a smaller student with TRL's GKD on the hardest prompts."""

    student: str = "layers"  # "layers": the teacher's own layers (student_layers of them); else a model id/path
    student_layers: int = Field(14, ge=1)  # CPU: 14 of SmolLM2's 30 layers (~58% of its parameters)
    layers_by: Literal["importance", "even"] = "importance"  # which teacher layers: block influence on its answers
    # The student's own gate: the divergence from the teacher on held-out test conversations fell, and its strict
    # field accuracy is not worse than the teacher's by more than this (non-inferiority on the 95% interval).
    # A student that does not pass is reported, never registered.
    margin: float = Field(0.1, ge=0)
    pool: int = Field(4, ge=1)  # candidate training prompts (stratified, the train split's second half), teacher answers cached
    n_prompts: int = Field(2, ge=1)  # the hardest of them (highest KL(teacher || student) on the teacher's answer)
    steps: int = Field(2, ge=1)
    # A GKD checkpoint (student, optimizer, RNG, data position) every N steps in .cache/resume/distill, where the
    # teacher's answers, the student's initial weights and its eval answers are kept too: a kill loses at most N steps.
    save_steps: int = Field(1, ge=1)
    batch_size: int = Field(2, ge=1)  # per micro-step
    grad_accum: int = Field(1, ge=1)  # micro-steps an update (production: 2 x 4 = the seed's 8 conversations)
    gradient_checkpointing: bool = False  # the student's activations recomputed in backward (production: the 3B)
    learning_rate: float = Field(5e-5, gt=0)
    lmbda: float = Field(0.0, ge=0, le=1)  # on-policy fraction (student samples); CPU 0: student generation is slow
    beta: float = Field(0.5, ge=0, le=1)  # generalized JSD: 0 = forward KL, 1 = reverse KL
    temperature: float = Field(0.9, gt=0)
    max_new_tokens: int = Field(160, ge=8)  # teacher answers, and the student's on-policy samples
    max_length: int = Field(1024, ge=64)
    eval_tasks: int = Field(8, ge=1)  # student before/after and teacher: N tasks of the eval's test slice, stratified
    batch_eval: GenBatch = 8
    save_every: int = Field(32, ge=1)  # the teacher's and the students' answers: journaled this many at a time
    engine: Engine = "auto"  # the teacher's greedy answers: transformers, llama_cpp (its F16 GGUF) or auto
    device: Literal["cpu", "auto"] = "cpu"  # auto: the GPU where one is visible (hardness, GKD)
    precision: Literal["fp32", "bf16", "auto"] = "fp32"  # bf16: the teacher in bf16, bf16 mixed precision in GKD
    max_skipped_updates: int = Field(2, ge=0)  # non-finite updates skipped in a row; one more stops distillation
    general: bool = False  # the student on the general suites (general.*), paired vs base: its registry general gate

    @model_validator(mode="after")
    def _check(self):
        if self.n_prompts > self.pool:
            raise ValueError(f"n_prompts ({self.n_prompts}) cannot exceed pool ({self.pool})")
        return self


class GPTQParams(Section):
    """export.gptq: GPTQ with GPTQModel, calibrated on training prompts with their gold answers."""

    bits: Literal[2, 3, 4, 8] = 4
    group_size: int = Field(64, ge=8)  # must divide the hidden and MLP sizes (SmolLM2: 576 = 9 x 64; Qwen2.5: 128)
    calibration: int = Field(8, ge=1)  # training tasks used as calibration text


FourBitType = Literal["q4_0", "q4_1", "iq4_nl", "iq4_xs", "q4_k_s", "q4_k_m"]


class FourBitParams(Section):
    """export.four_bit: the `q4` artifact, the smallest 4-bit GGUF type that keeps the source's answers."""

    # llama.cpp's 4-bit types tried, smallest file first (each quantized from the F16 GGUF, then reloaded and scored)
    types: list[FourBitType] = Field(["q4_0", "iq4_nl", "q4_k_s", "q4_k_m"], min_length=1)
    # kept: at least this share of the source's strict field accuracy and of its valid-JSON rate on the export's
    # tasks; none that keeps it: no 4-bit artifact (reported with every try, promotion not blocked)
    retain: float = Field(0.95, gt=0, le=1)
    # A try scored on export.n_tasks is refused there below `screen` of the source; at or above, it is scored on
    # `confirm_tasks` tasks of the same slice (those n_tasks included; at most those the source model answered) and
    # decided on them (null: on n_tasks only)
    screen: float = Field(0.8, ge=0, le=1)
    confirm_tasks: int | None = Field(24, ge=1)


class ExportParams(Section):
    """export: GGUF and GPTQ artifacts of the trained policy and the student, each verified by reloading and scoring."""

    # source model -> its artifacts: q8_0 and q4_k_m (llama.cpp quantizations of the F16 GGUF), q4 (the 4-bit type
    # chosen by retention, four_bit), gptq (GPTQModel)
    artifacts: dict[Literal["grpo", "student"], list[Literal["q8_0", "q4", "q4_k_m", "gptq"]]] = {
        "grpo": ["q8_0", "q4"]}
    four_bit: FourBitParams = FourBitParams()
    gptq: GPTQParams = GPTQParams()
    n_tasks: int = Field(8, ge=1)  # verification: N tasks of the eval's test slice, stratified
    max_new_tokens: int = Field(200, ge=8)
    speed_tasks: int = Field(2, ge=1)  # tokens/s of artifact vs HF fp32, one prompt at a time, same prompts
    speed_tokens: int = Field(64, ge=8)
    serve_check: bool = True  # llama_cpp.server on the Q4_K_M file + the openai client, one task
    # Retention goals (artifact / source strict field accuracy); a miss is reported, and blocks promotion
    # only with gate_on_retention (a few CPU tasks make the ratio noisy; production gates on it).
    goals: dict[Literal["q8_0", "q4", "q4_k_m", "gptq"], float] = {"q8_0": 0.99, "q4": 0.95, "q4_k_m": 0.95,
                                                                   "gptq": 0.95}
    gate_on_retention: bool = False


class RegistryParams(Section):
    """The MLflow model registry: one registered model, aliases `challenger` and `champion`."""

    name: str = Field("rubricrl-extractor", min_length=1)
    # candidates, in training order: each is registered, becomes challenger and is promoted through the gates
    candidates: list[Literal["sft", "grpo", "student"]] = ["sft", "grpo", "student"]
    # The task gate on strict field accuracy, challenger - champion paired by task, decided on its 95% interval
    # (rubricrl.metrics.decide): a policy replaces the champion only when shown better (superiority, lower bound
    # > task_margin); the distilled student, whose worth is its size, only when shown not worse by more than
    # student_margin (non-inferiority, lower bound >= -student_margin). Inconclusive promotes nothing.
    task_margin: float = Field(0.0, ge=0)
    student_margin: float = Field(0.05, ge=0)
    # No part may regress: a test part (in-domain, held-out domain) whose interval lies wholly below -part_margin
    # fails the task gate, even when the pooled difference passes (a held-out drop hidden by in-domain gains).
    part_margin: float = Field(0.05, ge=0)
    # Abstention: the challenger's share of stated values it does not give (answered null, left out, or no parsed
    # answer) shown above the reference's by more than this (the interval's lower bound), pooled or on a part, fails
    # the gate at any accuracy.
    null_margin: float = Field(0.02, ge=0)
    promote: bool = True  # the flow promotes after registering (False: register only; `rubricrl registry promote`)


class PolicyParams(Section):
    model: str = "smollm2-135m-instruct"  # 'smollm2-135m-instruct' = the embedded default


class TrackingParams(Section):
    uri: str = "sqlite:///mlruns/mlflow.db"
    experiment: str = "rubricrl"
    artifact_root: str = "mlruns/artifacts"
    enabled: bool = True
    lock_wait_s: float = Field(60, gt=0)  # how long a command waits for a store another process holds, then fails


class PipelineParams(Section):
    """`rubricrl pipeline serve`: the schedule, and the task files whose new content retriggers a run."""

    cron: str = "0 3 * * *"  # fires only under `prefect server start` + PREFECT_API_URL (embedded: no scheduler)
    watch: list[str] | None = None  # None: data.tasks_file when data.source is 'file', else none; []: none
    watch_interval_s: float = Field(10, gt=0)  # how often serve hashes the watched files
    retrigger_force: list[str] = ["data"]  # rerun with --force on a retrigger: a file named by params is no DVC dep
    push: bool = True  # `dvc push` to the default DVC remote after a successful run (a failed push only warns)

    CRON_FIELDS: ClassVar[tuple] = (("minute", 0, 59, ""), ("hour", 0, 23, ""), ("day", 1, 31, ""),
                                     ("month", 1, 12, "jan feb mar apr may jun jul aug sep oct nov dec"),
                                     ("weekday", 0, 7, "sun mon tue wed thu fri sat"))

    @field_validator("cron")
    @classmethod
    def _check_cron(cls, expr: str) -> str:
        # Plain 5-field cron, checked without importing Prefect (seconds, in every stage that reads params);
        # `pipeline serve` hands it to Prefect's CronSchedule, which accepts all of these.
        if expr.strip() in ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"):
            return expr.strip()
        fields = expr.split()
        if len(fields) != 5:
            raise ValueError(f"{expr!r} is not a cron expression (5 fields: minute hour day month weekday)")
        for field, (what, lo, hi, names) in zip(fields, cls.CRON_FIELDS):
            names = names.split()
            for part in field.split(","):
                span, slash, step = part.partition("/")
                ends = [] if span == "*" else span.split("-", 1)
                nums = [names.index(e.lower()) + (what == "month") if e.lower() in names
                        else int(e) if e.isdigit() else -1 for e in ends]
                bad_step = slash and not (step.isdigit() and int(step) > 0)
                if bad_step or not all(lo <= n <= hi for n in nums) or nums != sorted(nums):
                    raise ValueError(f"{expr!r} is not a cron expression: {part!r} is no {what} ({lo}-{hi})")
        return expr

    def watched(self, data: DataParams) -> list[str]:
        if self.watch is not None:
            return self.watch
        return [data.tasks_file] if data.source == "file" and data.tasks_file else []


class Params(Section):
    data: DataParams = DataParams()
    scoring: ScoringParams = ScoringParams()
    rubric: RubricParams = RubricParams()
    sft: SFTSettings = SFTSettings()
    grpo: GRPOSettings = GRPOSettings()
    eval: EvalParams = EvalParams()
    general: GeneralParams = GeneralParams()
    distill: DistillParams = DistillParams()
    export: ExportParams = ExportParams()
    registry: RegistryParams = RegistryParams()
    policy: PolicyParams = PolicyParams()
    tracking: TrackingParams = TrackingParams()
    pipeline: PipelineParams = PipelineParams()


def merge(base: dict, overlay: dict) -> dict:
    """`base` with `overlay` laid over it: mappings merge key by key; a list or a scalar replaces."""
    out = dict(base)
    for key, value in overlay.items():
        out[key] = merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def env_overlays() -> list[Path]:
    """The overlay files named by RUBRICRL_PARAMS_OVERLAY (os.pathsep-separated; empty entries ignored)."""
    return [Path(p) for p in os.environ.get(OVERLAY_ENV, "").split(os.pathsep) if p]


def load_params(path: str | Path = DEFAULT_PARAMS, overlays: list[str | Path] | None = None) -> Params:
    """params.yaml (every section named) with each overlay laid over it in order; `overlays` None: the files
    RUBRICRL_PARAMS_OVERLAY names. Every problem names the file and line where its key is written."""
    path = Path(path)
    data, root = read_mapping(path, "params")
    sources = [(path, root)]
    problems = []
    missing = [name for name in Params.model_fields if name not in data]
    if missing:
        problems.append(f"{path}: missing section(s): {', '.join(missing)} (a params file names every section; "
                        f"copy them from the shipped params.yaml)")
    for overlay in env_overlays() if overlays is None else map(Path, overlays):
        layer, layer_root = read_mapping(overlay, "params overlay")
        data = merge(data, layer)
        sources.append((overlay, layer_root))
    try:
        params = Params.model_validate(data)
    except ValidationError as err:
        problems.append(str(validation_error(err, data, sources)))
    if problems:
        raise ConfigError("\n".join(problems))
    return params


def load_overlay(path: str | Path, params: str | Path = DEFAULT_PARAMS) -> dict:
    """An overlay's mapping, checked against `params` (the merged result must validate)."""
    load_params(params, [path])
    return read_mapping(Path(path), "params overlay")[0]


def apply_overlay(overlay: str | Path, params: str | Path = DEFAULT_PARAMS) -> list[tuple[str, object, object]]:
    """Write an overlay's keys into a params file, keeping its comments and layout (a YAML round trip, as
    `dvc exp run -S` does); nothing is written unless the result validates. Returns (key, old, new) per change."""
    import io

    from ruamel.yaml import YAML

    from rubricrl.core.atomic import write_text

    params, layer = Path(params), load_overlay(overlay, params)
    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.representer.add_representer(type(None), lambda r, _: r.represent_scalar("tag:yaml.org,2002:null", "null"))
    doc = yaml.load(params.read_text(encoding="utf-8"))
    changes: list[tuple[str, object, object]] = []

    def lay(target, values: dict, prefix: str) -> None:
        for key, value in values.items():
            here = target.get(key) if hasattr(target, "get") else None
            if isinstance(value, dict) and hasattr(here, "items"):
                lay(here, value, f"{prefix}{key}.")
            elif here != value:
                changes.append((f"{prefix}{key}", here, value))
                target[key] = value

    lay(doc, layer, "")
    out = io.StringIO()
    yaml.dump(doc, out)
    write_text(params, out.getvalue())
    load_params(params, [])  # what was written reads back
    return changes
