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
from pathlib import Path

import yaml
from pydantic import ValidationError

from rubricrl.cli_support import stage_main
from rubricrl.config import ScoringParams, TrackingParams
from rubricrl.errors import ConfigError
from rubricrl.train.settings import GRPOSettings


def read_sections(path: str) -> tuple[GRPOSettings, ScoringParams, TrackingParams]:
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        raise ConfigError(f"{p}: params file not found") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: must be a mapping of sections")
    out = []
    for key, cls in (("grpo", GRPOSettings), ("scoring", ScoringParams), ("tracking", TrackingParams)):
        try:
            out.append(cls.model_validate(data.get(key) or {}))
        except ValidationError as err:
            msgs = [f"{p}: {key}.{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors()]
            raise ConfigError("\n".join(msgs)) from None
    return tuple(out)


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

        settings, scoring, tracking_cfg = read_sections(args.params)
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
