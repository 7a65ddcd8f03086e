"""Adaptive judge sampling vs full median-of-k, against a real llama.cpp server (SmolLM2-135M).

The guarantee adaptive sampling can make is agreement with the full median-of-k *within a bound*,
not equality: llama.cpp at temperature 0 is not bit-deterministic, so two full runs of the same
judge already disagree now and then. This measures, over many answers (gold and one corruption of
each of N generated tasks):
  - the noise floor: how often two full median-of-3 runs agree with each other;
  - how often the adaptive run agrees with the first full run;
  - judge calls per verdict of each.
It exits non-zero when adaptive agreement falls more than `--slack` below the noise floor, or under
`--min-agreement`. tests/calibrate/test_rubric_llm.py asserts the same bound on a small sample.

  .venv/bin/python benchmarks/judge_adaptive.py --tasks 30
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rubricrl.data.generate import generate_dataset  # noqa: E402
from rubricrl.reward.judges.base import JudgeRequest  # noqa: E402
from rubricrl.reward.judges.openai_judge import OpenAIJudge  # noqa: E402
from rubricrl.calibrate.corruptions import corrupt  # noqa: E402
from rubricrl.reward.parse import parse_response  # noqa: E402
from rubricrl.reward.load import load_rubric
from rubricrl.config import JudgeConfig  # noqa: E402
from tests.llama_server import running_server  # noqa: E402


def agreement(a, b) -> float:
    return sum(x.score == y.score for x, y in zip(a, b)) / len(a)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=30)
    ap.add_argument("--min-agreement", type=float, default=0.85)
    ap.add_argument("--slack", type=float, default=0.1)
    args = ap.parse_args()

    tasks = generate_dataset(seed=3, n_train=args.tasks, n_test=4)["train"][: args.tasks]
    crit = next(c for c in load_rubric("json_extraction").criteria if c.kind == "judge")
    reqs = []
    for i, task in enumerate(tasks):
        gold = json.dumps(task.reference, ensure_ascii=False)
        bads = corrupt(task, seed=i)
        _, bad = bads[i % len(bads)]  # a different failure mode from task to task
        reqs += [JudgeRequest(task, gold, task.reference, crit), JudgeRequest(task, bad, parse_response(bad).obj, crit)]
    with running_server() as url:
        def judge(**over) -> OpenAIJudge:
            # concurrency 1: llama.cpp's server serves one request at a time
            return OpenAIJudge(JudgeConfig(type="openai", base_url=url, model="smollm2-judge", max_tokens=128,
                                           response_format="json_object", cache_dir=None, concurrency=1, **over))
        rows = {}
        for name, over in (("full", {}), ("full again", {}), ("adaptive", {"adaptive_samples": True, "warmup_verdicts": 3})):
            j, t0 = judge(**over), time.perf_counter()
            rows[name] = (j.judge_batch(reqs), j.calls / len(reqs), time.perf_counter() - t0)
    floor = agreement(rows["full"][0], rows["full again"][0])
    adaptive = agreement(rows["full"][0], rows["adaptive"][0])
    print(f"{len(reqs)} verdicts ({args.tasks} tasks x gold + one corruption), criterion {crit.id}")
    print(f"{'run':<12}{'calls/verdict':>15}{'seconds':>10}{'agrees with full':>18}")
    for name, (verdicts, calls, secs) in rows.items():
        agree = "-" if name == "full" else f"{agreement(rows['full'][0], verdicts):.3f}"
        print(f"{name:<12}{calls:>15.2f}{secs:>10.1f}{agree:>18}")
    ok = adaptive >= args.min_agreement and adaptive >= floor - args.slack
    print(f"noise floor {floor:.3f}; adaptive {adaptive:.3f}; bound: >= {args.min_agreement} and >= floor - "
          f"{args.slack}: {'OK' if ok else 'FAILED'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
