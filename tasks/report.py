"""DVC stage `report`: one Markdown and one self-contained HTML report of the run, with its plots
(rubricrl/runreport.py), into outputs/report; logged to MLflow. Takes seconds: it only reads what the
earlier stages wrote, and an input not produced yet is a note in the report, not an error."""

from datetime import datetime, timezone
from pathlib import Path

from rubricrl import tracking
from rubricrl.atomic import output_set
from rubricrl.cli_support import stage_main
from rubricrl.config import load_params
from rubricrl.runreport import ReportInputs, build_report

OUT = Path("outputs/report")
INPUTS = ReportInputs(
    history="outputs/grpo/history.csv",
    monitor="outputs/grpo/monitor.csv",
    rollbacks="outputs/grpo/rollbacks.json",
    rubric="outputs/rubric/report.json",
    eval_summary="outputs/eval/summary.csv",
    eval_metrics="metrics/eval.json",
    metrics={"data": "metrics/data.json", "sft": "metrics/sft.json", "rubric": "metrics/rubric.json",
             "grpo": "metrics/grpo.json"},
    export="metrics/export.json",
)


def main() -> None:
    params = load_params()
    meta = {"generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "commit": tracking.git_commit()}
    with tracking.stage_run(params.tracking, "report", {}) as run:
        with output_set(OUT) as staging:
            report = build_report(INPUTS, staging, meta)
        for f in report.files:  # exactly this run's files (a folder written by hand may hold older ones)
            run.log_artifact(OUT / f.name, "report")
        print(f"report: {OUT / 'report.md'} and {OUT / 'report.html'} ({len(report.figures)} plots)")


if __name__ == "__main__":
    stage_main(main)
