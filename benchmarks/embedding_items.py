"""What the embedding item judge (rubricrl/reward/judges/embedding.py) is worth, per language: its verdicts on
rubric items against the deterministic checks of the embedded free-text data, which serve as the truth.

    python benchmarks/embedding_items.py [--tasks 120] [--seed 0]

Replies: each task's gold reply and its corruptions (rubricrl/calibrate/reply_corruptions.py). Items: the content
ones (contains / value / states checks: a fact stated, a remedy offered; and not_contains / not_value / not_states
pitfalls); format items (language, length, regex, source_numbers, coherent) are the checks' own business. Per
language and kind: ROC AUC of the closest sentence's cosine (threshold-free), and the accuracy and balanced
accuracy at the bar chosen on the other half of the tasks (odd tasks choose, even tasks report). Results also go
to metrics/embedding_items.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from sklearn.metrics import roc_auc_score  # noqa: E402

from rubricrl.calibrate.reply_corruptions import corrupt_reply  # noqa: E402
from rubricrl.config import JudgeConfig  # noqa: E402
from rubricrl.data.replies import generate_replies  # noqa: E402
from rubricrl.reward.items import check_item  # noqa: E402
from rubricrl.reward.judges.base import ItemRequest  # noqa: E402
from rubricrl.reward.judges.embedding import EmbeddingJudge  # noqa: E402

CONTENT = {"contains": "coverage", "value": "coverage", "states": "coverage",
           "not_contains": "pitfall", "not_value": "pitfall", "not_states": "pitfall"}


def balanced(truth: np.ndarray, pred: np.ndarray) -> float:
    rates = [float((pred[truth == c] == c).mean()) for c in (True, False) if (truth == c).any()]
    return float(np.mean(rates))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=120)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    tasks = generate_replies(args.seed, args.tasks, 0)["train"]
    judge = EmbeddingJudge(JudgeConfig(type="embedding"))
    rows = []  # (task index, lang, kind, truth: item met, cosine)
    started = time.monotonic()
    for n, task in enumerate(tasks):
        items = tuple(i for i in task.items if i.check and i.check["kind"] in CONTENT)
        replies = [task.reference, *corrupt_reply(task).values()]
        requests = [ItemRequest(task, r, items) for r in replies]
        for r, sims in zip(requests, judge.similarities(requests)):
            for item in items:
                truth = bool(check_item(item, r.response, task.text).passed)
                if item.pitfall:
                    truth = not truth  # for a pitfall: is the mistake there (what a close sentence would show)
                rows.append((n, task.meta["lang"], CONTENT[item.check["kind"]], truth, sims[item.id]))
    seconds = time.monotonic() - started
    out = {"tasks": len(tasks), "pairs": len(rows), "seconds": round(seconds, 1), "groups": {}}
    for lang in ("en", "zh"):
        for kind in ("coverage", "pitfall"):
            sel = [r for r in rows if r[1] == lang and r[2] == kind]
            truth = np.array([r[3] for r in sel])
            cos = np.array([r[4] for r in sel])
            odd = np.array([r[0] % 2 == 1 for r in sel])
            if len(set(truth)) < 2 or len(set(truth[odd])) < 2 or len(set(truth[~odd])) < 2:
                out["groups"][f"{lang}/{kind}"] = {"n": len(sel), "note": "one class only"}
                continue
            bars = np.round(np.arange(0.1, 0.95, 0.025), 3)
            bar = float(max(bars, key=lambda b: balanced(truth[odd], cos[odd] >= b)))
            pred = cos[~odd] >= bar
            out["groups"][f"{lang}/{kind}"] = {
                "n": int(len(sel)), "share_true": round(float(truth.mean()), 3),
                "auc": round(float(roc_auc_score(truth, cos)), 3), "bar": bar,
                "accuracy": round(float((pred == truth[~odd]).mean()), 3),
                "balanced_accuracy": round(balanced(truth[~odd], pred), 3)}
    print(json.dumps(out, indent=1))
    Path("metrics").mkdir(exist_ok=True)
    Path("metrics/embedding_items.json").write_text(json.dumps(out, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
