"""Paired differences of models on the same test tasks, from their per-task eval rows.

Every comparison is paired: the same tasks answered by two models, a score interval on the per-task
differences (95%; `rubricrl.metrics.paired`) and sign flips (permutation p), per part, on the rubric reward and on the
strict true metric (`rubricrl.metrics.strict`). Overlapping per-model intervals say nothing about a
paired difference, so the report never compares intervals.
"""

from __future__ import annotations

import numpy as np

from rubricrl.metrics.paired import paired_difference

# metric -> (per-task numerator, per-task denominator) from a sample row (task_eval's samples); every metric
# but the reward (a rubric's scale) is a rate in [0, 1]
UNBOUNDED = {"reward"}
PAIRED_METRICS = {
    "reward": (lambda r: r["total"], lambda r: 1.0),
    "field_accuracy": (lambda r: r["strict"]["right"], lambda r: r["strict"]["fields"]),
    "null_for_present_rate": (lambda r: r["strict"]["null_for_present"], lambda r: r["strict"]["present"]),
    # stated values the answer does not give: answered null, left out, or no parsed answer at all (rows written
    # before "parsed" was recorded count as parsed); unlike null_for_present, a model that answers nothing cannot
    # look like one that abstains less
    "unstated_rate": (lambda r: r["strict"]["null_for_present"] if r["strict"].get("parsed", True)
                      else r["strict"]["present"], lambda r: r["strict"]["present"]),
    "invented_rate": (lambda r: r["strict"]["invented"], lambda r: r["strict"]["absent"]),
    "exact_object_rate": (lambda r: r["strict"]["exact"], lambda r: 1.0),
}


def paired_comparisons(samples: dict[str, list[dict]], n_resamples: int = 2000, seed: int = 0) -> list[dict]:
    """Each later model against each earlier one (models in training order), per part and metric.

    `samples[model]` are task_eval sample rows (id, part, total, strict); models are paired by task id.
    """
    models = list(samples)
    rows = []
    for i, base in enumerate(models):
        for model in models[i + 1:]:
            a = {r["id"]: r for r in samples[model]}
            b = {r["id"]: r for r in samples[base]}
            ids = [k for k in a if k in b and a[k].get("strict") and b[k].get("strict")]
            parts = {"all": ids}
            for k in ids:
                parts.setdefault(a[k]["part"], []).append(k)
            for part, keys in parts.items():
                for metric, (num, den) in PAIRED_METRICS.items():
                    d = np.array([den(a[k]) for k in keys], dtype=float)
                    if not len(keys) or d.sum() == 0:
                        continue
                    res = paired_difference(np.array([num(a[k]) for k in keys], dtype=float),
                                            np.array([num(b[k]) for k in keys], dtype=float), d,
                                            bounds=None if metric in UNBOUNDED else (0.0, 1.0),
                                            n_resamples=n_resamples, seed=seed)
                    rows.append({"model": model, "vs": base, "part": part, "metric": metric, **res})
    return rows
