"""Hack probes with margins, the price of a missed field, and calibration on the policy's own samples."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import pytest

from rubricrl.config import Params, RubricParams
from rubricrl.data.generate import generate_dataset
from rubricrl.metrics.strict import strict_counts
from rubricrl.reward.grounding import extract_numbers, parse_number
from rubricrl.inference.models import build_tiny_model
from rubricrl.calibrate.calibrate import CalItem, calibrate, calibration_set, on_policy_metrics
from rubricrl.calibrate.corruptions import MODES, corrupt
from rubricrl.core.taskfile import load_tasks
from rubricrl.reward.judges.grounded import GroundedJudge
from rubricrl.calibrate.draft import derive_rubric
from rubricrl.calibrate.gate import WRONG_ANSWERS, GateError, check_gate, gate_failures
from rubricrl.reward.scoring import RubricScorer
from rubricrl.reward.spec import Rubric
from rubricrl.calibrate.workflow import run_calibration

NEW_PROBES = ("all_null", "null_uncertain", "distractor_value", "scaled_unit", "copy_source", "shortened_value",
              "hedged_value", "omitted_for_present", "misformatted_number", "all_null_but_one")
HAND_TASKS = Path(__file__).resolve().parents[1] / "reward" / "data" / "hand_tasks.jsonl"
NO_POLICY = RubricParams(policy_samples=0)


@pytest.fixture(scope="module")
def val():
    return generate_dataset(seed=0, n_train=300, n_test=40)["train"][:40]


@pytest.fixture(scope="module")
def shipped(val):
    rubric = derive_rubric(val)
    return rubric, calibrate(rubric, RubricScorer(rubric), calibration_set(val), min_margin=NO_POLICY.min_margin)


def _mode(name):
    return next(m for m in MODES if m.name == name)


def _answers(val, name):
    mode = _mode(name)
    out = []
    for t in val:
        r = mode.make(t, random.Random(f"0:{t.id}"))
        if r is not None:
            out.append((t, json.loads(r)))
    return out


@pytest.mark.parametrize("name", NEW_PROBES)
def test_each_new_probe_applies_and_scores_below_gold_by_the_margin(shipped, name):
    row = shipped[1].report["probes"][name]
    assert row["n"] >= 5
    assert row["worst_margin"] >= NO_POLICY.min_margin and row["pass"]


def test_probes_do_what_they_say(val):
    for t, obj in _answers(val, "all_null"):
        assert set(obj) == set(t.reference) and all(v is None for v in obj.values())
    for t, obj in _answers(val, "null_uncertain"):
        nulled = [k for k in obj if obj[k] is None and t.reference[k] is not None]
        kept = [k for k in obj if obj[k] is not None and obj[k] == t.reference[k]]
        assert nulled and kept  # partly right: some nulls, some right values
    for t, obj in _answers(val, "distractor_value"):
        [k] = [k for k in obj if obj[k] != t.reference[k]]
        if isinstance(obj[k], (int, float)):
            assert float(obj[k]) in set(extract_numbers(t.text))  # a number the text states, the wrong one
        else:
            assert obj[k] in t.reference.values()  # another field's value
    for t, obj in _answers(val, "scaled_unit"):
        [k] = [k for k in obj if obj[k] != t.reference[k]]
        assert obj[k] in (pytest.approx(t.reference[k] * 1000), pytest.approx(t.reference[k] / 100))
    for t, obj in _answers(val, "copy_source"):
        [k] = [k for k in obj if obj[k] != t.reference[k]]
        assert len(obj[k]) > len(t.reference[k]) + 10 and obj[k] in t.text
    for t, obj in _answers(val, "shortened_value"):
        [k] = [k for k in obj if obj[k] != t.reference[k]]
        assert len(obj[k]) < len(t.reference[k])
    for t, obj in _answers(val, "hedged_value"):
        [k] = [k for k in obj if obj[k] != t.reference[k]]
        assert any(w in obj[k] for w in ("about", "approximately", "~", "约", "probably", "可能"))
    for t, obj in _answers(val, "misformatted_number"):  # the right number as a string with a unit
        [k] = [k for k in obj if obj[k] != t.reference[k]]
        assert isinstance(obj[k], str) and parse_number(obj[k]) == t.reference[k] and obj[k] != str(t.reference[k])
    # The left-out field is the one null_for_present answers null, so the two prices compare one field; so is the
    # one field all_null_but_one keeps right.
    for t in val:
        made = {m.name: json.loads(r) for m, r in corrupt(t)
                if m.name in ("null_for_present", "omitted_for_present", "all_null_but_one")}
        if "null_for_present" in made:
            [k] = [k for k, v in made["null_for_present"].items() if v is None and t.reference[k] is not None]
            assert made["omitted_for_present"] == {f: v for f, v in t.reference.items() if f != k}
            if "all_null_but_one" in made:
                assert made["all_null_but_one"] == {f: v if f == k else None for f, v in t.reference.items()}
        else:
            assert "omitted_for_present" not in made and "all_null_but_one" not in made


def test_each_probe_is_wrong_by_the_independent_true_metric(val):
    for name in NEW_PROBES:
        for t, obj in _answers(val, name):
            assert not strict_counts(t, json.dumps(obj, ensure_ascii=False)).exact, (name, t.id)


def test_a_large_margin_fails_the_gate_naming_the_close_probes(val):
    rubric = derive_rubric(val)
    cal = calibrate(rubric, RubricScorer(rubric), calibration_set(val), min_margin=5.0)
    close = sorted(m for m, row in cal.report["probes"].items() if row["worst_margin"] < 5.0)
    assert "distractor_value" in close
    with pytest.raises(GateError) as err:
        check_gate(cal.report, RubricParams(policy_samples=0, min_margin=5.0))
    for mode in close:
        assert f"probe '{mode}'" in str(err.value)


def test_abstaining_is_the_dearest_miss_with_the_shipped_prices(shipped):
    econ = shipped[1].report["economics"]
    cost = econ["cost"]
    assert cost["null_for_present"] > max(cost[m] for m in WRONG_ANSWERS)  # 1 above the dearest (9/N + 1)
    assert econ["null_vs_misses"]["distractor_value"]["n"] >= 10
    assert min(row["worst_gap"] for row in econ["null_vs_misses"].values()) >= 0.5
    assert econ["all_null_vs_partial"]["worst_lead"] >= NO_POLICY.min_margin
    assert gate_failures(shipped[1].report, NO_POLICY) == []


def test_leaving_a_field_out_costs_its_null_and_the_missing_key(shipped):
    """Every generated field is required: a left-out stated value costs its null's price plus required_fields' 1,
    with the references and without them."""
    rep = shipped[1].report
    for econ in (rep["economics"], rep["label_free"]["economics"]):
        ovn = econ["omission_vs_null"]
        assert ovn["n"] >= 10 and ovn["worst_gap"] == 1.0 and ovn["share_omission_cheaper"] == 0.0
        assert econ["cost"]["omitted_for_present"] == pytest.approx(econ["cost"]["null_for_present"] + 1.0)
    assert not [f for f in gate_failures(rep, NO_POLICY.model_copy(update={"gate_on": "both"}))
                if "leaving out" in f]


class PresentFieldsOnly(GroundedJudge):
    """The grounded judge as it was: it judged only the fields an answer holds, so a left-out field lost nothing."""

    def judge(self, req):
        if req.parsed is None:
            return super().judge(req)
        task = req.task
        schema = {**task.schema, "properties": {k: v for k, v in task.properties.items() if k in req.parsed}}
        ref = None if task.reference is None else {k: v for k, v in task.reference.items() if k in req.parsed}
        return super().judge(replace(req, task=replace(task, schema=schema, reference=ref)))


def test_an_omission_cheaper_than_a_null_fails_the_gate():
    """On the hand-written tasks (optional nullable fields, small schemas) a judge that skips left-out fields makes
    leaving a stated value out cheaper than its null, with references and without: the gate names both."""
    tasks = load_tasks(HAND_TASKS)
    rubric = derive_rubric(tasks)
    bars = NO_POLICY.model_copy(update={"gate_on": "both"})
    old = calibrate(rubric, RubricScorer(rubric, judges={"grounded": PresentFieldsOnly()}), calibration_set(tasks),
                    min_margin=NO_POLICY.min_margin).report
    for econ in (old["economics"], old["label_free"]["economics"]):
        assert econ["omission_vs_null"]["worst_gap"] < 0 and econ["omission_vs_null"]["share_omission_cheaper"] > 0
    fails = [f for f in gate_failures(old, bars) if "leaving out the field of a stated value costs less" in f]
    assert len(fails) == 2 and fails[0].startswith("economics: ") and fails[1].startswith("label-free economics: ")
    assert "with the references hidden" in fails[1] and "missed_values" in fails[0]
    # The grounded judge judges a left-out field as a null: never cheaper, on every task, either way.
    new = calibrate(rubric, RubricScorer(rubric), calibration_set(tasks), min_margin=NO_POLICY.min_margin).report
    for econ in (new["economics"], new["label_free"]["economics"]):
        assert econ["omission_vs_null"]["n"] == 12  # hand-01 and hand-06 state no nullable value
        assert econ["omission_vs_null"]["worst_gap"] >= 0 and econ["omission_vs_null"]["share_omission_cheaper"] == 0
    assert not [f for f in gate_failures(new, bars) if "leaving out" in f]


def test_the_old_prices_fail_the_economics_gate(val):
    """Without the missed_values price a null costs what a wrong value costs: the abstention the GPU run found."""
    data = derive_rubric(val).model_dump()
    data["penalties"] = [p for p in data["penalties"] if p["id"] != "missed_values"]
    rubric = Rubric.model_validate(data)
    cal = calibrate(rubric, RubricScorer(rubric), calibration_set(val), min_margin=NO_POLICY.min_margin)
    assert cal.report["economics"]["null_vs_misses"]["distractor_value"]["worst_gap"] <= 1e-9
    fails = gate_failures(cal.report, NO_POLICY)
    assert any(f.startswith("economics: a null costs no more than a wrong value the text states ('distractor_value'): "
                            "a null for a stated value on ") for f in fails)


def _policy_items(val, responses_by_task):
    return [CalItem(t, "policy", r, None) for t in val for r in responses_by_task(t)]


def test_on_policy_metrics_follow_the_true_metric(val):
    """Samples of a task ordered gold > one wrong value > all null: the shipped reward orders them alike."""
    def samples(t):
        gold = json.dumps(t.reference, ensure_ascii=False)
        wrong = dict(t.reference)
        key = next(k for k, v in t.reference.items() if isinstance(v, str))
        wrong[key] = "Northwind Trading"
        return [gold, json.dumps(wrong, ensure_ascii=False), json.dumps({k: None for k in t.reference})]

    tasks = [t for t in val if any(isinstance(v, str) for v in t.reference.values())][:10]
    items = _policy_items(tasks, samples)
    rubric = derive_rubric(val)
    totals = [r.total for r in RubricScorer(rubric).score_batch([(it.task, it.response) for it in items])]
    m = on_policy_metrics(items, totals)
    assert m["n_samples"] == 30 and m["n_tasks"] == 10 and m["n_pairs"] == 30
    assert m["pairwise_accuracy"] == 1.0 and m["spearman_accuracy"] > 0.8
    # A reward that prefers abstaining reverses every pair with the all-null answer.
    flipped = [100.0 if json.loads(it.response) == {k: None for k in it.task.reference} else t
               for t, it in zip(totals, items)]
    bad = on_policy_metrics(items, flipped)
    assert bad["pairwise_accuracy"] == pytest.approx(1 / 3, abs=1e-4)
    report = {"probes": {}, "reward": {"spearman_accuracy": 0.9}, "on_policy": bad}
    fails = gate_failures(report, RubricParams())
    assert any("on-policy 'pairwise_accuracy'" in f for f in fails)


def test_the_stage_samples_the_policy_and_the_gate_requires_signal(val, tmp_path):
    """rubric.policy_samples answers per task from a (tiny random) model at the GRPO temperature."""
    model = build_tiny_model(tmp_path / "tiny")
    params = Params(rubric={"policy_samples": 2, "policy_tasks": 3, "sample_engine": "transformers"},
                    grpo={"max_completion_length": 8})
    cal = run_calibration(derive_rubric(val), val[:8], params, policy_model=model)
    pol = cal.report["on_policy"]
    assert pol["n_samples"] == 6 and pol["n_tasks"] == 3
    assert "spearman_accuracy" in cal.report["reward"]  # the corruption-set metrics are reported apart
    # Random tokens are never right, so there is no ordering to check: the gate says so.
    assert pol["n_pairs"] == 0 and pol["pairwise_accuracy"] is None
    fails = gate_failures(cal.report, params.rubric)
    assert any(f.startswith("on-policy 'pairwise_accuracy'") for f in fails)
