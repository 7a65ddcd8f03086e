"""Label-free calibration: the same answers scored with every reference hidden from the reward, its own block in
the report, and the gate on it when rubric.gate_on asks."""

from __future__ import annotations

import json

import pytest

from rubricrl.calibrate.calibrate import calibrate, calibration_set, hide_references
from rubricrl.calibrate.draft import derive_rubric
from rubricrl.calibrate.gate import GateError, check_gate, gate_failures
from rubricrl.calibrate.section import markdown
from rubricrl.calibrate.workflow import write_outputs
from rubricrl.config import Params, RubricParams
from rubricrl.data.generate import generate_dataset
from rubricrl.reward.scoring import RubricScorer
from rubricrl.stages.rubric import RubricResult

NO_POLICY = RubricParams(policy_samples=0)
FIGURES = ("reward", "probes", "economics", "on_policy")


@pytest.fixture(scope="module")
def val():
    return generate_dataset(seed=0, n_train=300, n_test=40)["train"][:30]


def _null_for_a_stated_value(task):
    """(field, answer): gold with a null for a string the text states verbatim; None when the task has none."""
    key = next((k for k, v in task.reference.items() if isinstance(v, str) and v.casefold() in task.text.casefold()
                and "null" in json.dumps(task.properties[k].get("type", ""))), None)
    return None if key is None else (key, json.dumps({**task.reference, key: None}, ensure_ascii=False))


def _policy(val):
    """Three samples of each of 5 tasks: gold, one null for a stated value, all null."""
    out = []
    for t in [t for t in val if _null_for_a_stated_value(t)][:5]:
        _, null = _null_for_a_stated_value(t)
        out += [(t, json.dumps(t.reference, ensure_ascii=False)), (t, null),
                (t, json.dumps({k: None for k in t.reference}))]
    return out


@pytest.fixture(scope="module")
def cal(val):
    rubric = derive_rubric(val)
    return calibrate(rubric, RubricScorer(rubric), calibration_set(val, policy=_policy(val)),
                     min_margin=NO_POLICY.min_margin)


def test_hiding_the_reference_removes_the_null_price_and_keeps_the_true_metric(val, cal):
    """A null for a stated value: with the reference missed_values charges it, without one nothing does."""
    task = next(t for t in val if _null_for_a_stated_value(t))
    key, answer = _null_for_a_stated_value(task)
    scorer = RubricScorer(derive_rubric(val))
    [(hidden, _)] = hide_references(calibration_set([task])[:1])
    assert hidden.reference is None and task.reference is not None  # a copy: the task itself keeps its gold
    referenced, free = scorer.score(task, answer), scorer.score(hidden, answer)
    price = 2.0 + 3.0 / len(task.properties)  # missed_values: per + type_share / N
    assert referenced.component("missed_values").score == pytest.approx(price)
    assert key in referenced.component("missed_values").reason
    assert free.component("missed_values").score == 0.0
    # Below gold by the judge's full credit for that field plus the penalty, or by its half credit alone.
    gold = json.dumps(task.reference, ensure_ascii=False)
    share = 2.0 * 3.0 / len(task.properties)  # the faithfulness weight x range / fields
    margin_ref = scorer.score(task, gold).total - referenced.total
    margin_free = scorer.score(hidden, gold).total - free.total
    assert margin_ref == pytest.approx(share + price) and margin_free == pytest.approx(share / 2)
    # In the report: the same price, measured over the calibration set.
    rep, lf = cal.report, cal.report["label_free"]
    assert lf["components"]["missed_values"]["varies"] is False and not lf["components"]["missed_values"]["separates"]
    assert rep["components"]["missed_values"]["varies"] is True
    assert lf["economics"]["cost"]["null_for_present"] < rep["economics"]["cost"]["null_for_present"]
    assert lf["probes"]["null_for_present"]["mean_margin"] < rep["probes"]["null_for_present"]["mean_margin"]


def test_the_label_free_block_holds_every_figure_next_to_the_referenced_ones(cal):
    rep, lf = cal.report, cal.report["label_free"]
    for key in FIGURES:
        assert lf[key] is not None and set(lf[key]) == set(rep[key]), key
    assert set(lf["probes"]) == set(rep["probes"])
    assert lf["reward"]["n_pairs"] == rep["reward"]["n_pairs"]
    # Gold answers and the reference-independent probes score as before; where a reference matters they differ.
    for mode in ("chatter_before_json", "code_fence", "repeated_text"):
        assert lf["probes"][mode]["mean_margin"] == rep["probes"][mode]["mean_margin"], mode
    assert lf["reward"]["spearman_accuracy"] != rep["reward"]["spearman_accuracy"]
    # The on-policy samples too: the true metric still reads the references (the all-null answers are wrong).
    assert lf["on_policy"]["n_samples"] == rep["on_policy"]["n_samples"] == 15
    assert lf["on_policy"]["mean_accuracy"] == rep["on_policy"]["mean_accuracy"]
    assert lf["on_policy"]["pairwise_accuracy"] is not None and lf["on_policy"]["spearman_accuracy"] is not None
    assert lf["on_policy"]["mean_reward"] > rep["on_policy"]["mean_reward"]  # nulls cost less without gold
    assert lf["seconds"] >= 0 and lf["judge_calls_per_response"] == rep["judge_calls_per_response"]


def _swapped(report: dict) -> dict:
    """The report with its referenced and label-free figures exchanged."""
    free = report["label_free"]
    return {**report, **{k: free[k] for k in FIGURES},
            "label_free": {**free, **{k: report[k] for k in FIGURES}}}


def test_gate_on_label_free_applies_the_bars_to_the_label_free_figures(cal):
    rep = cal.report
    bars = {on: NO_POLICY.model_copy(update={"gate_on": on}) for on in ("referenced", "label_free", "both")}
    assert RubricParams().gate_on == "referenced"
    referenced = gate_failures(rep, bars["referenced"])
    free = gate_failures(rep, bars["label_free"])
    assert referenced == []  # the referenced figures pass on the generated data
    assert free and all(f.startswith("label-free ") for f in free)
    assert sorted(gate_failures(rep, bars["both"])) == sorted(referenced + free)
    # Each label-free failure is the referenced bar applied to the label-free figures: exchange the two sets and
    # the referenced gate names the same problems, without the label-free prefix.
    swapped = _swapped(rep)
    assert gate_failures(swapped, bars["label_free"]) == []
    names = {f.split(":")[0] for f in gate_failures(swapped, bars["referenced"])}
    assert names == {f.removeprefix("label-free ").split(":")[0] for f in free}
    with pytest.raises(GateError, match="label-free"):
        check_gate(rep, bars["label_free"])


def test_gate_on_label_free_fails_when_the_bars_are_missed_only_without_references():
    """A synthetic report: referenced figures pass, the label-free ones miss every bar."""
    good = {"probes": {"distractor_value": {"pass": True, "worst_margin": 0.6, "share_below_gold": 1.0}},
            "reward": {"spearman_accuracy": 0.63},
            "economics": {"null_vs_distractor": {"n": 4, "worst_gap": 0.25, "share_null_dearer": 1.0},
                          "omission_vs_null": {"n": 4, "worst_gap": 0.0, "share_omission_cheaper": 0.0},
                          "all_null_vs_partial": {"n": 4, "worst_lead": 2.5}},
            "on_policy": {"spearman_accuracy": 0.8, "pairwise_accuracy": 0.9, "n_samples": 8, "n_pairs": 6}}
    bad = {"probes": {"distractor_value": {"pass": False, "worst_margin": 0.0, "share_below_gold": 0.27}},
           "reward": {"spearman_accuracy": 0.41},
           "economics": {"null_vs_distractor": {"n": 4, "worst_gap": 0.0, "share_null_dearer": 0.75},
                         "omission_vs_null": {"n": 4, "worst_gap": -1.0, "share_omission_cheaper": 0.25},
                         "all_null_vs_partial": {"n": 4, "worst_lead": 0.1}},
           "on_policy": {"spearman_accuracy": 0.3, "pairwise_accuracy": 0.5, "n_samples": 8, "n_pairs": 6}}
    report = {**good, "min_margin": 0.4, "label_free": bad}
    bars = RubricParams(policy_samples=2)
    assert gate_failures(report, bars) == []
    fails = gate_failures(report, bars.model_copy(update={"gate_on": "label_free"}))
    assert [f.split(":")[0] for f in fails] == [
        "label-free probe 'distractor_value'", "label-free metric 'spearman_accuracy'", "label-free economics",
        "label-free economics", "label-free economics", "label-free on-policy 'spearman_accuracy'",
        "label-free on-policy 'pairwise_accuracy'"]
    assert "leaving out the field of a stated value costs less than a null for it on 25% of tasks" in fails[3]
    assert all("with the references hidden" in f for f in fails)
    assert gate_failures({**report, "label_free": good}, bars.model_copy(update={"gate_on": "label_free"})) == []
    # A report written before the label-free calibration: the gate cannot check it, and says so.
    old = {k: v for k, v in report.items() if k != "label_free"}
    assert gate_failures(old, bars) == []
    [missing] = gate_failures(old, bars.model_copy(update={"gate_on": "both"}))
    assert missing.startswith("label-free: the report has no label-free calibration")


def test_the_label_free_line_in_the_report_the_json_and_the_stage_metrics(val, cal, tmp_path):
    params = Params(rubric={"policy_samples": 0, "gate_on": "both"})
    metrics = write_outputs(tmp_path, derive_rubric(val), cal, params, [])
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["gate_on"] == "both" and report["label_free"]["probes"] == cal.report["label_free"]["probes"]
    assert report["gate_failures"] and any(f.startswith("label-free ") for f in report["gate_failures"])
    lf = report["label_free"]
    assert metrics["label_free_spearman_accuracy"] == lf["reward"]["spearman_accuracy"]
    assert metrics["label_free_probes_failed"] == sum(not p["pass"] for p in lf["probes"].values())
    assert metrics["label_free_policy_pairwise_accuracy"] == lf["on_policy"]["pairwise_accuracy"]
    assert metrics["gate_passed"] == 0
    RubricResult(**metrics)  # the stage's metrics file (logged to MLflow) carries them
    md = (tmp_path / "report.md").read_text()
    assert "## Without references (label-free)" in md and "rubric.gate_on: both" in md
    assert f"| Spearman reward vs strict field accuracy (corruption set) | {report['reward']['spearman_accuracy']:.4f} | " \
           f"{lf['reward']['spearman_accuracy']:.4f} |" in md
    assert "`missed_values` (constant)" in md
    ovn = report["economics"]["omission_vs_null"]
    assert f"- left-out field vs its null on {ovn['n']} tasks: worst gap {ovn['worst_gap']}" in md
    assert "| left-out field vs its null: worst gap (share omission cheaper) | 1.0 (0.0) | 1.0 (0.0) |" in md
    assert f"| omitted_for_present | {report['economics']['cost']['omitted_for_present']:.3f} |" in md
    assert "- FAIL: label-free " in md
    # A report without the block (written before it existed) still renders.
    old = {k: v for k, v in report.items() if k not in ("label_free", "gate_on")}
    assert "label-free" not in markdown(old, [])
