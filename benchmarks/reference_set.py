"""The free-text reward and checklist on the hand-written reference set (rubricrl/data/reference/free_text) and on
generated tasks' probes, side by side: what issue 45 measures.

    python benchmarks/reference_set.py [--tasks 260] [--seed 1]

Reference set, and its held-out scenarios (rubricrl/data/reference/free_text_heldout: written after the readers
were tuned, never tuned on): the share of good-above-failure pairs each metric orders with its 95% interval over
scenarios, per failure kind with the reward's worst margin, the good replies scored 0, and the phi of the two
metrics' errors (rubricrl.calibrate.reference.measure, what the rubric stage reports). Generated: every probe of rubricrl/calibrate/reply_corruptions.py on `--tasks`
tasks of generate_replies(seed), its reward margin below gold (mean, worst) and the share whose checklist score
falls below gold's. Results also go to metrics/reference_set.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rubricrl.calibrate.reference import HELDOUT_DIR, REFERENCE_DIR, load_reference, measure  # noqa: E402
from rubricrl.calibrate.reply_corruptions import corrupt_reply  # noqa: E402
from rubricrl.config import RubricParams  # noqa: E402
from rubricrl.data.replies import generate_replies  # noqa: E402
from rubricrl.metrics.checklist import check  # noqa: E402
from rubricrl.reward.load import load_rubric  # noqa: E402
from rubricrl.reward.scoring import RubricScorer  # noqa: E402


def generated(scorer: RubricScorer, n: int, seed: int) -> dict:
    split = generate_replies(seed=seed, n_train=n - n // 4, n_test=n // 4)
    rows: dict[str, list] = defaultdict(list)
    gold_min = [10.0, 1.0]
    for task in split["train"] + split["test"]:
        gold, gold_check = scorer.score(task, task.reference).total, check(task, task.reference).score
        gold_min = [min(gold_min[0], gold), min(gold_min[1], gold_check)]
        for mode, reply in corrupt_reply(task).items():
            rows[mode].append((gold - scorer.score(task, reply).total, gold_check - check(task, reply).score))
    return {"gold_min_reward": gold_min[0], "gold_min_checklist": gold_min[1],
            "probes": {m: {"n": len(v), "mean_margin": round(sum(a for a, _ in v) / len(v), 2),
                           "worst_margin": round(min(a for a, _ in v), 2),
                           "checklist_below_gold": round(sum(b > 0 for _, b in v) / len(v), 3)}
                       for m, v in rows.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=260)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    scorer = RubricScorer(load_rubric("free_text"))
    found = {}
    for name, folder in (("reference set", REFERENCE_DIR), ("held-out scenarios", HELDOUT_DIR)):
        ref = found[name] = measure(load_reference(folder), scorer, RubricParams().min_margin)
        print(f"{name}: {ref['n_scenarios']} scenarios, {ref['n_replies']} replies, {ref['n_pairs']} pairs; reward "
              f"orders {ref['reward_pair_accuracy']} {ref['reward_pair_interval']}, checklist "
              f"{ref['checklist_pair_accuracy']} {ref['checklist_pair_interval']} (95% intervals over scenarios); errors "
              f"{ref['errors']}; good replies scored 0: {ref['good_scored_zero'] or 'none'}")
        print("| failure kind | pairs | reward orders | checklist orders | worst reward margin | under the margin |")
        print("|---|---|---|---|---|---|")
        for kind, row in ref["kinds"].items():
            print(f"| {kind} | {row['pairs']} | {row['reward_accuracy']:.3f} | {row['checklist_accuracy']:.3f} | "
                  f"{row['worst_margin']} | {row['under_margin']} |")
        print()
    gen = generated(scorer, args.tasks, args.seed)
    print(f"\ngenerated ({args.tasks} tasks, seed {args.seed}): gold scores at least {gen['gold_min_reward']} and "
          f"checklist {gen['gold_min_checklist']}")
    print("| probe | n | mean margin | worst margin | checklist below gold |")
    print("|---|---|---|---|---|")
    for mode, row in gen["probes"].items():
        print(f"| {mode} | {row['n']} | {row['mean_margin']} | {row['worst_margin']} | "
              f"{row['checklist_below_gold']:.0%} |")
    out = Path("metrics/reference_set.json")
    out.parent.mkdir(exist_ok=True)
    brief = {name: {k: v for k, v in ref.items() if k not in ("replies", "misordered")} for name, ref in found.items()}
    out.write_text(json.dumps({"reference": brief["reference set"], "heldout": brief["held-out scenarios"],
                               "generated": gen}, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
