"""The task evaluation's figures: models side by side with their intervals, and the paired differences."""

from __future__ import annotations

from pathlib import Path

from rubricrl.core.figures import FigureResult, errbar, figure, save



def plot_models(summary: list[dict], out_dir: Path) -> FigureResult:
    """Rubric reward and strict field accuracy per model and test part, with their bootstrap 95% CIs."""
    parts = list(dict.fromkeys(str(r.get("part")) for r in summary))
    rows = sorted(summary, key=lambda r: (str(r.get("part")) != "all", parts.index(str(r.get("part")))))  # stable
    labels = [str(r.get("label") or f"{r.get('model')}/{r.get('part')}") for r in rows]
    fig, axes = figure(1, 2, size=(10.0, 0.35 * len(rows) + 1.8), sharey=True)
    errbar(axes[0][0], labels, [r.get("reward_mean") for r in rows], [r.get("reward_ci_low") for r in rows],
            [r.get("reward_ci_high") for r in rows], "tab:blue")
    axes[0][0].set_title("rubric reward (95% CI)", fontsize=10)
    errbar(axes[0][1], labels, [r.get("field_accuracy") for r in rows], [r.get("field_accuracy_ci_low") for r in rows],
            [r.get("field_accuracy_ci_high") for r in rows], "tab:green")
    axes[0][1].set_title("strict field accuracy (95% CI)", fontsize=10)
    fig.suptitle("Evaluation on the test split: models side by side")
    return save(fig, out_dir, "models", "Models compared", {"labels": labels})


PAIRED_PLOTTED = (("reward", "rubric reward"), ("field_accuracy", "strict field accuracy"))


def plot_paired(paired: list[dict], out_dir: Path) -> FigureResult:
    """Paired differences (model minus the earlier model, same tasks) with their 95% score intervals."""
    combos = list(dict.fromkeys((r["model"], r["vs"], r["part"]) for r in paired))
    labels = [f"{m} - {v} ({p})" for m, v, p in combos]
    keyed = {(r["model"], r["vs"], r["part"], r["metric"]): r for r in paired}
    fig, axes = figure(1, len(PAIRED_PLOTTED), size=(10.0, 0.35 * len(combos) + 1.8), sharey=True)
    for (metric, title), ax in zip(PAIRED_PLOTTED, axes[0]):
        got = [keyed.get((*c, metric)) or {} for c in combos]
        errbar(ax, labels, [g.get("diff") for g in got], [(g.get("ci") or [None, None])[0] for g in got],
                [(g.get("ci") or [None, None])[1] for g in got], "tab:blue" if metric == "reward" else "tab:green")
        ax.axvline(0, color="k", linewidth=1)
        ax.set_title(f"{title}: paired difference (95% CI)", fontsize=10)
    fig.suptitle("Paired differences on the same test tasks")
    return save(fig, out_dir, "paired", "Paired model differences", {"comparisons": labels})


