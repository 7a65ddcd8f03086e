"""Command-line GRPO run, one process or many:

    python -m rubricrl.train.grpo_launch --model M --tasks train.jsonl --out runs/grpo
    accelerate launch --multi_gpu --num_processes 8 -m rubricrl.train.grpo_launch --model M --tasks ... --out ...

`--multi_gpu` also gives several CPU processes (DDP over gloo) on a machine without GPUs;
accelerate's `--cpu --num_processes N` starts only one process unless it is given an MPI hostfile.

Settings come from the `grpo`, `scoring` and `tracking` sections of --params (each optional).
Rerunning the same command after a crash resumes from the last complete checkpoint.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys

from rubricrl.cli_support import stage_main
from rubricrl.config import load_params


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m rubricrl.train.grpo_launch", description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="policy model folder (e.g. the SFT output)")
    ap.add_argument("--tasks", required=True, help="train tasks (JSONL, the public task format)")
    ap.add_argument("--out", required=True, help="output folder: checkpoints/, model/, train_result.json")
    ap.add_argument("--params", default="params.yaml", help="YAML with optional grpo/scoring/tracking sections")
    ap.add_argument("--no-resume", action="store_true", help="start over, deleting earlier checkpoints")
    args = ap.parse_args(argv)

    def run() -> None:
        from rubricrl import tracking
        from rubricrl.rubric.reward import RubricReward
        from rubricrl.rubric.scoring import build_scorer
        from rubricrl.taskfile import load_tasks
        from rubricrl.train.grpo import train_grpo

        params = load_params(args.params)  # missing sections take their defaults
        settings, scoring, tracking_cfg = params.grpo, params.scoring, params.tracking
        tasks = load_tasks(args.tasks)
        reward = RubricReward(build_scorer(scoring, policy_model=args.model), {t.id: t for t in tasks})
        rank = int(os.environ.get("RANK", "0"))
        run_ctx = (tracking.stage_run(tracking_cfg, "grpo", settings.model_dump(mode="json"), inputs=[args.tasks])
                   if rank == 0 else contextlib.nullcontext())
        with run_ctx:
            result = train_grpo(args.model, tasks, args.out, settings, reward, resume=not args.no_resume)
        print(f"grpo_launch: rank {rank}/{result['world_size']} finished at step {result['global_step']}",
              file=sys.stderr, flush=True)
        if rank == 0:
            print(json.dumps({k: v for k, v in result.items() if k != "log_history"}))

    stage_main(run)


if __name__ == "__main__":
    main()
