"""Side-by-side markdown of several models' task-eval summaries (the eval_task stage's report.md)."""

from __future__ import annotations

COLUMNS = ("reward", "gold F1", "valid JSON", "extra text", "invented")


def _ci(mean: float, ci: list[float] | None, digits: int) -> str:
    if ci is None or any(c is None for c in ci):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


def _overlap(a: list[float] | None, b: list[float] | None) -> bool:
    return a is None or b is None or not (a[1] < b[0] or b[1] < a[0])


def comparison_markdown(summary: dict[str, dict[str, dict]], max_total: float | None = None) -> str:
    """`summary[model][part]` is a headline dict (reward_mean, reward_ci, f1, f1_ci, rates, n), models in
    training order (base, sft, grpo)."""
    out_of = f"of {max_total:g}" if max_total else ""
    lines = ["# Task evaluation: models compared", "",
             f"Greedy decoding on the test split. Reward is the rubric total {out_of}; intervals are bootstrap 95%.",
             "", "| model | part | n | " + " | ".join(COLUMNS) + " |", "|---" * (len(COLUMNS) + 3) + "|"]
    parts = list(next(iter(summary.values())))
    for part in parts:
        for model, groups in summary.items():
            g = groups.get(part)
            if not g:
                continue
            f1 = _ci(g["f1"], g.get("f1_ci"), 3) if "f1" in g else "-"
            lines.append(f"| {model} | {part} | {g.get('n', '-')} | {_ci(g['reward_mean'], g['reward_ci'], 2)} | {f1} | "
                         f"{g['json_valid_rate']:.2f} | {g['extra_text_rate']:.2f} | {g['invented_rate']:.2f} |")
    lines += ["", "## Differences", "", "Each later model against each earlier one (B - A).", ""]
    models = list(summary)
    for i, base in enumerate(models):
        for model in models[i + 1:]:
            for part in parts:
                a, b = summary[model].get(part), summary[base].get(part)
                if a and b:
                    lines.append(f"- {model} vs {base}, {part}: {_difference(a, b)}")
    return "\n".join(lines) + "\n"


def _difference(a: dict, b: dict) -> str:
    words = []
    for key, ci_key, name in (("reward_mean", "reward_ci", "reward"), ("f1", "f1_ci", "F1")):
        if key in a and key in b:
            sure = "intervals overlap" if _overlap(a.get(ci_key), b.get(ci_key)) else "intervals do not overlap"
            words.append(f"{name} {a[key] - b[key]:+.3f} ({sure})")
    return "; ".join(words)
