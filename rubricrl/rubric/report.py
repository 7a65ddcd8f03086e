"""The calibration report as Markdown and PNG plots, and the gate training checks before it starts."""

from __future__ import annotations

from pathlib import Path

from rubricrl.errors import RubricRLError


class GateError(RubricRLError):
    """The calibrated rubric failed a hack probe or the correlation bar."""


def gate_failures(report: dict, bars) -> list[str]:
    """Every reason the rubric is not fit to train on. `bars` is the rubric params section (RubricParams)."""
    fails = [f"probe '{mode}': scores less than rubric.min_margin={report.get('min_margin', 0)} below gold "
             f"(worst margin {row['worst_margin']}, {row['share_below_gold']:.0%} ranked below gold)"
             for mode, row in sorted(report["probes"].items()) if not row["pass"]]
    rho = report["reward"]["spearman_accuracy"]
    if not rho > bars.min_spearman:
        fails.append(f"metric 'spearman_accuracy': {rho} on the corruption set is not above rubric.min_spearman={bars.min_spearman}")
    econ = report.get("economics") or {}
    nvd = econ.get("null_vs_distractor") or {}
    if nvd.get("n") and nvd["worst_gap"] <= 1e-9:
        fails.append(f"economics: a null for a stated value costs no more than a wrong value from the text on "
                     f"{1 - nvd['share_null_dearer']:.0%} of tasks (worst gap {nvd['worst_gap']}): abstaining is "
                     "the cheapest way to miss a field, so the policy would learn to answer null; price it "
                     "(the missed_values penalty)")
    anp = econ.get("all_null_vs_partial") or {}
    if anp.get("n") and anp["worst_lead"] < bars.min_margin:
        fails.append(f"economics: an all-null answer scores less than rubric.min_margin={bars.min_margin} below a "
                     f"partly right one (worst lead {anp['worst_lead']})")
    pol = report.get("on_policy")
    if bars.policy_samples and pol is None:
        fails.append("on-policy: no policy samples were scored (rubric.policy_samples > 0)")
    elif pol is not None:
        rho_p, acc_p = pol["spearman_accuracy"], pol["pairwise_accuracy"]
        if rho_p is None or not rho_p > bars.min_policy_spearman:
            fails.append(f"on-policy 'spearman_accuracy': {rho_p} on {pol['n_samples']} policy samples is not above "
                         f"rubric.min_policy_spearman={bars.min_policy_spearman}")
        if acc_p is None or not acc_p >= bars.min_policy_pairwise:
            fails.append(f"on-policy 'pairwise_accuracy': {acc_p} on {pol['n_pairs']} within-task pairs is below "
                         f"rubric.min_policy_pairwise={bars.min_policy_pairwise}")
    return fails


def check_gate(report: dict, bars, allow_failures: bool = False) -> list[str]:
    """Raise GateError naming every failing probe or metric, unless explicitly allowed (then return them)."""
    fails = gate_failures(report, bars)
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
             f"| Spearman vs strict field accuracy | {r['spearman_accuracy']} |",
             f"| reward mean / std | {r['scale']['mean']} / {r['scale']['std']} |",
             f"| reward min / max | {r['scale']['min']} / {r['scale']['max']} (max possible {report['max_total']}) |",
             "", "## Components", "", "| component | kind | ROC AUC | std | verdict |", "|---|---|---|---|---|"]
    for cid, row in report["components"].items():
        lines.append(f"| {cid} | {row['kind']} | {row['auc']} | {row['std']} | {row['verdict']} |")
    lines += ["", "## Judge consistency", "", "| criterion | judge | repeats | agreement | mean spread |", "|---|---|---|---|---|"]
    for cid, row in report["judge_consistency"].items():
        lines.append(f"| {cid} | {row['judge']} | {row['verdicts_with_repeats']} | {row['agreement']} | {row['mean_spread']} |")
    lines += ["", "## Reward-hacking probes", "",
              f"Each probe must score at least rubric.min_margin = {report.get('min_margin', 0)} below gold on every task.", "",
              "| probe | n | mean score | mean gold | below gold | mean margin | worst margin | pass |",
              "|---|---|---|---|---|---|---|---|"]
    for mode, row in report["probes"].items():
        lines.append(f"| {mode} | {row['n']} | {row['mean_score']} | {row['mean_gold']} | "
                     f"{row['share_below_gold']:.0%} | {row['mean_margin']} | {row['worst_margin']} | {'yes' if row['pass'] else 'NO'} |")
    econ = report.get("economics")
    if econ:
        nvd, anp = econ["null_vs_distractor"], econ["all_null_vs_partial"]
        lines += ["", "## Price of a missed field", "",
                  "Mean cost against gold of one field missed each way (a null for a stated value must not be the cheapest).", "",
                  "| way to miss | mean cost |", "|---|---|"]
        lines += [f"| {mode} | {cost} |" for mode, cost in econ["cost"].items()]
        lines += ["", f"- null vs distractor on {nvd['n']} tasks: worst gap {nvd['worst_gap']} "
                      f"(null dearer on {nvd['share_null_dearer']} of them)",
                  f"- all-null vs partly right on {anp['n']} tasks: all-null lower by {anp['mean_lead']} on average, "
                  f"{anp['worst_lead']} at worst"]
    pol = report.get("on_policy")
    lines += ["", "## On the policy's own samples", ""]
    if pol:
        lines += ["| metric | value |", "|---|---|",
                  f"| samples (tasks) | {pol['n_samples']} ({pol['n_tasks']}), {pol['distinct_responses']} distinct |",
                  f"| Spearman reward vs strict field accuracy | {pol['spearman_accuracy']} |",
                  f"| pairwise accuracy within a task | {pol['pairwise_accuracy']} ({pol['n_pairs']} pairs, {pol['pairwise_ties']} reward ties) |",
                  f"| mean reward / mean strict field accuracy | {pol['mean_reward']} / {pol['mean_accuracy']} |"]
    else:
        lines.append("No policy samples (rubric.policy_samples: 0).")
    lines += ["", "## Gate", ""]
    lines += [f"- FAIL: {g}" for g in gate] if gate else [
        "All probes score below gold by the margin, abstaining is not the cheapest miss, and the correlation bars "
        "are met on the corruption set and on the policy's samples."]
    return "\n".join(lines) + "\n"


def plots(points: dict, out_dir: Path) -> list[Path]:
    """separation.png: each component's signed score, gold vs the answers it targets; reward_vs_accuracy.png."""
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
        xs = [f for f, m in zip(points["accuracy"], points["modes"]) if m == mode]
        ys = [t for t, m in zip(points["totals"], points["modes"]) if m == mode]
        ax.scatter(xs, ys, s=10, label=mode, alpha=0.7)
    ax.set_xlabel("strict field accuracy")
    ax.set_ylabel("rubric reward")
    ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    scatter = out_dir / "reward_vs_accuracy.png"
    fig.savefig(scatter, dpi=90)
    plt.close(fig)
    return [sep, scatter]
