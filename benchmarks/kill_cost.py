"""Work lost to a kill at each long stage's worst moment, in a project whose chain has run (`make run`):

    cd <project> && python benchmarks/kill_cost.py eval_task sft export eval_general distill

Per stage, one after the other: the stage uninterrupted (full), the stage killed at its worst point (the last save
before the end written but not marked, or mid-append of its largest last chunk: RUBRICRL_KILL_AT), and the rerun.
Without resume a kill loses everything up to it (kill_s); with it, killed run + rerun - uninterrupted. Results also
go to metrics/kill_cost.json. Run it on an idle machine: the three runs of a stage are compared with each other."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

PY = os.path.abspath(".venv/bin/python")
# stage -> its worst kill point with the CPU default's sizes
POINTS = {"sft": "save:2", "eval_task": "journal:4", "eval_general": "journal:6", "distill": "save:2",
          "export": "journal:3"}
SAID = ("read back", "resuming", "put back")  # what a rerun says it reused


def run(stage: str, kill: str | None = None) -> tuple[float, int, str]:
    """(wall seconds, exit code, stderr tail on failure or the lines saying what was reused)."""
    env = {k: v for k, v in os.environ.items() if k != "RUBRICRL_KILL_AT"}
    env.update(PATH=f"{os.path.dirname(PY)}:{os.environ['PATH']}", HF_HUB_OFFLINE="1")
    if kill:
        env["RUBRICRL_KILL_AT"] = kill
    start = time.monotonic()
    p = subprocess.run([PY, "-m", f"rubricrl.stages.{stage}"], env=env, capture_output=True, text=True)
    said = p.stderr[-2000:] if p.returncode else "\n".join(
        line for line in (p.stderr + p.stdout).splitlines() if any(s in line for s in SAID))
    return round(time.monotonic() - start, 1), p.returncode, said


def main() -> None:
    out = {}
    for stage in sys.argv[1:] or list(POINTS):
        full, kill, rerun = run(stage), run(stage, POINTS[stage]), run(stage)
        r = {"point": POINTS[stage], "full_s": full[0], "kill_s": kill[0], "kill_rc": kill[1], "rerun_s": rerun[0],
             "rerun_rc": rerun[1], "lost_before_s": kill[0], "lost_after_s": round(kill[0] + rerun[0] - full[0], 1),
             "rerun_said": rerun[2].splitlines()}
        if full[1] or rerun[1] or kill[1] != -9:
            r["errors"] = [full[2], kill[2], rerun[2]]
        out[stage] = r
        print(json.dumps({stage: r}), flush=True)
    with open("metrics/kill_cost.json", "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
