"""DVC stage `report`: the run report, one Markdown and one self-contained HTML page (outputs/report), assembled
from every stage's report section in stage order and the registry's promotion decisions; logged to MLflow. Takes
seconds: it only reads what the stages wrote, and a section not written yet is a note, not an error.

The registry's decisions (outputs/registry/promotion.md) are written by the flow's registry step, after the DVC
stages, so they are no DVC dep of this stage; the flow runs this stage last, forced when the registry decided.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from rubricrl import tracking
from rubricrl.config import Params, load_params
from rubricrl.core.atomic import output_set
from rubricrl.core.entry import stage_main
from rubricrl.report.assemble import Report, Section, assemble
from rubricrl.stages.paths import STAGES

OUT = Path("outputs/report")
REGISTRY = Path("outputs/registry/promotion.md")  # = rubricrl.release.registry.REPORT (the flow writes it)
TITLES = {"data": "Data", "prepare_model": "Base model", "sft": "SFT baseline", "rubric": "Rubric calibration",
          "grpo": "GRPO training", "eval_task": "Task evaluation", "eval_general": "General capability",
          "distill": "Distillation", "export": "Exports"}


def sections(root: Path = Path(".")) -> list[Section]:
    """Every stage's section in stage order, then the registry's decisions."""
    out = [Section(stage, TITLES[stage], root / paths.section, stage) for stage, paths in STAGES.items()]
    return out + [Section("registry", "Registry decisions", root / REGISTRY, "flow's registry", keep_title=True)]


def deps() -> list[str]:
    """What this stage reads (dvc.yaml): each stage's section and the figures beside it (a folder output covers
    them; a file output lists them), the registry's decisions apart (module doc)."""
    out = []
    for paths in STAGES.values():
        folder = [f for f in paths.files("outs") if Path(paths.section).is_relative_to(f) and f != paths.section]
        out += folder or [paths.section] + [f for f in paths.files("outs") + paths.files("plots")
                                            if f.endswith(".png")]
    return list(dict.fromkeys(out))


def run(params: Params) -> Report:
    meta = {"generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "commit": tracking.git_commit()}
    with tracking.stage_run(params.tracking, "report", {}) as run:
        with output_set(OUT) as staging:
            report = assemble(sections(), staging, meta=meta)
        for f in report.files:  # exactly this run's files (a folder written by hand may hold older ones)
            run.log_artifact(OUT / f.name, "report")
        print(f"report: {OUT / 'report.md'} and {OUT / 'report.html'} ({len(report.figures)} figures"
              + (f"; not produced yet: {', '.join(report.missing)}" if report.missing else "") + ")")
    return report


def main() -> None:
    """The stage: tasks/report.py (dvc.yaml's command) and `python -m` run it under stage_main."""
    run(load_params())


if __name__ == "__main__":
    stage_main(main)
