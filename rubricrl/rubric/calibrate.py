"""Prove a rubric measures what matters before training on it.

On gold answers, systematic corruptions and (optionally) policy samples: per-component separation
(ROC AUC) with drops for components that do not discriminate, judge consistency, pairwise ordering
accuracy, Kendall's tau against the known ordering, Spearman against gold field F1, a hack-probe
table and the reward's scale.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
from scipy import stats
from sklearn.metrics import roc_auc_score

from rubricrl.metrics import field_f1
from rubricrl.rubric.corruptions import corrupt
from rubricrl.rubric.scoring import RubricScorer, ScoreResult
from rubricrl.rubric.spec import Rubric
from rubricrl.taskfile import Task

GOLD_LEVEL = 3


@dataclass(frozen=True)
class CalItem:
    task: Task
    mode: str  # "gold", a corruption mode, or "policy"
    response: str
    level: int | None  # known quality (gold 3); None for policy samples
    targets: tuple[str, ...] = ()


def calibration_set(tasks: list[Task], seed: int = 0, policy: list[tuple[Task, str]] = ()) -> list[CalItem]:
    items = []
    for task in tasks:
        items.append(CalItem(task, "gold", json.dumps(task.reference, ensure_ascii=False), GOLD_LEVEL))
        items += [CalItem(task, m.name, r, m.level, m.targets) for m, r in corrupt(task, seed)]
    items += [CalItem(t, "policy", r, None) for t, r in policy]
    return items


def _signed(result: ScoreResult, cid: str) -> float:
    """Higher is better for every component: a penalty counts negatively."""
    c = result.component(cid)
    return c.score if c.kind != "penalty" else -c.score


def component_table(items: list[CalItem], results: list[ScoreResult], min_auc: float) -> dict:
    gold = [k for k, it in enumerate(items) if it.mode == "gold"]
    table = {}
    for comp in results[0].components:
        values = np.array([_signed(r, comp.id) for r in results])
        targeted = [k for k, it in enumerate(items) if comp.id in it.targets]
        negatives = targeted or [k for k, it in enumerate(items) if it.mode not in ("gold", "policy")]
        varies = bool(values.std() > 1e-9)
        y = [1] * len(gold) + [0] * len(negatives)
        s = np.concatenate([values[gold], values[negatives]])
        auc = float(roc_auc_score(y, s)) if varies and 0 < sum(y) < len(y) else 0.5
        if not varies:
            verdict = "dropped: constant score on the calibration set (carries no signal)"
        elif auc < min_auc:
            verdict = f"dropped: ROC AUC {auc:.3f} < {min_auc} (does not separate gold from its targets)"
        else:
            verdict = "kept"
        table[comp.id] = {"kind": comp.kind, "auc": round(auc, 4), "varies": varies,
                          "std": round(float(values.std()), 4), "n_targeted": len(targeted),
                          "keep": verdict == "kept", "verdict": verdict}
    return table


def judge_consistency(rubric: Rubric, scorer: RubricScorer, items: list[CalItem], results: list[ScoreResult]) -> dict:
    """Agreement across repeated samples and their spread, per judge criterion.

    A judge that samples (openai) reports on its samples; a deterministic one is re-run once and
    compared with itself.
    """
    out = {}
    for crit in (c for c in rubric.criteria if c.kind == "judge"):
        judge = scorer.judges[crit.judge].name  # the judge actually used (params may override the rubric's)
        sampled = [r.component(crit.id).samples for r in results if r.component(crit.id).samples]
        multi = [s for s in sampled if len(s) > 1]
        if multi:
            agree = sum(len(set(s)) == 1 for s in multi) / len(multi)
            spread = float(np.mean([max(s) - min(s) for s in multi]))
            out[crit.id] = {"judge": judge, "verdicts_with_repeats": len(multi),
                            "agreement": round(agree, 4), "mean_spread": round(spread, 4)}
            continue
        again = scorer.score_batch([(it.task, it.response) for it in items])
        first = [r.component(crit.id).score for r in results]
        second = [r.component(crit.id).score for r in again]
        same = sum(a == b for a, b in zip(first, second)) / len(first)
        out[crit.id] = {"judge": judge, "verdicts_with_repeats": len(first), "agreement": round(same, 4),
                        "mean_spread": round(float(np.mean([abs(a - b) for a, b in zip(first, second)])), 4)}
    return out


def reward_metrics(items: list[CalItem], totals: list[float]) -> dict:
    gold_total = {it.task.id: totals[k] for k, it in enumerate(items) if it.mode == "gold"}
    pairs = [(gold_total[it.task.id], totals[k]) for k, it in enumerate(items) if it.level is not None and it.mode != "gold"]
    known = [(totals[k], it.level) for k, it in enumerate(items) if it.level is not None]
    tau = stats.kendalltau([t for t, _ in known], [lv for _, lv in known]).statistic
    f1 = [field_f1(it.task, it.response) for it in items]
    rho = stats.spearmanr(totals, f1).statistic
    arr = np.array(totals)
    return {
        "pairwise_accuracy": round(sum(g > c for g, c in pairs) / len(pairs), 4),
        "pairwise_ties": sum(g == c for g, c in pairs),
        "n_pairs": len(pairs),
        "kendall_tau": round(float(tau), 4),
        "spearman_f1": round(float(rho), 4),
        "scale": {"mean": round(float(arr.mean()), 4), "std": round(float(arr.std()), 4),
                  "min": round(float(arr.min()), 4), "max": round(float(arr.max()), 4)},
    }


def probe_table(items: list[CalItem], totals: list[float]) -> dict:
    """Every corruption and injection against gold: does the rubric always rank it below?"""
    gold_total = {it.task.id: totals[k] for k, it in enumerate(items) if it.mode == "gold"}
    rows: dict[str, dict] = {}
    for k, it in enumerate(items):
        if it.mode in ("gold", "policy"):
            continue
        row = rows.setdefault(it.mode, {"n": 0, "score_sum": 0.0, "gold_sum": 0.0, "below": 0, "worst_margin": None})
        margin = gold_total[it.task.id] - totals[k]
        row["n"] += 1
        row["score_sum"] += totals[k]
        row["gold_sum"] += gold_total[it.task.id]
        row["below"] += margin > 0
        row["worst_margin"] = margin if row["worst_margin"] is None else min(row["worst_margin"], margin)
    return {mode: {"n": r["n"], "mean_score": round(r["score_sum"] / r["n"], 3),
                   "mean_gold": round(r["gold_sum"] / r["n"], 3),
                   "share_below_gold": round(r["below"] / r["n"], 4),
                   "worst_margin": round(r["worst_margin"], 3), "pass": r["below"] == r["n"]}
            for mode, r in rows.items()}


@dataclass
class Calibration:
    rubric: Rubric  # the calibrated rubric: what training uses
    report: dict
    points: dict  # per-item values for the plots


def calibrate(rubric: Rubric, scorer: RubricScorer, items: list[CalItem], min_auc: float = 0.6,
              keep_weak: bool = False) -> Calibration:
    """The calibrated rubric (weak components dropped unless keep_weak) and the full report."""
    results = scorer.score_batch([(it.task, it.response) for it in items])
    components = component_table(items, results, min_auc)
    weak = [cid for cid, row in components.items() if not row["keep"]]
    dropped = [] if keep_weak else weak
    kept_rubric = Rubric.model_validate({
        **rubric.model_dump(),
        "criteria": [c.model_dump() for c in rubric.criteria if c.id not in dropped],
        "penalties": [p.model_dump() for p in rubric.penalties if p.id not in dropped],
    })
    totals = [sum(c.weight * c.score for c in r.components if c.id not in dropped) for r in results]
    calls = sum(r.judge_calls for r in results)
    report = {
        "rubric": rubric.name,
        "n_items": len(items),
        "n_tasks": len({it.task.id for it in items}),
        "components": components,
        "dropped": dropped,
        "weak_kept": weak if keep_weak else [],
        "judge_consistency": judge_consistency(rubric, scorer, items, results),
        "reward": reward_metrics(items, totals),
        "probes": probe_table(items, totals),
        "judge_calls_per_response": round(calls / len(items), 4),
        "max_total": kept_rubric.max_total,
    }
    points = {"totals": totals, "f1": [field_f1(it.task, it.response) for it in items],
              "modes": [it.mode for it in items], "targets": [it.targets for it in items],
              "signed": {cid: [_signed(r, cid) for r in results] for cid in components}}
    return Calibration(kept_rubric, report, points)
