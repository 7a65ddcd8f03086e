"""The whole scorer on hostile 2 MB answers (goal: each scores in under 1 s, so cost is linear).

Scores one generated task (with and without its reference answer, which take different grounding
paths) with the default params' scoring section and the shipped rubric, on answers of several
hostile shapes of about --mb megabytes each. Prints one row per shape (size, seconds, total) and
exits 1 if any answer took --limit seconds or more.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

from rubricrl.config import ScoringParams
from rubricrl.data.generate import generate_dataset
from rubricrl.reward.grounding import clear_caches
from rubricrl.reward.parse import MAX_ITEMS
from rubricrl.reward.scoring import build_scorer


def _fill(unit: str, size: int) -> str:
    return unit * max(1, size // len(unit))


def shapes(task, size: int) -> dict[str, str]:
    gold = json.dumps(task.reference, ensure_ascii=False)
    ref = task.reference
    str_field = next(k for k, v in task.properties.items() if "string" in str(v.get("type")) and "pattern" not in v)
    list_field = next((k for k, v in task.properties.items() if "array" in str(v.get("type"))), str_field)

    def with_field(name, value):
        return json.dumps({**ref, name: value}, ensure_ascii=False)

    n_fields = size // 20
    return {
        "truncated, many '{'": _fill('{"a": ', size),
        "open braces only": "{" * size,
        "truncated list of objects": "[" + _fill('{"x": 1, "y": [', size),
        "truncated answer": gold[:-1] + ", " + json.dumps(str_field) + ': "' + _fill("a{b ", size),
        "giant string value": with_field(str_field, _fill("x", size)),
        "giant value of sentences": with_field(str_field, _fill("The bin is small. It works. ", size)),
        "giant value of digits": with_field(str_field, _fill("1,299.00 3.5万 12:30 ", size)),
        "thousands of fields": json.dumps({**ref, **{f"f{i}": i for i in range(n_fields)}}),
        "huge array field": with_field(list_field, [f"w{i}" for i in range(size // 10)]),
        "huge array of one value": with_field(list_field, ["the bin is small"] * (size // 20)),
        f"{MAX_ITEMS} items (the limit)": with_field(list_field, [_fill(f"w{i} ", size // MAX_ITEMS) for i in range(MAX_ITEMS)]),
        f"{MAX_ITEMS} short items": with_field(list_field, [f"the bin {i}" for i in range(MAX_ITEMS)]) + _fill(" ", size),
        "deep nesting": "[" * size,
        "deep valid object": '{"a":' * (size // 10) + "1" + "}" * (size // 10),
        "prose with digits": _fill("In 2024 it cost $1,299.00, up 3.5% from 1,250 (about 3.5万). ", size),
        "object then chatter": gold + _fill(" and so on {not json}", size),
        "chatter, broken objects, object": _fill("chatter ", size) + '{"a" x ' * 100 + gold,
        "source text repeated": _fill(task.text + " ", size),
        "source text in a value": with_field(str_field, _fill(task.text + " ", size)),
        "escaped quotes": '{"a": "' + _fill('\\"', size),
        "nan and huge numbers": json.dumps(ref)[:-1] + ', "n": [' + _fill("1e400, NaN, 1" + "0" * 40 + ", ", size) + "1]}",
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=2.0)
    ap.add_argument("--limit", type=float, default=1.0, help="seconds an answer may take")
    args = ap.parse_args()
    os.chdir(Path(__file__).resolve().parent.parent)  # the params' rubric path is relative to the repo
    scorer = build_scorer(ScoringParams())
    task = generate_dataset(seed=0, n_train=20, n_test=5)["train"][0]
    variants = {"ref": task, "no ref": dataclasses.replace(task, id=task.id + "-noref", reference=None)}
    size = int(args.mb * 1_000_000)
    slow = []
    print(f"{'shape':32} {'task':7} {'MB':>5} {'seconds':>8} {'total':>7}")
    for label, t in variants.items():
        scorer.score(t, json.dumps(task.reference))  # warm-up: the task's context, as in training
        for name, answer in shapes(task, size).items():
            clear_caches()  # fresh completions share no value with an earlier one
            for ctx in scorer._contexts.values():
                ctx.source._cache.clear()
            start = time.perf_counter()
            result = scorer.score(t, answer)
            seconds = time.perf_counter() - start
            print(f"{name:32} {label:7} {len(answer) / 1e6:5.2f} {seconds:8.3f} {result.total:7.2f}", flush=True)
            if seconds >= args.limit:
                slow.append(f"{name} ({label})")
    if slow:
        print(f"FAIL: {len(slow)} answer(s) took >= {args.limit} s: {', '.join(slow)}", file=sys.stderr)
        return 1
    print(f"OK: every answer scored in under {args.limit} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
