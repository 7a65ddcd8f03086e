"""Task generation speed (goal: the CPU default's 800 train + 200 test tasks in under 10 s on one core).

Generates the default split sizes a few times in this process and prints the median seconds and the ratio to the
goal. This was a timed unit test (tests/data/test_generate.py) until a loaded machine failed it: speed goals live
here, measured side by side, not in the suite.
"""

from __future__ import annotations

import argparse
import statistics
import time

from rubricrl.data.generate import generate_dataset

GOAL_S = 10.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    times = []
    for run in range(args.runs):
        start = time.perf_counter()
        generate_dataset(seed=5 + run, n_train=800, n_test=200)
        times.append(time.perf_counter() - start)
    median = statistics.median(times)
    print(f"800 train + 200 test tasks: median {median:.2f} s over {args.runs} runs "
          f"(min {min(times):.2f}, max {max(times):.2f}); goal < {GOAL_S:g} s: {median / GOAL_S:.2f} of it")


if __name__ == "__main__":
    main()
