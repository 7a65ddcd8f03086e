"""DVC stage `sft`: the seed's baseline, TRL SFTTrainer on the training prompts with gold answers."""

import time

from rubricrl import tracking
from rubricrl.atomic import write_json
from rubricrl.cli_support import stage_main
from rubricrl.config import load_params
from rubricrl.taskfile import load_tasks

BASE, OUT, METRICS = "outputs/models/base", "outputs/models/sft", "metrics/sft.json"


def main() -> None:
    from rubricrl.train.sft import train_sft

    params = load_params()
    cfg = params.sft
    tasks = load_tasks("data/train.jsonl")[: cfg.max_tasks]
    with tracking.stage_run(params.tracking, "sft", {"sft": cfg.model_dump(mode="json")},
                            inputs=["data/train.jsonl"]) as run:
        start = time.monotonic()
        out = train_sft(BASE, tasks, OUT, cfg)  # per-step loss goes to this MLflow run
        metrics = {"train_tasks": len(tasks), "wall_seconds": round(time.monotonic() - start, 1)}
        write_json(METRICS, metrics)
        run.log_metrics(metrics)
        run.log_outputs([out / "config.json"])


if __name__ == "__main__":
    stage_main(main)
