"""Orchestration overhead: the Prefect flow (+ MLflow runs + `dvc repro` per stage) vs the same stage
commands run bare, side by side in one run.

A scratch project gets one stage per stage of the real dvc.yaml, each a command that works for a fixed
time (`--stage-seconds`) and writes one output. Measured:
  bare   the stage commands one after another (what `python -m rubricrl.stages.<stage>` costs besides its work);
  flow   `rubricrl.flow.pipeline.pipeline(project=...)`: Prefect (embedded server), the MLflow pipeline run,
         `dvc repro --single-item` per stage, the concurrency slot, `dvc push` to a local remote.
The overhead is flow - bare, in seconds; it does not grow with a stage's work, so it is also reported
as a share of a real `make run` chain (`--chain-seconds`, default: the last measured fresh-clone run).
Exits non-zero when that share exceeds 5%.

  .venv/bin/python benchmarks/orchestration_overhead.py
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def scratch(dst: Path, seconds: float) -> list[str]:
    stages = list(yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"])
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["tracking"].update(uri=f"sqlite:///{dst}/mlflow.db", artifact_root=str(dst / "art"))
    (dst / "params.yaml").write_text(yaml.safe_dump(params))
    work = f"{sys.executable} -c \"import sys, time; time.sleep({seconds}); open(sys.argv[1], 'w').write('x')\""
    spec = {"stages": {s: {"cmd": f"{work} out_{s}.txt", "outs": [f"out_{s}.txt"],
                           **({"deps": [f"out_{prev}.txt"]} if prev else {})}
                       for prev, s in zip([None] + stages[:-1], stages)}}
    (dst / "dvc.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    subprocess.run([sys.executable, "-m", "dvc", "init", "--no-scm", "-q"], cwd=dst, check=True, env=env)
    subprocess.run([sys.executable, "-m", "dvc", "remote", "add", "-d", "local", str(dst / "remote")],
                   cwd=dst, check=True, env=env)
    return [spec["stages"][s]["cmd"] for s in stages]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stage-seconds", type=float, default=5.0)
    ap.add_argument("--chain-seconds", type=float, default=1875.0, help="a real make run (31:15 on a fresh clone)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        proj = Path(tmp) / "proj"
        proj.mkdir()
        cmds = scratch(proj, args.stage_seconds)
        start = time.perf_counter()
        for cmd in cmds:
            subprocess.run(cmd, shell=True, cwd=proj, check=True)
        bare = time.perf_counter() - start
        for p in proj.glob("out_*.txt"):
            p.unlink()
        import rubricrl.flow.pipeline as fp  # sets the project-local Prefect environment first

        start = time.perf_counter()
        fp.pipeline(project=str(proj))
        flow = time.perf_counter() - start
    overhead = flow - bare
    share = overhead / args.chain_seconds
    print(f"{len(cmds)} stages of {args.stage_seconds:g} s of work each")
    print(f"bare stage commands   {bare:8.1f} s")
    print(f"Prefect + MLflow + DVC{flow:8.1f} s")
    print(f"overhead              {overhead:8.1f} s ({overhead / len(cmds):.1f} s a stage); "
          f"{share:.1%} of a {args.chain_seconds / 60:.1f}-minute make run (goal <= 5%)")
    sys.exit(0 if share <= 0.05 else 1)


if __name__ == "__main__":
    main()
