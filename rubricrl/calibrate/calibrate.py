"""Prove a rubric measures what matters before training on it.

Two sets, reported apart (seed 004):
- gold answers and systematic corruptions: per-component separation (ROC AUC) with drops for
  components that do not discriminate, judge consistency, pairwise ordering accuracy, Kendall's tau
  against the known ordering, Spearman against the strict field accuracy, a hack-probe table with
  margins, the price of each way to miss a field, and the reward's scale;
- samples of the policy itself (k per task at the GRPO temperature): Spearman of the reward against
  the strict field accuracy, and pairwise accuracy within each task's samples (the comparisons GRPO's
  group-relative advantage makes).
The true metric is `rubricrl.metrics.strict`, which shares no code with the reward.

Both sets are scored twice: as given (every generated task has a reference, which the grounded judge's
faithfulness and the missed_values penalty read) and label-free, with the references hidden from the reward
(the true metric still reads them): what the reward is worth on data without gold answers.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats
from sklearn.metrics import roc_auc_score

from rubricrl.metrics.true_metric import true_counts
from rubricrl.calibrate.corruptions import corrupt
from rubricrl.calibrate.gate import WRONG_ANSWERS
from rubricrl.calibrate.reply_corruptions import EXPECTED, corrupt_reply
from rubricrl.core.prompt import gold_completion
from rubricrl.reward.scoring import RubricScorer, ScoreResult
from rubricrl.reward.spec import Rubric
from rubricrl.core.taskfile import Task

GOLD_LEVEL = 3


@dataclass(frozen=True)
class CalItem:
    task: Task
    mode: str  # "gold", a corruption mode, or "policy"
    response: str
    level: int | None  # known quality (gold 3); None for policy samples
    targets: tuple[str, ...] = ()


def calibration_set(tasks: list[Task], seed: int = 0, policy: list[tuple[Task, str]] = ()) -> list[CalItem]:
    """Gold and its corruptions per task (an extraction answer's modes, or a free-text reply's), then the policy's
    samples."""
    items = []
    for task in tasks:
        items.append(CalItem(task, "gold", gold_completion(task), GOLD_LEVEL))
        if task.schema is not None:
            items += [CalItem(task, m.name, r, m.level, m.targets) for m, r in corrupt(task, seed)]
        else:
            items += [CalItem(task, name, r, EXPECTED[name][1], EXPECTED[name][0])
                      for name, r in corrupt_reply(task, seed).items()]
    items += [CalItem(t, "policy", r, None) for t, r in policy]
    return items


def strict_accuracy(task: Task, response: str) -> float:
    """The independent true metric of one answer: the share of schema fields answered exactly right (for free text:
    of checklist entries passed)."""
    c = true_counts(task, response)
    return c.right / c.fields if c.fields else 0.0


def _signed(result: ScoreResult, cid: str) -> float:
    """Higher is better for every component: a penalty counts negatively."""
    c = result.component(cid)
    return c.score if c.kind != "penalty" else -c.score


def _scored(results: list[ScoreResult], cid: str) -> list[int]:
    """The items a component scored (a mixed set: only the tasks of the component's kinds)."""
    return [k for k, r in enumerate(results) if any(c.id == cid for c in r.components)]


def component_table(items: list[CalItem], results: list[ScoreResult], min_auc: float) -> dict:
    table = {}
    for cid in dict.fromkeys(c.id for r in results for c in r.components):
        at = _scored(results, cid)
        comp = results[at[0]].component(cid)
        values = np.array([_signed(r, cid) if k in at else 0.0 for k, r in enumerate(results)])
        gold = [k for k in at if items[k].mode == "gold"]
        targeted = [k for k in at if cid in items[k].targets]
        negatives = targeted or [k for k in at if items[k].mode not in ("gold", "policy")]
        varies = bool(values[at].std() > 1e-9)
        y = [1] * len(gold) + [0] * len(negatives)
        s = np.concatenate([values[gold], values[negatives]])
        auc = float(roc_auc_score(y, s)) if varies and 0 < sum(y) < len(y) else 0.5
        if not varies:
            verdict = "dropped: constant score on the calibration set (carries no signal)"
        elif auc < min_auc:
            verdict = f"dropped: ROC AUC {auc:.3f} < {min_auc} (does not separate gold from its targets)"
        else:
            verdict = "kept"
        table[cid] = {"kind": comp.kind, "auc": round(auc, 4), "varies": varies,
                          "std": round(float(values[at].std()), 4), "n_targeted": len(targeted),
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
        at = _scored(results, crit.id)
        if not at:
            continue
        sampled = [results[k].component(crit.id).samples for k in at if results[k].component(crit.id).samples]
        multi = [s for s in sampled if len(s) > 1]
        if multi:
            agree = sum(len(set(s)) == 1 for s in multi) / len(multi)
            spread = float(np.mean([max(s) - min(s) for s in multi]))
            out[crit.id] = {"judge": judge, "verdicts_with_repeats": len(multi),
                            "agreement": round(agree, 4), "mean_spread": round(spread, 4)}
            continue
        again = scorer.score_batch([(items[k].task, items[k].response) for k in at])
        first = [results[k].component(crit.id).score for k in at]
        second = [r.component(crit.id).score for r in again]
        same = sum(a == b for a, b in zip(first, second)) / len(first)
        out[crit.id] = {"judge": judge, "verdicts_with_repeats": len(first), "agreement": round(same, 4),
                        "mean_spread": round(float(np.mean([abs(a - b) for a, b in zip(first, second)])), 4)}
    return out


def reward_metrics(items: list[CalItem], totals: list[float]) -> dict:
    """Ordering metrics on the gold + corruption set (policy samples are reported apart)."""
    keep = [k for k, it in enumerate(items) if it.mode != "policy"]
    items, totals = [items[k] for k in keep], [totals[k] for k in keep]
    gold_total = {it.task.id: totals[k] for k, it in enumerate(items) if it.mode == "gold"}
    pairs = [(gold_total[it.task.id], totals[k]) for k, it in enumerate(items) if it.level is not None and it.mode != "gold"]
    known = [(totals[k], it.level) for k, it in enumerate(items) if it.level is not None]
    tau = stats.kendalltau([t for t, _ in known], [lv for _, lv in known]).statistic
    acc = [strict_accuracy(it.task, it.response) for it in items]
    rho = stats.spearmanr(totals, acc).statistic
    arr = np.array(totals)
    return {
        "pairwise_accuracy": round(sum(g > c for g, c in pairs) / len(pairs), 4),
        "pairwise_ties": sum(g == c for g, c in pairs),
        "n_pairs": len(pairs),
        "kendall_tau": round(float(tau), 4),
        "spearman_accuracy": round(float(rho), 4),
        "scale": {"mean": round(float(arr.mean()), 4), "std": round(float(arr.std()), 4),
                  "min": round(float(arr.min()), 4), "max": round(float(arr.max()), 4)},
    }


def _margins(items: list[CalItem], totals: list[float]) -> dict[str, dict[str, float]]:
    """margins[mode][task_id] = gold total - probe total (how far below gold the probe scores)."""
    gold_total = {it.task.id: totals[k] for k, it in enumerate(items) if it.mode == "gold"}
    out: dict[str, dict[str, float]] = {}
    for k, it in enumerate(items):
        if it.mode not in ("gold", "policy"):
            out.setdefault(it.mode, {})[it.task.id] = gold_total[it.task.id] - totals[k]
    return out


def probe_table(items: list[CalItem], totals: list[float], min_margin: float = 0.0) -> dict:
    """Every corruption and hack probe against gold: does it score below gold by at least min_margin?"""
    gold_total = {it.task.id: totals[k] for k, it in enumerate(items) if it.mode == "gold"}
    # The independent true metric (strict field accuracy; for free text the checklist) of each probe and of gold:
    # a probe must be wrong by it too, or the reward's margin is a disagreement, not a caught hack.
    truth = {(it.task.id, it.mode): strict_accuracy(it.task, it.response) for it in items if it.mode != "policy"}
    rows = {}  # (+ 0.0: a margin of -0.0 reads as 0.0)
    for mode, margins in _margins(items, totals).items():
        m = np.array(list(margins.values()))
        golds = np.array([gold_total[t] for t in margins])
        rows[mode] = {"n": len(m), "mean_score": round(float((golds - m).mean()), 3),
                      "mean_gold": round(float(golds.mean()), 3), "share_below_gold": round(float((m > 0).mean()), 4),
                      "mean_margin": round(float(m.mean()), 3) + 0.0, "worst_margin": round(float(m.min()), 3) + 0.0,
                      "pass": bool(m.min() >= min_margin and m.min() > 0),
                      "true_metric": round(float(np.mean([truth[t, mode] for t in margins])), 3),
                      "true_metric_gold": round(float(np.mean([truth[t, "gold"] for t in margins])), 3)}
    return rows


# The ways to miss a field whose mean price the report lists (README: rubric economics).
MISS_MODES = (*WRONG_ANSWERS, "null_for_present", "omitted_for_present")
BROKEN = ("truncated_json", "prose")  # answers with no JSON object: they state nothing
LAST_NULL = "last_null"  # all_null less all_null_but_one: the price of one null among every field's


def _gaps(dearer: dict[str, float], cheaper: dict[str, float]) -> list[float]:
    """Per task both apply to: how much more the first way to miss costs than the second."""
    return [dearer[t] - cheaper[t] for t in sorted(set(dearer) & set(cheaper))]


def _dearer(null: dict[str, float], margins: dict[str, dict[str, float]]) -> dict[str, dict]:
    """Per wrong answer: on how many tasks it and the null apply, the null's worst gap above it, and the share of
    those tasks the null costs more on."""
    out = {}
    for mode in WRONG_ANSWERS:
        gaps = _gaps(null, margins.get(mode, {}))
        if gaps:
            out[mode] = {"n": len(gaps), "worst_gap": round(min(gaps), 3) + 0.0,
                         "share_null_dearer": round(float(np.mean([g > 1e-9 for g in gaps])), 4)}
    return out


def economics(items: list[CalItem], totals: list[float]) -> dict:
    """What each way to miss one field costs (gold total - answer total), and the rules the gate checks.

    - abstaining is never the cheapest miss: on every task, a null for a stated value costs more than each wrong
      answer for a field (WRONG_ANSWERS: a distractor, an unsupported, hedged or misformatted value, a wrong type,
      ...; `null_vs_misses`), and so does the last of many nulls (every field null against all but that one:
      `last_null_vs_misses`; a cap on the null's price makes it cheap);
    - leaving a field out is never cheaper than a null for it: on every task, the answer without the field of a
      stated value costs at least what the null for that same field costs (a tie where the schema does not
      require the field: the true metric counts a left-out field as a null);
    - an all-null answer scores below the partly right one (nulls only where the policy is unsure);
    - breaking the JSON is never cheaper than answering every field null: on every task, each answer with no JSON
      object (BROKEN: cut short, prose) costs at least what the all-null answer costs (`broken_vs_all_null`).
    """
    margins = _margins(items, totals)
    broken = [g for mode in BROKEN for g in _gaps(margins.get(mode, {}), margins.get("all_null", {}))]
    every, but_one = margins.get("all_null", {}), margins.get("all_null_but_one", {})
    margins[LAST_NULL] = {t: every[t] - but_one[t] for t in sorted(set(every) & set(but_one))}
    cost = {m: round(float(np.mean(list(margins[m].values()))), 3) for m in (*MISS_MODES, LAST_NULL) if margins.get(m)}
    null = margins.get("null_for_present", {})
    omit = _gaps(margins.get("omitted_for_present", {}), null)
    lead = _gaps(margins.get("all_null", {}), margins.get("null_uncertain", {}))
    return {
        "cost": cost,
        "null_vs_misses": _dearer(null, margins),
        "last_null_vs_misses": _dearer(margins[LAST_NULL], margins),
        "omission_vs_null": {"n": len(omit), "worst_gap": round(min(omit), 3) + 0.0 if omit else None,
                             "share_omission_cheaper": round(float(np.mean([g < -1e-9 for g in omit])), 4) if omit else None},
        "all_null_vs_partial": {"n": len(lead), "worst_lead": round(min(lead), 3) + 0.0 if lead else None,
                                "mean_lead": round(float(np.mean(lead)), 3) if lead else None},
        "broken_vs_all_null": {"n": len(broken), "worst_gap": round(min(broken), 3) + 0.0 if broken else None,
                               "share_broken_cheaper": round(float(np.mean([g < -1e-9 for g in broken])), 4)
                               if broken else None},
    }


def on_policy_metrics(items: list[CalItem], totals: list[float]) -> dict | None:
    """Reward vs the strict true metric on the policy's own samples; None when there are none.

    spearman: over all samples pooled. pairwise_accuracy: over pairs of samples of the same task whose
    true metric differs, the share the reward orders the same way (a reward tie counts half).
    """
    idx = [k for k, it in enumerate(items) if it.mode == "policy"]
    if not idx:
        return None
    acc = {k: strict_accuracy(items[k].task, items[k].response) for k in idx}
    by_task: dict[str, list[int]] = {}
    for k in idx:
        by_task.setdefault(items[k].task.id, []).append(k)
    agree = ties = n_pairs = 0.0
    for ks in by_task.values():
        for i, a in enumerate(ks):
            for b in ks[i + 1:]:
                if acc[a] == acc[b]:
                    continue
                n_pairs += 1
                d_true, d_reward = acc[a] - acc[b], totals[a] - totals[b]
                if d_reward == 0:
                    ties += 1
                    agree += 0.5
                elif (d_true > 0) == (d_reward > 0):
                    agree += 1
    xs, ys = [totals[k] for k in idx], [acc[k] for k in idx]
    varies = len(set(xs)) > 1 and len(set(ys)) > 1
    rho = float(stats.spearmanr(xs, ys).statistic) if varies else None
    return {"n_samples": len(idx), "n_tasks": len(by_task), "n_pairs": int(n_pairs), "pairwise_ties": int(ties),
            "pairwise_accuracy": round(agree / n_pairs, 4) if n_pairs else None,
            "spearman_accuracy": round(rho, 4) if rho is not None else None,
            "mean_reward": round(float(np.mean(xs)), 4), "mean_accuracy": round(float(np.mean(ys)), 4),
            "distinct_responses": len({items[k].response for k in idx})}


def hide_references(items: list[CalItem]) -> list[tuple[Task, str]]:
    """(task, response) pairs with each task's reference removed: what the reward sees on label-free data."""
    hidden: dict[int, Task] = {}
    pairs = []
    for it in items:
        task = hidden.get(id(it.task))
        if task is None:
            task = hidden[id(it.task)] = replace(it.task, reference=None)
        pairs.append((task, it.response))
    return pairs


def label_free(scorer: RubricScorer, items: list[CalItem], dropped: list[str], min_auc: float,
               min_margin: float) -> tuple[dict, list[float]]:
    """The calibrated reward (the components the referenced calibration kept) on the same answers with every
    reference hidden from the reward; the true metric (strict field accuracy) still reads them.

    The figures the gate can check (rubric.gate_on): the corruption set's ordering and Spearman, the probes'
    margins, the economics of a missed field, and the on-policy Spearman and pairwise accuracy. Which
    components would separate gold from their targets without references is reported too (the referenced
    calibration alone decides the drops). Returns the block and the per-item totals.
    """
    start = time.perf_counter()
    # A scorer of its own (sharing the judges), so that the referenced scorer's per-task contexts stay as they are.
    results = RubricScorer(scorer.rubric, judges=scorer.judges).score_batch(hide_references(items))
    totals = [sum(c.weight * c.score for c in r.components if c.id not in dropped) for r in results]
    components = {cid: {"auc": row["auc"], "std": row["std"], "varies": row["varies"], "separates": row["keep"]}
                  for cid, row in component_table(items, results, min_auc).items()}
    block = {
        "references": "hidden from the reward; the true metric (strict field accuracy) still reads them",
        "components": components,
        "reward": reward_metrics(items, totals),
        "probes": probe_table(items, totals, min_margin),
        "economics": economics(items, totals),
        "on_policy": on_policy_metrics(items, totals),
        "judge_calls_per_response": round(sum(r.judge_calls for r in results) / len(items), 4),
        "seconds": round(time.perf_counter() - start, 3),
    }
    return block, totals


@dataclass
class Calibration:
    rubric: Rubric  # the calibrated rubric: what training uses
    report: dict
    points: dict  # per-item values for the plots


def calibrate(rubric: Rubric, scorer: RubricScorer, items: list[CalItem], min_auc: float = 0.6,
              keep_weak: bool = False, min_margin: float = 0.0) -> Calibration:
    """The calibrated rubric (weak components dropped unless keep_weak) and the full report."""
    results = scorer.score_batch([(it.task, it.response) for it in items])
    components = component_table(items, results, min_auc)
    weak = [cid for cid, row in components.items() if not row["keep"]]
    dropped = [] if keep_weak else weak
    # A kind of task in the set whose every criterion is weak keeps them (dropping them would leave those tasks
    # with nothing to score); the gate fails on it (rubricrl.calibrate.gate).
    all_weak = {k: [c.id for c in rubric.criteria if k in c.tasks] for k in sorted({it.task.kind for it in items})}
    all_weak = {k: ids for k, ids in all_weak.items() if ids and all(cid in dropped for cid in ids)}
    dropped = [cid for cid in dropped if not any(cid in ids for ids in all_weak.values())]
    kept_rubric = Rubric.model_validate({
        **rubric.model_dump(),
        "criteria": [c.model_dump() for c in rubric.criteria if c.id not in dropped],
        "penalties": [p.model_dump() for p in rubric.penalties if p.id not in dropped],
    })
    totals = [sum(c.weight * c.score for c in r.components if c.id not in dropped) for r in results]
    calls = sum(r.judge_calls for r in results)
    free, _ = label_free(scorer, items, dropped, min_auc, min_margin)
    report = {
        "rubric": rubric.name,
        "n_items": len(items),
        "n_tasks": len({it.task.id for it in items}),
        "kinds": sorted({it.task.kind for it in items}),
        "components": components,
        "dropped": dropped,
        "weak_kept": weak if keep_weak else [cid for cid in weak if cid not in dropped],
        "kinds_all_weak": all_weak,
        "judge_consistency": judge_consistency(rubric, scorer, items, results),
        "reward": reward_metrics(items, totals),
        "probes": probe_table(items, totals, min_margin),
        "min_margin": min_margin,
        "economics": economics(items, totals),
        "on_policy": on_policy_metrics(items, totals),
        "judge_calls_per_response": round(calls / len(items), 4),
        "max_total": kept_rubric.max_total,
        "label_free": free,
    }
    points = {"totals": totals, "accuracy": [strict_accuracy(it.task, it.response) for it in items],
              "modes": [it.mode for it in items], "targets": [it.targets for it in items],
              "signed": {cid: [_signed(r, cid) if any(c.id == cid for c in r.components) else None for r in results]
                         for cid in components}}
    return Calibration(kept_rubric, report, points)
