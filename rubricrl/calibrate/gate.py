"""The rubric gate: every reason a calibrated rubric is not fit to train on; GRPO checks it before it starts."""

from __future__ import annotations

from rubricrl.calibrate.reference import reference_failures
from rubricrl.core.errors import RubricRLError


class GateError(RubricRLError):
    """The calibrated rubric failed a hack probe or the correlation bar."""


GATE_ON = ("referenced", "label_free", "both")

# The wrong answers a policy can give for one field instead of a null, and what each is (README: rubric economics):
# a null for a stated value must cost more than every one of them, on every task.
WRONG_ANSWERS = {
    "distractor_value": "a wrong value the text states",
    "wrong_value": "a value the text does not support",
    "hedged_value": "a hedged value",
    "misformatted_number": "the right number in the wrong type",
    "wrong_type": "a value of the wrong type",
    "scaled_unit": "a number in a unit the task does not ask for",
    "shortened_value": "a value cut short",
    "copy_source": "a copied sentence",
    "invented_value": "a value for a field the text is silent on",
    "placeholder_for_null": "a placeholder for a field the text is silent on",
}


def null_rows(econ: dict, last: bool = False) -> dict[str, dict]:
    """economics' null-vs-wrong-answer rows (the last null's with `last`); a report written before them holds the
    distractor's alone (`null_vs_distractor`)."""
    if "null_vs_misses" not in econ:
        old = econ.get("null_vs_distractor")
        return {} if last or not old else {"distractor_value": old}
    return econ.get("last_null_vs_misses" if last else "null_vs_misses") or {}


def gate_failures(report: dict, bars) -> list[str]:
    """Every reason the rubric is not fit to train on. `bars` is the rubric params section (RubricParams).

    rubric.gate_on says which figures the bars apply to: the calibration as given (`referenced`, the default:
    the generated data has a reference on every task, and the reward reads it), the one with every reference
    hidden from the reward (`label_free`: the report's `label_free` block, for training data without
    references), or both. A label-free failure says so ("label-free probe ...")."""
    on = getattr(bars, "gate_on", "referenced")
    if on not in GATE_ON:
        raise ValueError(f"rubric.gate_on: {on!r} is not one of {', '.join(GATE_ON)}")
    fails = [f"criteria: every criterion that scores {kind} tasks ({', '.join(ids)}) separates gold from its "
             f"corruptions less than rubric.min_auc: the rubric cannot score these tasks; rework their criteria "
             f"(items, judge prompts) and rerun the rubric stage"
             for kind, ids in sorted((report.get("kinds_all_weak") or {}).items())]
    if on in ("referenced", "both"):
        fails += _failures(report, bars, report.get("min_margin", 0))
    if report.get("reference"):
        fails += reference_failures(report["reference"], bars)
    if on in ("label_free", "both"):
        free = report.get("label_free")
        if free is None:
            fails.append(f"label-free: the report has no label-free calibration (rubric.gate_on: {on}); rerun the "
                         "rubric stage")
        else:
            fails += [f"label-free {f}" for f in _failures(free, bars, report.get("min_margin", 0), label_free=True)]
    return fails


def _failures(figures: dict, bars, min_margin: float, label_free: bool = False) -> list[str]:
    """The bars applied to one set of figures (the report's top level, or its label_free block)."""
    where = " with the references hidden" if label_free else ""
    fails = [f"probe '{mode}': scores less than rubric.min_margin={min_margin} below gold{where} "
             f"(worst margin {row['worst_margin']}, {row['share_below_gold']:.0%} ranked below gold)"
             for mode, row in sorted(figures["probes"].items()) if not row["pass"]]
    rho = figures["reward"]["spearman_accuracy"]
    if not rho > bars.min_spearman:
        fails.append(f"metric 'spearman_accuracy': {rho} on the corruption set{where} is not above "
                     f"rubric.min_spearman={bars.min_spearman}")
    econ = figures.get("economics") or {}
    fix = ("without a reference the missed_values penalty cannot tell a null for a stated value, so only the "
           "judge's half credit prices it" if label_free else
           "price the null above it (missed_values: per above invented_values' per, params.type_share the field_types "
           "share, cap: null)")
    rows = {"a null for a stated value": null_rows(econ),
            "the last null of an all-null answer": null_rows(econ, last=True)}
    for mode in dict.fromkeys(m for by_mode in rows.values() for m in by_mode):
        broken = {what: by_mode[mode] for what, by_mode in rows.items()
                  if by_mode.get(mode, {}).get("n") and by_mode[mode]["worst_gap"] <= 1e-9}
        if broken:
            on = "; ".join(f"{what} on {1 - row['share_null_dearer']:.0%} of tasks (worst gap {row['worst_gap']})"
                           for what, row in broken.items())
            capped = " past a cap" if "a null for a stated value" not in broken else ""
            fails.append(f"economics: a null costs no more than {WRONG_ANSWERS.get(mode, mode)} ('{mode}'){where}: "
                         f"{on}: abstaining{capped} is a cheaper way to miss a field, so the policy would learn to "
                         f"answer null; {fix}")
    ovn = econ.get("omission_vs_null") or {}
    if ovn.get("n") and ovn["worst_gap"] < -1e-9:
        fix = ("the faithfulness judge must give a left-out field no more than a null's half credit" if label_free
               else "judge a left-out field as a null (the faithfulness judge) and charge it as one (missed_values)")
        fails.append(f"economics: leaving out the field of a stated value costs less than a null for it on "
                     f"{ovn['share_omission_cheaper']:.0%} of tasks{where} (worst gap {ovn['worst_gap']}): omitting is "
                     f"cheaper than abstaining, so the policy would learn to drop the fields it is unsure of; {fix}")
    bvn = econ.get("broken_vs_all_null") or {}
    if bvn.get("n") and bvn["worst_gap"] < -1e-9:
        fix = ("" if label_free else "; charge an answer with no JSON object every value the source gives "
               "(missed_values)")
        fails.append(f"economics: an answer with no JSON object (cut short, prose) costs less than an all-null answer "
                     f"on {bvn['share_broken_cheaper']:.0%} of tasks{where} (worst gap {bvn['worst_gap']}): breaking "
                     f"the JSON is a cheaper way to miss every field, so the policy would learn to break it{fix}")
    anp = econ.get("all_null_vs_partial") or {}
    if anp.get("n") and anp["worst_lead"] < bars.min_margin:
        fails.append(f"economics: an all-null answer scores less than rubric.min_margin={bars.min_margin} below a "
                     f"partly right one{where} (worst lead {anp['worst_lead']})")
    pol = figures.get("on_policy")
    if bars.policy_samples and pol is None:
        fails.append("on-policy: no policy samples were scored (rubric.policy_samples > 0)")
    elif pol is not None:
        rho_p, acc_p = pol["spearman_accuracy"], pol["pairwise_accuracy"]
        if rho_p is None or not rho_p > bars.min_policy_spearman:
            fails.append(f"on-policy 'spearman_accuracy': {rho_p} on {pol['n_samples']} policy samples{where} is "
                         f"not above rubric.min_policy_spearman={bars.min_policy_spearman}")
        if acc_p is None or not acc_p >= bars.min_policy_pairwise:
            fails.append(f"on-policy 'pairwise_accuracy': {acc_p} on {pol['n_pairs']} within-task pairs{where} is "
                         f"below rubric.min_policy_pairwise={bars.min_policy_pairwise}")
    return fails


def check_gate(report: dict, bars, allow_failures: bool = False) -> list[str]:
    """Raise GateError naming every failing probe or metric, unless explicitly allowed (then return them)."""
    fails = gate_failures(report, bars)
    if fails and not allow_failures:
        raise GateError("the rubric failed its calibration gate; training will not start:\n"
                        + "\n".join(f"  - {f}" for f in fails)
                        + "\nFix the rubric, or set rubric.allow_gate_failures: true in params.yaml (logged).")
    return fails
