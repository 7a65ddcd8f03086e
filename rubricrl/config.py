"""params.yaml: one typed section per stage. Errors name the file, line and key.

A params file must name every section (a missing one is an error, never a silent fallback to the
code defaults); inside a section, a key left out takes the default written beside it below. Keys
given twice, unknown keys, and non-finite numbers (.inf, .nan) are errors.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from rubricrl.errors import ConfigError
from rubricrl.yamlfile import read_mapping, validation_error
from rubricrl.rubric.spec import JudgeConfig
from rubricrl.train.settings import GRPOSettings, SFTSettings

# Generation engines (rubricrl.evals.generate): transformers on the profile's device, or llama.cpp on an F16 GGUF.
Engine = Literal["transformers", "llama_cpp"]

DEFAULT_PARAMS = "params.yaml"


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class DataParams(Section):
    source: Literal["generate", "file"] = "generate"
    tasks_file: str | None = None  # source=file: a JSONL task file in the public task format
    seed: int = 0
    n_train: int = Field(800, ge=1)
    n_test: int = Field(200, ge=1)
    n_val: int = Field(50, ge=0)  # taken out of train: the rubric stage calibrates on these
    heldout_domains: list[str] | None = None  # generated data: domains kept out of training
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

    @model_validator(mode="after")
    def _check(self):
        if self.judge == "openai" and self.openai_judge is None:
            raise ValueError("openai_judge: required when judge is 'openai'")
        if self.openai_judge is not None and self.openai_judge.type != "openai":
            raise ValueError("openai_judge.type: must be 'openai'")
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
    policy_tasks: int = Field(12, ge=1)  # ... on the first N calibration tasks, at grpo.temperature / max_completion_length
    sample_engine: Engine = "transformers"  # llama_cpp: an F16 GGUF, each prompt processed once for its k samples (CPU)
    min_auc: float = Field(0.6, ge=0.5, le=1.0)  # a component must separate gold from its targets this well
    keep_weak: bool = False  # keep non-discriminating components (with a warning) instead of dropping
    min_margin: float = Field(0.4, ge=0)  # every probe must score at least this far below gold, on every task
    min_spearman: float = Field(0.5, ge=-1, le=1)  # Spearman(reward, strict field accuracy) on the corruption set
    min_policy_spearman: float = Field(0.4, ge=-1, le=1)  # ... on the policy's own samples (seed 004: > 0.4)
    min_policy_pairwise: float = Field(0.7, ge=0, le=1)  # reward orders two samples of a task as the true metric does
    allow_gate_failures: bool = False  # explicit override: train despite failed probes (logged)
    seed: int = 0


class EvalParams(Section):
    """eval_task: greedy generations on the test split from base, SFT and GRPO."""

    max_per_part: int | None = Field(None, ge=1)  # CPU: the first N test tasks of each part (None: all)
    batch_size: int = Field(8, ge=1)  # prompts generated together
    max_new_tokens: int = Field(256, ge=8)  # per answer; gold answers are ~80 tokens (p90 ~115)
    n_boot: int = Field(1000, ge=100)  # bootstrap resamples for the 95% confidence intervals
    samples_table: int = Field(20, ge=0)  # sample outputs with per-criterion reasons, per model
    engine: Engine = "transformers"  # greedy decoding: transformers (batched, the profile's device) or llama_cpp (F16 GGUF)


class SuiteSizes(Section):
    """Items per general suite (None: the whole suite; the CPU default runs a fixed prefix of each)."""

    ifeval: int | None = Field(None, ge=1)  # project-written IFEval-style prompts (64, EN/ZH alternating)
    humaneval: int | None = Field(None, ge=1)  # HumanEval problems (164), the first N
    qa: int | None = Field(None, ge=1)  # project-written factual questions (80, EN/ZH alternating)
    perplexity: int | None = Field(None, ge=1)  # paragraphs of the held-out text (24)


class GeneralRetrain(Section):
    """When the general gate fails, the flow retrains GRPO with learning_rate x lr_factor and beta x beta_factor."""

    max_attempts: int = Field(2, ge=0)  # 0: no retraining, the flow stops at the first failure
    lr_factor: float = Field(0.5, gt=0, lt=1)
    beta_factor: float = Field(2.0, gt=1)
    beta_floor: float = Field(0.01, gt=0)  # beta 0 (no KL term) becomes this before the factor applies


class GeneralParams(Section):
    """eval_general: base, SFT and GRPO on general suites; the gate is each suite's drop vs base."""

    sizes: SuiteSizes = SuiteSizes()
    engine: Engine = "transformers"  # greedy replies: transformers batches, or llama.cpp one prompt at a time (F16 GGUF)
    batch_size: int = Field(8, ge=1)
    max_new_tokens: dict[Literal["ifeval", "humaneval", "qa"], int] = {"ifeval": 200, "humaneval": 256, "qa": 64}
    code_timeout_s: float = Field(5.0, gt=0)  # per program, in the sandbox
    perplexity_max_tokens: int = Field(256, ge=8)
    n_boot: int = Field(1000, ge=100)
    # The largest drop vs base (model - base, paired point estimate) each suite tolerates; perplexity is
    # judged on the mean per-paragraph negative log-likelihood in nats (0.1 nats ~ +10.5% perplexity).
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
    pool: int = Field(16, ge=1)  # candidate training prompts (the last N of the train split), teacher answers cached
    n_prompts: int = Field(8, ge=1)  # the hardest of them (highest KL(teacher || student) on the teacher's answer)
    steps: int = Field(8, ge=1)
    batch_size: int = Field(2, ge=1)
    learning_rate: float = Field(5e-5, gt=0)
    lmbda: float = Field(0.0, ge=0, le=1)  # on-policy fraction (student samples); CPU 0: student generation is slow
    beta: float = Field(0.5, ge=0, le=1)  # generalized JSD: 0 = forward KL, 1 = reverse KL
    temperature: float = Field(0.9, gt=0)
    max_new_tokens: int = Field(160, ge=8)  # teacher answers, and the student's on-policy samples
    max_length: int = Field(1024, ge=64)
    eval_tasks: int = Field(8, ge=1)  # student before/after and teacher: the first N tasks of the eval's test slice
    batch_eval: int = Field(8, ge=1)
    engine: Engine = "transformers"  # the teacher's greedy answers: transformers or llama_cpp (its F16 GGUF)
    general: bool = True  # the student on the general suites (general.*), paired vs base: its registry general gate

    @model_validator(mode="after")
    def _check(self):
        if self.n_prompts > self.pool:
            raise ValueError(f"n_prompts ({self.n_prompts}) cannot exceed pool ({self.pool})")
        return self


class GPTQParams(Section):
    """export.gptq: GPTQ with GPTQModel, calibrated on training prompts with their gold answers."""

    bits: Literal[2, 3, 4, 8] = 4
    group_size: int = Field(64, ge=8)  # must divide the hidden and MLP sizes (SmolLM2: 576 = 9 x 64; Qwen2.5: 128)
    calibration: int = Field(32, ge=1)  # training tasks used as calibration text


class ExportParams(Section):
    """export: GGUF and GPTQ artifacts of the trained policy and the student, each verified by reloading and scoring."""

    # source model -> its artifacts: q8_0 and q4_k_m (llama.cpp quantizations of the F16 GGUF), gptq (GPTQModel)
    artifacts: dict[Literal["grpo", "student"], list[Literal["q8_0", "q4_k_m", "gptq"]]] = {
        "grpo": ["q8_0", "q4_k_m", "gptq"], "student": ["q8_0", "q4_k_m", "gptq"]}
    gptq: GPTQParams = GPTQParams()
    n_tasks: int = Field(8, ge=1)  # verification: the first N tasks of the eval's test slice
    max_new_tokens: int = Field(200, ge=8)
    speed_tasks: int = Field(3, ge=1)  # tokens/s of artifact vs HF fp32, one prompt at a time, same prompts
    speed_tokens: int = Field(64, ge=8)
    serve_check: bool = True  # llama_cpp.server on the Q4_K_M file + the openai client, one task
    # Retention goals (artifact / source strict field accuracy); a miss is reported, and blocks promotion
    # only with gate_on_retention (a few CPU tasks make the ratio noisy; production gates on it).
    goals: dict[Literal["q8_0", "q4_k_m", "gptq"], float] = {"q8_0": 0.99, "q4_k_m": 0.95, "gptq": 0.95}
    gate_on_retention: bool = False


class RegistryParams(Section):
    """The MLflow model registry: one registered model, aliases `challenger` and `champion`."""

    name: str = Field("rubricrl-extractor", min_length=1)
    # candidates, in training order: each is registered, becomes challenger and is promoted through the gates
    candidates: list[Literal["sft", "grpo", "student"]] = ["sft", "grpo", "student"]
    task_margin: float = Field(0.0, ge=0)  # challenger's strict field accuracy may trail champion's by this much
    promote: bool = True  # the flow promotes after registering (False: register only; `rubricrl registry promote`)


class PolicyParams(Section):
    model: str = "smollm2-135m-instruct"  # 'smollm2-135m-instruct' = the embedded default


class TrackingParams(Section):
    uri: str = "sqlite:///mlruns/mlflow.db"
    experiment: str = "rubricrl"
    artifact_root: str = "mlruns/artifacts"
    enabled: bool = True


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


def load_params(path: str | Path = DEFAULT_PARAMS) -> Params:
    path = Path(path)
    data, root = read_mapping(path, "params")
    problems = []
    missing = [name for name in Params.model_fields if name not in data]
    if missing:
        problems.append(f"{path}: missing section(s): {', '.join(missing)} (a params file names every section; "
                        f"copy them from the shipped params.yaml)")
    try:
        params = Params.model_validate(data)
    except ValidationError as err:
        problems.append(str(validation_error(err, data, root, path)))
    if problems:
        raise ConfigError("\n".join(problems))
    return params
