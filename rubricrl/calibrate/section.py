"""The calibration report (the rubric stage's report section) as Markdown, and its PNG plots beside it."""

from __future__ import annotations

from pathlib import Path

from rubricrl.calibrate.gate import null_rows
from rubricrl.core.tables import table
from rubricrl.core.taskfile import EXTRACTION, FREE_TEXT


def _kinds(report: dict) -> list[str]:
    return report.get("kinds") or [EXTRACTION]  # reports written before `kinds` were extraction's


def true_metric(report: dict) -> str:
    """What the calibration's true metric is for the kinds in the set: the share of schema fields answered exactly
    right for extraction, of the held-out checklist's entries passed for free text (rubricrl.calibrate.calibrate)."""
    names = {EXTRACTION: "strict field accuracy", FREE_TEXT: "checklist score"}
    return " / ".join(names[k] for k in sorted(_kinds(report)) if k in names) or names[EXTRACTION]


def _has_extraction(report: dict) -> bool:
    return EXTRACTION in _kinds(report)


def markdown(report: dict, gate: list[str]) -> str:
    """The calibration report (the rubric stage's report section; its plots beside it)."""
    r, metric = report["reward"], true_metric(report)
    lines = [f"# Rubric calibration: {report['rubric']}", "",
             f"{report['n_items']} answers on {report['n_tasks']} validation tasks; "
             f"judge calls per scored response: {report['judge_calls_per_response']}. "
             f"Gate: **{'failed' if gate else 'passed'}**.", "",
             "## Whole reward", "",
             table(["metric", "value"], [
                 ["pairwise accuracy (gold above each corruption)",
                  f"{r['pairwise_accuracy']} ({r['n_pairs']} pairs, {r['pairwise_ties']} ties)"],
                 ["Kendall's tau vs known ordering", r["kendall_tau"]],
                 [f"Spearman vs {metric}", r["spearman_accuracy"]],
                 ["reward mean / std", f"{r['scale']['mean']} / {r['scale']['std']}"],
                 ["reward min / max", f"{r['scale']['min']} / {r['scale']['max']} (max possible {report['max_total']})"]],
                 digits=4),
             "", "![Per-component separation](separation.png)", "",
             f"![Reward vs {metric}](reward_vs_accuracy.png)", "",
             "## Components", "",
             table(["component", "kind", "ROC AUC", "std", "verdict"],
                   [[cid, row["kind"], row["auc"], row["std"], row["verdict"]]
                    for cid, row in report["components"].items()], digits=4),
             "", "## Judge consistency", "",
             table(["criterion", "judge", "repeats", "agreement", "mean spread"],
                   [[cid, row["judge"], row["verdicts_with_repeats"], row["agreement"], row["mean_spread"]]
                    for cid, row in report["judge_consistency"].items()], digits=4)
             if report["judge_consistency"] else ("No judge criterion in this rubric (the judge calls counted "
                                                  "above, if any, grade free-text items that have no check)."),
             "", "## Reward-hacking probes", "",
             f"Each probe must score at least rubric.min_margin = {report.get('min_margin', 0)} below gold on every task.",
             "",
             table(["probe", "n", "mean score", "mean gold", "below gold", "mean margin", "worst margin", "pass",
                    f"{metric} (gold)"],
                   [[mode, row["n"], row["mean_score"], row["mean_gold"], f"{row['share_below_gold']:.0%}",
                     row["mean_margin"], row["worst_margin"], "yes" if row["pass"] else "NO",
                     f"{row['true_metric']:.3f} ({row['true_metric_gold']:.3f})" if "true_metric" in row else "-"]
                    for mode, row in report["probes"].items()])]
    econ = report.get("economics") if _has_extraction(report) else None  # prices of a missed JSON field
    if econ:
        anp = econ["all_null_vs_partial"]
        ovn = econ.get("omission_vs_null")  # absent from reports written before it
        first, last = null_rows(econ), null_rows(econ, last=True)

        def dearer(row):
            return "-" if not row else f"{row['share_null_dearer']:.0%} ({row['worst_gap']})"

        lines += ["", "## Price of a missed field", "",
                  "Mean cost against gold of one field missed each way. A null for a stated value must cost more "
                  "than every wrong answer on every task, and so must the last null of an all-null answer (its "
                  "total less that of the one with the field right); leaving the field out must not be cheaper than "
                  "its null.", "",
                  table(["way to miss", "mean cost", "null dearer on (worst gap)", "last null dearer on (worst gap)"],
                        [[mode, cost, dearer(first.get(mode)), dearer(last.get(mode))]
                         for mode, cost in econ["cost"].items()])]
        bvn = econ.get("broken_vs_all_null") or {}  # absent from reports written before it
        if bvn.get("n"):
            lines += ["", f"An answer with no JSON object (cut short, prose) costs less than the all-null answer on "
                          f"{bvn['share_broken_cheaper']:.0%} of {bvn['n']} (task, answer) pairs (worst gap "
                          f"{bvn['worst_gap']}; it must be 0%)."]
        if ovn:
            lines.append(f"- left-out field vs its null on {ovn['n']} tasks: worst gap {_cell(ovn['worst_gap'])} "
                         f"(omission cheaper on {_cell(ovn['share_omission_cheaper'])} of them)")
        lines.append(f"- all-null vs partly right on {anp['n']} tasks: all-null lower by {anp['mean_lead']} on average, "
                     f"{anp['worst_lead']} at worst")
    pol = report.get("on_policy")
    lines += ["", "## On the policy's own samples", ""]
    if pol:
        lines.append(table(["metric", "value"], [
            ["samples (tasks)", f"{pol['n_samples']} ({pol['n_tasks']}), {pol['distinct_responses']} distinct"],
            [f"Spearman reward vs {metric}", pol["spearman_accuracy"]],
            ["pairwise accuracy within a task", f"{pol['pairwise_accuracy']} ({pol['n_pairs']} pairs, "
                                                f"{pol['pairwise_ties']} reward ties)"],
            [f"mean reward / mean {metric}", f"{pol['mean_reward']} / {pol['mean_accuracy']}"]], digits=4))
        gen = report.get("policy_generation")
        if gen:
            lines += ["", f"Sampled {gen['n']} answers, {gen['new_tokens']} tokens in {gen['seconds']:.1f} s: "
                          f"{gen['tokens_per_s']:.1f} tokens/s (batch {gen['batch_size']}, {gen['truncated']} truncated)."]
    else:
        lines.append("No policy samples (rubric.policy_samples: 0).")
    if report.get("dropped"):
        lines += ["", "Dropped components: " + ", ".join(f"`{d}`" for d in report["dropped"]) + "."]
    if report.get("reference"):
        lines += ["", *reference_lines(report["reference"])]
    if report.get("reference_heldout"):
        lines += ["", *reference_lines(report["reference_heldout"], heldout=True)]
    if report.get("label_free"):
        lines += ["", *label_free_lines(report)]
    on = report.get("gate_on", "referenced")
    which = {"referenced": "the referenced figures", "label_free": "the label-free figures",
             "both": "both the referenced and the label-free figures"}[on]
    lines += ["", "## Gate", "", f"rubric.gate_on: {on} (the bars apply to {which}).", ""]
    misses = (" abstaining costs more than every wrong answer, leaving a field out is not cheaper than its null,"
              if _has_extraction(report) else "")
    reference = (" The hand-written reference set meets its bars (rubric.reference_min_reward, "
                 "rubric.reference_min_checklist), no good reply scores 0 and every failure sits rubric.min_margin "
                 "below its good replies." if report.get("reference") else "")
    lines += [f"- FAIL: {g}" for g in gate] if gate else [
        f"All probes score below gold by the margin,{misses} and the correlation bars "
        f"are met on the corruption set and on the policy's samples ({which}).{reference}"]
    return "\n".join(lines) + "\n"


def reference_lines(ref: dict, heldout: bool = False) -> list[str]:
    """The hand-written reference set's section (rubricrl/calibrate/reference.py); `heldout`: its held-out scenarios,
    reported and never gated."""
    err = ref["errors"]
    lines = ["## Hand-written reference set" + (", held out" if heldout else ""), "",
             *(["Scenarios written after the reward and the checklist were tuned on the set above, by someone who had "
                "not read how they read, and never tuned on since: what the figures are worth on unseen text. "
                "Reported, never gated.", ""] if heldout else []),
             f"{ref['n_replies']} replies to {ref['n_scenarios']} hand-written tasks ({', '.join(ref['languages'])}) "
             f"in scenarios the generator does not write; {ref['n_pairs']} pairs, each a good reply above a failure "
             "of the same task (a tie orders nothing).", "",
             table(["metric", "pairs ordered", "95% interval over scenarios"],
                   [["reward", ref["reward_pair_accuracy"], _span(ref.get("reward_pair_interval"))],
                    ["checklist (the true metric)", ref["checklist_pair_accuracy"],
                     _span(ref.get("checklist_pair_interval"))]], digits=4), "",
             f"Errors: the reward alone misorders {err['reward_only']} pairs, the checklist alone "
             f"{err['checklist_only']}, both {err['both']} (phi {_cell(err['phi'])}: how much the two readings' "
             "errors coincide). Good replies the reward scores 0: "
             + (", ".join(ref["good_scored_zero"]) or "none") + ".", "",
             table(["failure kind", "pairs", "reward orders", "checklist orders", "worst reward margin",
                    f"pairs under the {ref['min_margin']} margin"],
                   [[kind, row["pairs"], row["reward_accuracy"], row["checklist_accuracy"], row["worst_margin"],
                     row["under_margin"]] for kind, row in ref["kinds"].items()], digits=4)]
    return lines


def _span(ci) -> str:
    return "-" if not ci else f"{ci[0]:.3f} to {ci[1]:.3f}"


def _cell(value, fmt: str = "{}") -> str:
    return "-" if value is None else fmt.format(value)


def _closest(rows: dict) -> str:
    """The wrong answer a null's price comes closest to (or falls below): its gap and name."""
    if not rows:
        return "-"
    mode = min(rows, key=lambda m: rows[m]["worst_gap"])
    return f"{rows[mode]['worst_gap']} ({mode})"


def _headline(block: dict) -> list:
    """One figure set's headline values, in the order of label_free_lines' rows."""
    r, econ, pol = block["reward"], block.get("economics") or {}, block.get("on_policy") or {}
    probes = block["probes"].values()
    anp, ovn = econ.get("all_null_vs_partial") or {}, econ.get("omission_vs_null") or {}
    return [f"{r['pairwise_accuracy']} ({r['pairwise_ties']} ties)", r["kendall_tau"], r["spearman_accuracy"],
            f"{r['scale']['mean']} / {r['scale']['std']}",
            f"{sum(not p['pass'] for p in probes)} of {len(probes)}",
            min((p["worst_margin"] for p in probes), default=None),
            _closest(null_rows(econ)), _closest(null_rows(econ, last=True)),
            f"{_cell(ovn.get('worst_gap'))} ({_cell(ovn.get('share_omission_cheaper'))})",
            _cell(anp.get("worst_lead")), _cell(pol.get("spearman_accuracy")), _cell(pol.get("pairwise_accuracy"))]


def label_free_lines(report: dict) -> list[str]:
    """The calibration with every reference hidden from the reward, beside the referenced figures."""
    free, metric, extraction = report["label_free"], true_metric(report), _has_extraction(report)
    names = ["pairwise accuracy, gold above each corruption (ties)", "Kendall's tau vs known ordering",
             f"Spearman reward vs {metric} (corruption set)", "reward mean / std",
             "probes short of the margin", "worst probe margin",
             "null vs every wrong answer: worst gap (the closest)",
             "last null vs every wrong answer: worst gap (the closest)",
             "left-out field vs its null: worst gap (share omission cheaper)", "all-null vs partly right: worst lead",
             "on-policy Spearman", "on-policy pairwise accuracy"]
    rows = [[n, a, b] for n, a, b in zip(names, _headline(report), _headline(free))
            if extraction or not n.startswith(("null vs", "last null", "left-out", "all-null"))]  # a JSON field's prices
    how = []
    if extraction:
        how.append("the faithfulness judge can only check values against the source text and gives a null (or a "
                   "left-out field) half credit, and missed_values cannot see a null for a stated value")
    if FREE_TEXT in _kinds(report):
        how.append("a free-text task's items read its source, not its gold reply, so they score as before")
    probe_rows = [[mode, row["n"], report["probes"][mode]["mean_margin"], report["probes"][mode]["worst_margin"],
                   row["mean_margin"], row["worst_margin"], f"{row['share_below_gold']:.0%}",
                   "yes" if row["pass"] else "NO"] for mode, row in free["probes"].items()]
    blind = [f"`{cid}`" + ("" if row["varies"] else " (constant)")
             for cid, row in free["components"].items() if not row["separates"]]
    return ["## Without references (label-free)", "",
            "The same answers scored by the calibrated reward with every task's reference hidden from it (the true "
            f"metric, {metric}, still reads them): what the reward is worth on data without gold "
            f"answers. Here {'; '.join(how)}. Scoring took {free['seconds']} s more.", "",
            table(["figure", "referenced", "label-free"], rows, digits=4), "",
            table(["probe", "n", "mean margin", "worst margin", "label-free mean margin", "label-free worst margin",
                   "label-free below gold", "label-free pass"], probe_rows), "",
            ("Without references these components do not separate gold from their targets: " + ", ".join(blind) + "."
             if blind else "Without references every component still separates gold from its targets.")]


def plots(points: dict, out_dir: Path, metric: str = "strict field accuracy") -> list[Path]:
    """separation.png: each component's signed score, gold vs the answers it targets; reward_vs_accuracy.png."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    comps = list(points["signed"])
    fig, axes = plt.subplots(1, len(comps), figsize=(2.6 * len(comps), 3.2), squeeze=False)
    for ax, cid in zip(axes[0], comps):
        vals = points["signed"][cid]
        gold = [v for v, m in zip(vals, points["modes"]) if m == "gold" and v is not None]
        targeted = [v for v, m, t in zip(vals, points["modes"], points["targets"]) if cid in t and v is not None]
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
    ax.set_xlabel(metric)
    ax.set_ylabel("rubric reward")
    ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    scatter = out_dir / "reward_vs_accuracy.png"
    fig.savefig(scatter, dpi=90)
    plt.close(fig)
    return [sep, scatter]
