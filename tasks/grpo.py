"""DVC stage `grpo`: GRPO on the calibrated rubric, after the rubric gate; resumes after a crash.

One process (`python tasks/grpo.py`) or several, with the same code:
`accelerate launch --config_file configs/accelerate_zero3.yaml tasks/grpo.py` on GPUs, or
`accelerate launch --multi_gpu --num_processes N tasks/grpo.py` for N CPU processes (DDP over gloo;
accelerate's `--cpu --num_processes N` starts only one process without an MPI hostfile). Every rank
checks the gate and trains; only the main process touches the output folder and MLflow.
"""

import contextlib
import hashlib
import json
import shutil
import signal
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


def weights_md5(model_dir: str) -> dict:
    """md5 per weight file: a big model is saved in shards (model-0000N-of-0000M.safetensors)."""
    return {p.name: tracking.file_md5(p) for p in sorted(Path(model_dir).glob("*.safetensors"))}


def relaunch_under_accelerate(config: str) -> None:
    """`python tasks/grpo.py` (as DVC and the flow run it) with grpo.accelerate_config set: run this same script
    under `accelerate launch --config_file CONFIG` (e.g. 8 GPUs, ZeRO-3) and exit with its code."""
    import os
    import subprocess

    if "LOCAL_RANK" not in os.environ:  # not yet under a launcher
        cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", config, __file__]
        sys.exit(subprocess.call(cmd))


def main() -> None:
    from accelerate.utils import broadcast_object_list

    from rubricrl.train.grpo import process_state, train_grpo
    from rubricrl.train.report import (HISTORY_COLUMNS, MONITOR_COLUMNS, history_rows, monitor_rows, reward_trend,
                                       training_markdown)

    params = load_params()
    cfg = params.grpo
    if cfg.accelerate_config:
        relaunch_under_accelerate(cfg.accelerate_config)
    report = json.loads((RUBRIC_DIR / "report.json").read_text(encoding="utf-8"))
    # Every rank reads the same report, so a failed gate stops them all here, before any process group exists.
    overridden = check_gate(report, params.rubric, params.rubric.allow_gate_failures)
    tasks = load_tasks("data/train.jsonl")[: cfg.max_tasks]
    # The hack monitor's fixed slice: the last validation tasks with gold answers.
    monitor_tasks = [t for t in load_tasks("data/val.jsonl") if t.reference is not None][-cfg.monitor.n_tasks:]
    model_dir = MODELS[cfg.start_from]
    rubric_text = (RUBRIC_DIR / "rubric.yaml").read_text(encoding="utf-8")
    main_process = process_state(cfg).is_main_process
    resume = None
    if main_process:
        for fail in overridden:
            print(f"warning: training despite a failed rubric gate (rubric.allow_gate_failures): {fail}", file=sys.stderr)
        # Checkpoints of another configuration must never be resumed: start over when anything changed.
        stamp = fingerprint(cfg.model_dump(mode="json"), [t.id for t in tasks], [t.id for t in monitor_tasks],
                            rubric_text, weights_md5(model_dir))
        stamp_file = OUT / "fingerprint.json"
        resume = stamp_file.exists() and json.loads(stamp_file.read_text()).get("fingerprint") == stamp
        if not resume and OUT.exists():
            shutil.rmtree(OUT)
        write_json(stamp_file, {"fingerprint": stamp})
    # The main process decides; the others wait here until its folder work is done, then do the same.
    [resume] = broadcast_object_list([resume])
    scorer = RubricScorer(load_rubric(RUBRIC_DIR / "rubric.yaml"), judge_override=params.scoring.judge_config(),
                          policy_model=params.policy.model)
    reward = RubricReward(scorer, {t.id: t for t in tasks})
    stage_run = (tracking.stage_run(params.tracking, "grpo", {"grpo": cfg.model_dump(mode="json")},
                                    inputs=["data/train.jsonl", RUBRIC_DIR / "rubric.yaml"])
                 if main_process else contextlib.nullcontext(tracking.NoRun()))
    if main_process:  # torchrun stops the other ranks with SIGTERM when one fails: close the MLflow run as FAILED
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    with stage_run as run:
        if overridden:
            run.set_tag("rubric.gate_override", " | ".join(overridden))
        result = train_grpo(model_dir, tasks, OUT, cfg, reward, resume=resume, monitor_tasks=monitor_tasks)
        if not main_process:
            return
        trend = reward_trend(result["log_history"])
        metrics = {"steps": result["global_step"], "resumed_from_step": result["resumed_from_step"] or 0,
                   "rollbacks": len(result["rollbacks"]), "final_beta": result["beta"],
                   "hack_rollbacks": sum(r.get("kind") == "reward_hacking" for r in result["rollbacks"]),
                   "wall_seconds": round(result["train_seconds"], 1),
                   "reward_first": round(trend[0], 4) if trend else None,
                   "reward_last": round(trend[1], 4) if trend else None}
        write_text(OUT / "report.md", training_markdown(result))
        rows = history_rows(result["log_history"])
        criteria = sorted({k for e in rows for k in e if k.startswith("rewards/") and k.endswith("/mean")})
        write_csv(OUT / "history.csv", rows, {**HISTORY_COLUMNS, **{k: k for k in criteria}})  # `dvc plots`, report
        write_json(OUT / "rollbacks.json", {"rollbacks": result["rollbacks"]})  # the report's KL markers
        write_csv(OUT / "monitor.csv", monitor_rows(result["log_history"]), MONITOR_COLUMNS)
        write_json(METRICS, metrics)
        run.log_metrics({f"grpo.{k}": v for k, v in metrics.items()})
        run.log_artifact(OUT / "report.md", "grpo")


if __name__ == "__main__":
    stage_main(main)
