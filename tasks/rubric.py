"""DVC stage `rubric`: draft a rubric from the task data, calibrate it on validation tasks (gold,
corruptions and samples of the model GRPO starts from), report."""

from pathlib import Path

from rubricrl import tracking
from rubricrl.atomic import write_json
from rubricrl.cli_support import stage_main
from rubricrl.config import load_params
from rubricrl.rubric.workflow import generate_draft, run_calibration, write_outputs
from rubricrl.taskfile import load_tasks

OUT_DIR = Path("outputs/rubric")
METRICS = "metrics/rubric.json"
POLICY = {"sft": "outputs/models/sft", "base": "outputs/models/base"}  # grpo.start_from -> model folder


def main() -> None:
    params = load_params()
    with tracking.stage_run(params.tracking, "rubric", {"rubric": params.rubric.model_dump(),
                                                        "scoring.judge": params.scoring.judge},
                            inputs=["data/train.jsonl", "data/val.jsonl"]) as run:
        draft, problems = generate_draft(load_tasks("data/train.jsonl"), params)
        cal = run_calibration(draft, load_tasks("data/val.jsonl"), params, policy_model=POLICY[params.grpo.start_from])
        metrics = write_outputs(OUT_DIR, draft, cal, params, problems)
        write_json(METRICS, metrics)
        run.log_metrics(metrics)
        run.log_artifacts(OUT_DIR, "rubric")
        run.log_outputs([OUT_DIR / "rubric.yaml"])


if __name__ == "__main__":
    stage_main(main)
