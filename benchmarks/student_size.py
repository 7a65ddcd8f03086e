"""Student size against retention on the CPU default: which student learns, and at what budget (README,
"Distillation").

    python benchmarks/student_size.py --run-dir /tmp/run --sizes 26 22 18 14 --steps 4 12

`--run-dir` is a finished `make run` checkout (its GRPO policy, test split and eval answers are the teacher, the
tasks and the teacher's held-out answers). For each (size, steps) the distill stage itself runs there
(`python -m rubricrl.stages.distill`) with an overlay of `distill.student_layers` and `distill.steps`
(layers chosen by measured importance, as the stage does), and its metrics/distill.json is read back: the
student's share of the teacher's parameters, the divergence on the held-out test conversations before and
after, the GKD loss first and last, strict field accuracy and valid-JSON answers of the student before and
after and of the teacher, the student's own gate, and the stage's wall time. The run folder's outputs/distill
is left as the last configuration wrote it (a scratch checkout: its dvc.lock no longer matches).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from rubricrl.core.tables import table  # noqa: E402


def valid_json_share(path: Path) -> float:
    """Share of answers whose outermost {...} parses as a JSON object (the strict metric's first hurdle)."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    ok = 0
    for r in rows:
        text = r["response"]
        try:
            ok += isinstance(json.loads(text[text.index("{"):text.rindex("}") + 1]), dict)
        except ValueError:
            pass
    return ok / len(rows) if rows else 0.0


def one(run_dir: Path, size: int, steps: int, extra: dict) -> dict:
    overlay = run_dir / f".cache/student-size-{size}-{steps}.yaml"
    overlay.parent.mkdir(parents=True, exist_ok=True)
    overlay.write_text(yaml.safe_dump({"distill": {"student_layers": size, "steps": steps, **extra}}))
    env = {**os.environ, "RUBRICRL_PARAMS_OVERLAY": str(overlay), "HF_HUB_OFFLINE": "1"}
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "rubricrl.stages.distill"], cwd=run_dir, env=env, check=True)
    seconds = time.perf_counter() - start
    d = json.loads((run_dir / "metrics/distill.json").read_text(encoding="utf-8"))
    acc = {m: d["models"][m]["all"]["field_accuracy"] for m in ("student before", "student after", "teacher")}
    return {"layers": size, "steps": steps, "params": d["student"]["ratio"],
            "kl_before": round(d["divergence"]["before"], 3), "kl_after": round(d["divergence"]["after"], 3),
            "loss_first": d["train"]["first_loss"], "loss_last": d["train"]["last_loss"],
            "acc_before": acc["student before"], "acc_after": acc["student after"], "acc_teacher": acc["teacher"],
            "valid_json_after": round(valid_json_share(run_dir / "outputs/distill/responses.jsonl"), 3),
            "gate": d["gate"]["outcome"], "seconds": round(seconds)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run-dir", type=Path, required=True)
    ap.add_argument("--sizes", type=int, nargs="+", default=[26, 22, 18, 14])
    ap.add_argument("--steps", type=int, nargs="+", default=[4])
    ap.add_argument("--n-prompts", type=int, default=None, help="distill.n_prompts (and pool) for every run")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/student_size.json"))
    args = ap.parse_args(argv)
    extra = {"n_prompts": args.n_prompts, "pool": max(args.n_prompts, 8)} if args.n_prompts else {}
    rows = []
    for steps in args.steps:
        for size in args.sizes:
            rows.append(one(args.run_dir.resolve(), size, steps, extra))
            print(json.dumps(rows[-1]), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    print(table(list(rows[0]), [list(r.values()) for r in rows]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
