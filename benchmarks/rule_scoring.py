"""Rule-only scoring throughput on one core (goal: at least 20,000 responses/s).

Scores a realistic mix of responses (gold, chatter, code fence, truncated, wrong values, prose) to
generated tasks with the shipped rubric's rule criteria and penalties, after one warm-up pass
(the per-task context is built once per task, as in training). Prints responses/s and the ratio
to the goal, measured in this run.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from rubricrl.data.generate import generate_dataset
from rubricrl.reward.scoring import RubricScorer
from rubricrl.reward.load import load_rubric

GOAL = 20_000
RUBRIC = Path(__file__).resolve().parent.parent / "rubricrl" / "reward" / "rubrics" / "json_extraction.yaml"


def responses_for(task) -> list[str]:
    gold = json.dumps(task.reference, ensure_ascii=False)
    first = next(iter(task.reference))
    return [
        gold,
        "Sure, here is the result: " + gold,
        f"```json\n{gold}\n```",
        gold[: len(gold) // 2],
        json.dumps({**task.reference, first: "something else"}, ensure_ascii=False),
        "I could not find the information in the text.",
        "{}",
        gold,
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core
    rubric = load_rubric(RUBRIC)
    rules_only = rubric.model_copy(update={"criteria": [c for c in rubric.criteria if c.kind == "rule"]})
    scorer = RubricScorer(rules_only)
    tasks = generate_dataset(seed=0, n_train=args.tasks, n_test=max(1, args.tasks // 4))["train"]
    pairs = [(t, r) for t in tasks for r in responses_for(t)]
    scorer.score_batch(pairs)  # warm-up: per-task contexts and caches, as after the first step
    best = 0.0
    for _ in range(args.repeat):
        for ctx in scorer._contexts.values():
            ctx.source._cache.clear()  # fresh completions in training: no value-level cache hits
        start = time.perf_counter()
        scorer.score_batch(pairs)
        best = max(best, len(pairs) / (time.perf_counter() - start))
    print(f"rule-only scoring: {len(pairs)} responses x {args.repeat} runs on 1 core")
    print(f"best: {best:,.0f} responses/s; goal {GOAL:,}/s; ratio to goal {best / GOAL:.2f}")


if __name__ == "__main__":
    main()
