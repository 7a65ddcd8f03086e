"""The rubric gate: every reason a calibrated rubric is not fit to train on; GRPO checks it before it starts."""

from __future__ import annotations

from rubricrl.core.errors import RubricRLError


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
