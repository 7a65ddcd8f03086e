"""DVC stage `grpo`: GRPO on the calibrated rubric, after the rubric gate; resumes after a crash."""

import hashlib
import json
import shutil
import sys
from pathlib import Path

from rubricrl import tracking
from rubricrl.atomic import write_csv, write_json, write_text
from rubricrl.cli_support import stage_main
from rubricrl.config import load_params
from rubricrl.rubric.report import check_gate
from rubricrl.rubric.reward import RubricReward
from rubricrl.rubric.scoring import RubricScorer
from rubricrl.rubric.spec import load_rubric
from rubricrl.taskfile import load_tasks

OUT, METRICS = Path("outputs/grpo"), "metrics/grpo.json"
RUBRIC_DIR = Path("outputs/rubric")
MODELS = {"sft": "outputs/models/sft", "base": "outputs/models/base"}


def fingerprint(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def main() -> None:
    from rubricrl.train.grpo import train_grpo
    from rubricrl.train.report import (HISTORY_COLUMNS, MONITOR_COLUMNS, history_rows, monitor_rows, reward_trend,
                                       training_markdown)

    params = load_params()
    cfg = params.grpo
    report = json.loads((RUBRIC_DIR / "report.json").read_text(encoding="utf-8"))
    overridden = check_gate(report, params.rubric, params.rubric.allow_gate_failures)
    for fail in overridden:
        print(f"warning: training despite a failed rubric gate (rubric.allow_gate_failures): {fail}", file=sys.stderr)
    tasks = load_tasks("data/train.jsonl")[: cfg.max_tasks]
    # The hack monitor's fixed slice: the last validation tasks with gold answers.
    monitor_tasks = [t for t in load_tasks("data/val.jsonl") if t.reference is not None][-cfg.monitor.n_tasks:]
    model_dir = MODELS[cfg.start_from]
    rubric_text = (RUBRIC_DIR / "rubric.yaml").read_text(encoding="utf-8")
    # Checkpoints of another configuration must never be resumed: start over when anything changed.
    stamp = fingerprint(cfg.model_dump(mode="json"), [t.id for t in tasks], [t.id for t in monitor_tasks], rubric_text,
                        tracking.file_md5(Path(model_dir) / "model.safetensors"))
    stamp_file = OUT / "fingerprint.json"
    resume = stamp_file.exists() and json.loads(stamp_file.read_text()).get("fingerprint") == stamp
    if not resume and OUT.exists():
        shutil.rmtree(OUT)
    write_json(stamp_file, {"fingerprint": stamp})
    scorer = RubricScorer(load_rubric(RUBRIC_DIR / "rubric.yaml"), judge_override=params.scoring.judge_config(),
                          policy_model=params.policy.model)
    reward = RubricReward(scorer, {t.id: t for t in tasks})
    with tracking.stage_run(params.tracking, "grpo", {"grpo": cfg.model_dump(mode="json")},
                            inputs=["data/train.jsonl", RUBRIC_DIR / "rubric.yaml"]) as mlflow:
        if mlflow and overridden:
            mlflow.set_tag("rubric.gate_override", " | ".join(overridden))
        result = train_grpo(model_dir, tasks, OUT, cfg, reward, resume=resume, monitor_tasks=monitor_tasks)
        trend = reward_trend(result["log_history"])
        metrics = {"steps": result["global_step"], "resumed_from_step": result["resumed_from_step"] or 0,
                   "rollbacks": len(result["rollbacks"]), "final_beta": result["beta"],
                   "hack_rollbacks": sum(r.get("kind") == "reward_hacking" for r in result["rollbacks"]),
                   "wall_seconds": round(result["train_seconds"], 1),
                   "reward_first": round(trend[0], 4) if trend else None,
                   "reward_last": round(trend[1], 4) if trend else None}
        write_text(OUT / "report.md", training_markdown(result))
        write_csv(OUT / "history.csv", history_rows(result["log_history"]), HISTORY_COLUMNS)  # `dvc plots`
        write_csv(OUT / "monitor.csv", monitor_rows(result["log_history"]), MONITOR_COLUMNS)
        write_json(METRICS, metrics)
        if mlflow:
            mlflow.log_metrics({f"grpo.{k}": v for k, v in metrics.items() if v is not None})
            mlflow.log_artifact(str(OUT / "report.md"), "grpo")


if __name__ == "__main__":
    stage_main(main)
