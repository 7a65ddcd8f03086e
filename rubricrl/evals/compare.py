"""Models side by side on the same test tasks, and their paired differences (the eval_task report).

Every comparison is paired: the same tasks answered by two models, per-task differences resampled
(bootstrap 95% CI) and sign-flipped (permutation p), per part, on the rubric reward and on the
strict true metric (`rubricrl.evals.strict`). Overlapping per-model intervals say nothing about a
paired difference, so the report never compares intervals.
"""

from __future__ import annotations

import numpy as np

from rubricrl.evals.paired import describe, paired_difference

# metric -> (per-task numerator, per-task denominator) from a sample row (task_eval's samples)
PAIRED_METRICS = {
    "reward": (lambda r: r["total"], lambda r: 1.0),
    "field_accuracy": (lambda r: r["strict"]["right"], lambda r: r["strict"]["fields"]),
    "null_for_present_rate": (lambda r: r["strict"]["null_for_present"], lambda r: r["strict"]["present"]),
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
                                            n_resamples=n_resamples, seed=seed)
                    rows.append({"model": model, "vs": base, "part": part, "metric": metric, **res})
    return rows


def _ci(mean: float | None, ci: list[float] | None, digits: int) -> str:
    if mean is None:
        return "-"
    if ci is None or any(c is None for c in ci):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


def _rate(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def comparison_markdown(summary: dict[str, dict[str, dict]], paired: list[dict], max_total: float | None = None) -> str:
    """`summary[model][part]` is a headline dict (task_eval group: reward, strict metrics, rates); models in
    training order (base, sft, grpo). `paired` is paired_comparisons' output."""
    out_of = f" of {max_total:g}" if max_total else ""
    lines = ["# Task evaluation: models compared", "",
             f"Greedy decoding on the test split. Reward is the rubric total{out_of}. The strict metrics come from "
             "`rubricrl.evals.strict`, which shares no code with the reward: a field is right only when it equals "
             "the gold value after Unicode/case/space normalisation; a null for a stated value is wrong. Per-model "
             "intervals are bootstrap 95% over tasks.", "",
             "| model | part | n | reward | strict field accuracy | exact objects | null for present | invented | valid JSON | extra text |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    parts = list(next(iter(summary.values())))
    for part in parts:
        for model, groups in summary.items():
            g = groups.get(part)
            if not g:
                continue
            st = g.get("strict") or {}
            lines.append(f"| {model} | {part} | {g['n']} | {_ci(g['reward_mean'], g['reward_ci'], 2)} | "
                         f"{_ci(st.get('field_accuracy'), st.get('field_accuracy_ci'), 3)} | "
                         f"{_rate(st.get('exact_object_rate'))} | {_rate(st.get('null_for_present_rate'))} | "
                         f"{_rate(st.get('invented_rate'))} | {g['json_valid_rate']:.2f} | {g['extra_text_rate']:.2f} |")
    lines += ["", "## Paired differences", "",
              "Model minus the earlier model on the same tasks: difference, bootstrap 95% CI of the per-task "
              "differences, and the two-sided sign-flip permutation p. Rates are micro (fields of all tasks).", "",
              "| comparison | part | reward | strict field accuracy | null for present | invented | exact objects |",
              "|---|---|---|---|---|---|---|"]
    keyed = {(r["model"], r["vs"], r["part"], r["metric"]): r for r in paired}
    combos = list(dict.fromkeys((r["model"], r["vs"], r["part"]) for r in paired))
    for model, vs, part in combos:
        cells = [describe(keyed[(model, vs, part, m)]) if (model, vs, part, m) in keyed else "-"
                 for m in ("reward", "field_accuracy", "null_for_present_rate", "invented_rate", "exact_object_rate")]
        lines.append(f"| {model} - {vs} | {part} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
