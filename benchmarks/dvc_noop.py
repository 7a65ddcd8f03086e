"""`dvc repro` with nothing changed must stay fast (goal: at most 5 s).

Builds a scratch copy of the stage graph (dvc.yaml, params.yaml, the code deps) whose outputs are
placeholders committed as up to date, so nothing trains; then times `dvc repro` three times and
gates on the median. Prints the seconds; exits 1 over the limit or if any stage would run.

    .venv/bin/python benchmarks/dvc_noop.py [--limit 5] [--out-mb 0]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools.dvc_deps import scratch_project  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--limit", type=float, default=5.0, help="seconds (default 5)")
    ap.add_argument("--out-mb", type=float, default=0, help="size of each placeholder output, MB (model-like sizes)")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="rubricrl-dvc-noop-") as tmp:
        proj = scratch_project(Path(tmp) / "proj", ROOT, out_bytes=max(64, int(args.out_mb * 2**20)))
        env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            res = subprocess.run([sys.executable, "-m", "dvc", "repro"], cwd=proj, env=env, capture_output=True, text=True)
            times.append(time.perf_counter() - start)
            if res.returncode != 0 or "Running stage" in res.stdout + res.stderr:
                print(f"dvc repro on an up-to-date graph ran something or failed (exit {res.returncode}):\n"
                      f"{res.stdout}{res.stderr}", file=sys.stderr)
                return 1
    median = statistics.median(times)
    print(f"dvc repro, nothing changed: {median:.2f} s median of {args.runs} "
          f"({', '.join(f'{t:.2f}' for t in times)}); limit {args.limit:g} s")
    return 0 if median <= args.limit else 1


if __name__ == "__main__":
    sys.exit(main())
