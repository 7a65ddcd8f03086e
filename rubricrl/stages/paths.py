"""Every path a DVC stage reads or writes, declared once, by the stage that owns it.

Each stage's class lists what it writes (outs, metrics, plots) and what it reads of other stages' outputs
(deps), and `section`, its part of the run report (Markdown; figures beside it); a stage module, the flow, the registry step and the run report take paths from here and spell none
themselves. dvc.yaml is the one graph, and tests/stages/test_stage_paths.py holds it to these declarations (its data
deps, outs, metrics and plots are exactly these), so a path cannot drift between the two. This module imports
nothing: reading it never widens a stage's code deps.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

SECTIONS = "outputs/sections"  # the report sections of the stages that write no report of their own


def section(stage: str) -> str:
    return f"{SECTIONS}/{stage}.md"


@dataclass(frozen=True)
class StagePaths:
    """Base of the per-stage declarations: `outs`, `metrics` and `plots` name fields of the subclass."""

    outs: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()
    plots: tuple[str, ...] = ()
    deps: tuple[str, ...] = ()

    def files(self, kind: str) -> list[str]:
        return [getattr(self, name) for name in getattr(self, kind)]

    def declared(self) -> dict[str, list[str]]:
        """What dvc.yaml must say of this stage: {"deps": [...], "outs": [...], "metrics": [...], "plots": [...]}."""
        return {"deps": list(self.deps), "outs": self.files("outs"), "metrics": self.files("metrics"),
                "plots": self.files("plots")}

    def named(self) -> dict[str, str]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("outs", "metrics", "plots", "deps")}


@dataclass(frozen=True)
class Data(StagePaths):
    train: str = "data/train.jsonl"
    val: str = "data/val.jsonl"
    test: str = "data/test.jsonl"
    stats: str = "metrics/data.json"
    section: str = section("data")
    outs: tuple[str, ...] = ("train", "val", "test", "section")
    metrics: tuple[str, ...] = ("stats",)


DATA = Data()


@dataclass(frozen=True)
class PrepareModel(StagePaths):
    model: str = "outputs/models/base"
    section: str = section("prepare_model")
    outs: tuple[str, ...] = ("model", "section")


PREPARE_MODEL = PrepareModel()


@dataclass(frozen=True)
class Sft(StagePaths):
    model: str = "outputs/models/sft"
    result: str = "metrics/sft.json"
    section: str = section("sft")
    outs: tuple[str, ...] = ("model", "section")
    metrics: tuple[str, ...] = ("result",)
    deps: tuple[str, ...] = (PREPARE_MODEL.model, DATA.train)


SFT = Sft()
POLICIES = {"sft": SFT.model, "base": PREPARE_MODEL.model}  # grpo.start_from -> the model GRPO starts from


@dataclass(frozen=True)
class Rubric(StagePaths):
    draft: str = "outputs/rubric/draft.yaml"
    rubric: str = "outputs/rubric/rubric.yaml"
    report: str = "outputs/rubric/report.json"
    separation: str = "outputs/rubric/separation.png"
    reward_vs_accuracy: str = "outputs/rubric/reward_vs_accuracy.png"
    result: str = "metrics/rubric.json"
    section: str = "outputs/rubric/report.md"  # the calibration report is the stage's section
    outs: tuple[str, ...] = ("draft", "rubric", "report", "section")
    plots: tuple[str, ...] = ("separation", "reward_vs_accuracy")
    metrics: tuple[str, ...] = ("result",)
    # Calibrated on gold + corruptions of the val tasks and on samples of the model GRPO starts from
    # (grpo.start_from picks one of the two models: both are deps). Free-text tasks are drafted from the shipped
    # free_text rubric and measured on the hand-written reference set (package data, not code).
    deps: tuple[str, ...] = (DATA.train, DATA.val, SFT.model, PREPARE_MODEL.model,
                             "rubricrl/reward/rubrics/free_text.yaml", "rubricrl/data/reference/free_text",
                             "rubricrl/data/reference/free_text_heldout")


RUBRIC = Rubric()


@dataclass(frozen=True)
class Grpo(StagePaths):
    out: str = "outputs/grpo"  # the checkpoints (not an output: a rerun after a crash must resume from them)
    model: str = "outputs/grpo/model"
    rollbacks: str = "outputs/grpo/rollbacks.json"
    history: str = "outputs/grpo/history.csv"
    monitor: str = "outputs/grpo/monitor.csv"
    reward_plot: str = "outputs/grpo/reward.png"
    kl_plot: str = "outputs/grpo/kl.png"
    monitor_plot: str = "outputs/grpo/monitor.png"
    result: str = "metrics/grpo.json"
    section: str = "outputs/grpo/report.md"  # the training report
    outs: tuple[str, ...] = ("model", "section", "rollbacks", "reward_plot", "kl_plot", "monitor_plot")
    plots: tuple[str, ...] = ("history", "monitor")
    metrics: tuple[str, ...] = ("result",)
    deps: tuple[str, ...] = (SFT.model, PREPARE_MODEL.model, RUBRIC.rubric, RUBRIC.report, DATA.train, DATA.val)


GRPO = Grpo()
MODELS = {"base": PREPARE_MODEL.model, "sft": SFT.model, "grpo": GRPO.model}  # the models the evals compare


@dataclass(frozen=True)
class EvalTask(StagePaths):
    out: str = "outputs/eval"  # <model>/{metrics.json, responses.jsonl, samples.md}, report.md, summary.csv, PNGs
    result: str = "metrics/eval.json"
    section: str = "outputs/eval/report.md"
    outs: tuple[str, ...] = ("out",)
    metrics: tuple[str, ...] = ("result",)
    deps: tuple[str, ...] = (PREPARE_MODEL.model, SFT.model, GRPO.model, RUBRIC.rubric, DATA.test)

    def responses(self, model: str) -> str:
        """A model's per-task eval rows (id, part, response, total, strict)."""
        return f"{self.out}/{model}/responses.jsonl"

    @property
    def summary(self) -> str:
        return f"{self.out}/summary.csv"


EVAL_TASK = EvalTask()


@dataclass(frozen=True)
class EvalGeneral(StagePaths):
    out: str = "outputs/general"  # <model>/<suite>.jsonl and report.md
    suites: str = "rubricrl/general/data"  # the suites' items (package data, not code)
    result: str = "metrics/general.json"
    section: str = "outputs/general/report.md"
    outs: tuple[str, ...] = ("out",)
    metrics: tuple[str, ...] = ("result",)
    deps: tuple[str, ...] = ("rubricrl/general/data", PREPARE_MODEL.model, SFT.model, GRPO.model)

    def rows(self, model: str) -> str:
        return f"{self.out}/{model}"


EVAL_GENERAL = EvalGeneral()


@dataclass(frozen=True)
class Distill(StagePaths):
    out: str = "outputs/distill"  # student/, teacher.jsonl, responses.jsonl, report.md, general/
    student: str = "outputs/distill/student"
    responses: str = "outputs/distill/responses.jsonl"  # the student's answers in the eval's row format
    general_rows: str = "outputs/distill/general"  # with distill.general: the student's <suite>.jsonl, report.md
    result: str = "metrics/distill.json"
    section: str = "outputs/distill/report.md"
    outs: tuple[str, ...] = ("out",)
    metrics: tuple[str, ...] = ("result",)
    deps: tuple[str, ...] = (GRPO.model, RUBRIC.rubric, EVAL_TASK.out, EVAL_GENERAL.rows("base"), DATA.train, DATA.test)


DISTILL = Distill()


@dataclass(frozen=True)
class Export(StagePaths):
    out: str = "outputs/export"  # <source>/model-<quant>.gguf, <source>/gptq/, report.md
    result: str = "metrics/export.json"
    section: str = "outputs/export/report.md"
    outs: tuple[str, ...] = ("out",)
    metrics: tuple[str, ...] = ("result",)
    deps: tuple[str, ...] = (GRPO.model, DISTILL.out, RUBRIC.rubric, EVAL_TASK.out, DATA.train, DATA.test)


EXPORT = Export()
# export source -> (its model folder, its greedy answers to the test slice in the eval's row format)
EXPORT_SOURCES = {"grpo": (GRPO.model, EVAL_TASK.responses("grpo")), "student": (DISTILL.student, DISTILL.responses)}

STAGES: dict[str, StagePaths] = {"data": DATA, "prepare_model": PREPARE_MODEL, "sft": SFT, "rubric": RUBRIC,
                                 "grpo": GRPO, "eval_task": EVAL_TASK, "eval_general": EVAL_GENERAL,
                                 "distill": DISTILL, "export": EXPORT}
