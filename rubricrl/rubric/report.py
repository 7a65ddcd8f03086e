"""The calibration report as Markdown and PNG plots, and the gate training checks before it starts."""

from __future__ import annotations

from pathlib import Path

from rubricrl.errors import RubricRLError


class GateError(RubricRLError):
    """The calibrated rubric failed a hack probe or the correlation bar."""


def gate_failures(report: dict, min_spearman: float) -> list[str]:
    fails = [f"probe '{mode}': a corrupted answer scores at or above gold (worst margin {row['worst_margin']}, "
             f"{row['share_below_gold']:.0%} ranked below gold)"
             for mode, row in sorted(report["probes"].items()) if not row["pass"]]
    rho = report["reward"]["spearman_f1"]
    if not rho > min_spearman:
        fails.append(f"metric 'spearman_f1': {rho} is not above the bar rubric.min_spearman={min_spearman}")
    return fails


def check_gate(report: dict, min_spearman: float, allow_failures: bool = False) -> list[str]:
    """Raise GateError naming every failing probe or metric, unless explicitly allowed (then return them)."""
    fails = gate_failures(report, min_spearman)
    if fails and not allow_failures:
        raise GateError("the rubric failed its calibration gate; training will not start:\n"
                        + "\n".join(f"  - {f}" for f in fails)
                        + "\nFix the rubric, or set rubric.allow_gate_failures: true in params.yaml (logged).")
    return fails


def markdown(report: dict, gate: list[str]) -> str:
    r = report["reward"]
    lines = [f"# Rubric calibration: {report['rubric']}", "",
             f"{report['n_items']} answers on {report['n_tasks']} validation tasks; "
             f"judge calls per scored response: {report['judge_calls_per_response']}.", "",
             "## Whole reward", "",
             "| metric | value |", "|---|---|",
             f"| pairwise accuracy (gold above each corruption) | {r['pairwise_accuracy']} ({r['n_pairs']} pairs, {r['pairwise_ties']} ties) |",
             f"| Kendall's tau vs known ordering | {r['kendall_tau']} |",
             f"| Spearman vs gold field F1 | {r['spearman_f1']} |",
             f"| reward mean / std | {r['scale']['mean']} / {r['scale']['std']} |",
             f"| reward min / max | {r['scale']['min']} / {r['scale']['max']} (max possible {report['max_total']}) |",
             "", "## Components", "", "| component | kind | ROC AUC | std | verdict |", "|---|---|---|---|---|"]
    for cid, row in report["components"].items():
        lines.append(f"| {cid} | {row['kind']} | {row['auc']} | {row['std']} | {row['verdict']} |")
    lines += ["", "## Judge consistency", "", "| criterion | judge | repeats | agreement | mean spread |", "|---|---|---|---|---|"]
    for cid, row in report["judge_consistency"].items():
        lines.append(f"| {cid} | {row['judge']} | {row['verdicts_with_repeats']} | {row['agreement']} | {row['mean_spread']} |")
    lines += ["", "## Reward-hacking probes", "", "| probe | n | mean score | mean gold | below gold | worst margin | pass |",
              "|---|---|---|---|---|---|---|"]
    for mode, row in report["probes"].items():
        lines.append(f"| {mode} | {row['n']} | {row['mean_score']} | {row['mean_gold']} | "
                     f"{row['share_below_gold']:.0%} | {row['worst_margin']} | {'yes' if row['pass'] else 'NO'} |")
    lines += ["", "## Gate", ""]
    lines += [f"- FAIL: {g}" for g in gate] if gate else ["All probes rank below gold and the correlation bar is met."]
    return "\n".join(lines) + "\n"


def plots(points: dict, out_dir: Path) -> list[Path]:
    """separation.png: each component's signed score, gold vs the answers it targets; reward_vs_f1.png."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    comps = list(points["signed"])
    fig, axes = plt.subplots(1, len(comps), figsize=(2.6 * len(comps), 3.2), squeeze=False)
    for ax, cid in zip(axes[0], comps):
        vals = points["signed"][cid]
        gold = [v for v, m in zip(vals, points["modes"]) if m == "gold"]
        targeted = [v for v, m, t in zip(vals, points["modes"], points["targets"]) if cid in t]
        ax.boxplot([gold, targeted or [0.0]], tick_labels=["gold", "targeted"])
        ax.set_title(cid, fontsize=9)
    fig.suptitle("Per-component separation (penalties negative)")
    fig.tight_layout()
    sep = out_dir / "separation.png"
    fig.savefig(sep, dpi=90)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(5, 4))
    for mode in sorted(set(points["modes"])):
        xs = [f for f, m in zip(points["f1"], points["modes"]) if m == mode]
        ys = [t for t, m in zip(points["totals"], points["modes"]) if m == mode]
        ax.scatter(xs, ys, s=10, label=mode, alpha=0.7)
    ax.set_xlabel("gold field F1")
    ax.set_ylabel("rubric reward")
    ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    scatter = out_dir / "reward_vs_f1.png"
    fig.savefig(scatter, dpi=90)
    plt.close(fig)
    return [sep, scatter]
