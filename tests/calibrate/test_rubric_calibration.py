"""Rubric drafting and calibration: the draft matches the seed, useless criteria go, holes fail the gate."""

import json
from pathlib import Path

import pytest

from rubricrl.config import Params, RubricParams
from rubricrl.data.generate import generate_dataset
from rubricrl.calibrate.calibrate import calibrate, calibration_set
from rubricrl.calibrate.draft import derive_rubric, parse_proposals
from rubricrl.calibrate.gate import GateError, check_gate
from rubricrl.reward.rules import CRITERIA
from rubricrl.reward.scoring import RubricScorer
from rubricrl.reward.spec import Criterion, Rubric
from rubricrl.reward.load import load_rubric
from rubricrl.calibrate.workflow import run_calibration, write_outputs

ROOT = Path(__file__).resolve().parents[2]
SEED_RUBRIC = ROOT / "rubricrl" / "reward" / "rubrics" / "json_extraction.yaml"


@pytest.fixture(scope="module")
def splits():
    return generate_dataset(seed=0, n_train=300, n_test=40)


@pytest.fixture(scope="module")
def val(splits):
    return splits["train"][:20]


def test_schema_derived_draft_for_default_data_matches_the_seed_rubric(splits):
    draft = derive_rubric(splits["train"])
    seed = load_rubric(SEED_RUBRIC)
    got = {c.id: c for c in draft.criteria + draft.penalties}
    for want in seed.criteria:
        c = got[want.id]
        assert (c.kind, c.fn, c.judge, c.range, c.weight, c.params) == (want.kind, want.fn, want.judge, want.range, want.weight, want.params)
    for want in seed.penalties:
        p = got[want.id]
        assert (p.fn, p.per, p.cap) == (want.fn, want.per, want.cap)
    assert draft.max_total == seed.max_total == 15.0
    assert got["missed_values"].per >= got["invented_values"].per  # abstaining is priced like inventing
    extra = set(got) - {c.id for c in seed.criteria + seed.penalties}
    assert extra == {"placeholder_values"}  # from the null-policy constraints of the data
    assert got["placeholder_values"].source.startswith("constraints: ")
    assert all(c.source for c in got.values())  # every component says where it came from
    assert load_rubric_text(draft.to_yaml(), tmp=ROOT / ".pytest_cache") == draft


def load_rubric_text(text, tmp):
    tmp.mkdir(exist_ok=True)
    path = tmp / "draft_roundtrip.yaml"
    path.write_text(text)
    return load_rubric(path)


NO_POLICY = {"policy_samples": 0}  # corruption-set calibration only (the on-policy part has its own tests)


def test_calibration_on_default_data_passes_with_strong_figures(val, tmp_path):
    params = Params(rubric=NO_POLICY)
    rubric = derive_rubric(val)
    cal = run_calibration(rubric, val, params)
    rep = cal.report
    assert rep["reward"]["pairwise_accuracy"] == 1.0
    assert rep["reward"]["spearman_accuracy"] > 0.5 and rep["reward"]["kendall_tau"] > 0.4
    assert all(p["pass"] for p in rep["probes"].values())
    assert min(p["worst_margin"] for p in rep["probes"].values()) >= params.rubric.min_margin
    assert set(rep["probes"]) >= {"missing_field", "wrong_type", "wrong_value", "invented_value", "null_for_present",
                                  "chatter_before_json", "code_fence", "truncated_json", "empty_object", "prose",
                                  "repeated_text", "judge_injection", "all_null", "null_uncertain",
                                  "distractor_value", "scaled_unit", "copy_source", "shortened_value", "hedged_value"}
    assert rep["judge_consistency"]["faithfulness"]["agreement"] == 1.0
    assert rep["dropped"] == []
    metrics = write_outputs(tmp_path, rubric, cal, params, [])
    assert metrics["gate_passed"] == 1
    for name in ("draft.yaml", "rubric.yaml", "report.json", "report.md"):
        assert (tmp_path / name).stat().st_size > 0
    for name in ("separation.png", "reward_vs_accuracy.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"
    assert load_rubric(tmp_path / "rubric.yaml").max_total == 15.0


def test_a_constant_criterion_is_dropped_and_the_reason_written(val):
    CRITERIA["always_two"] = lambda ctx, parsed, crit: (2.0, "always 2")
    try:
        base = derive_rubric(val)
        data = base.model_dump()
        data["criteria"].append(Criterion(id="useless", kind="rule", fn="always_two", description="constant").model_dump())
        rubric = Rubric.model_validate(data)
        cal = calibrate(rubric, RubricScorer(rubric), calibration_set(val))
        assert "useless" in cal.report["dropped"]
        assert "constant score" in cal.report["components"]["useless"]["verdict"]
        assert "useless" not in {c.id for c in cal.rubric.criteria}
        kept = calibrate(rubric, RubricScorer(rubric), calibration_set(val), keep_weak=True)
        assert "useless" in {c.id for c in kept.rubric.criteria} and kept.report["weak_kept"] == ["useless"]
    finally:
        del CRITERIA["always_two"]


def test_a_rubric_with_a_hole_fails_the_gate_naming_the_probe(val):
    data = derive_rubric(val).model_dump()
    data["penalties"] = [p for p in data["penalties"] if p["id"] != "extra_text"]  # the hole
    for c in data["criteria"]:
        if c["id"] == "format":
            c["params"] = {"lenient": True}  # "does some JSON parse": chatter gets full marks
    rubric = Rubric.model_validate(data)
    cal = calibrate(rubric, RubricScorer(rubric), calibration_set(val))
    assert not cal.report["probes"]["chatter_before_json"]["pass"]
    with pytest.raises(GateError) as err:
        check_gate(cal.report, RubricParams(**NO_POLICY))
    msg = str(err.value)
    assert "probe 'chatter_before_json'" in msg and "probe 'code_fence'" in msg
    assert check_gate(cal.report, RubricParams(**NO_POLICY), allow_failures=True)  # the override returns the failures


def test_the_correlation_bar_is_part_of_the_gate(val):
    rubric = derive_rubric(val)
    cal = calibrate(rubric, RubricScorer(rubric), calibration_set(val))
    with pytest.raises(GateError, match="metric 'spearman_accuracy'"):
        check_gate(cal.report, RubricParams(min_spearman=0.99, **NO_POLICY))


def test_malformed_llm_proposals_are_reported_and_skipped():
    good = {"id": "mentions_units", "description": "Units are converted as asked.", "range": [0, 3],
            "decision_rule": "3 if every unit is converted, 0 if none.", "good_example": '{"w": 1200}',
            "bad_example": '{"w": 1.2}'}
    text = json.dumps({"criteria": [
        good,
        {**good, "id": "Bad Id!"},
        {**good, "id": "no_rule", "decision_rule": ""},
        {**good, "id": "bad_range", "range": [3, 0]},
        "not an object",
        {**good},
    ]})
    kept, problems = parse_proposals(text, "openai", "judge-model")
    assert [c.id for c in kept] == ["llm_mentions_units"]
    assert kept[0].source == "llm:judge-model" and kept[0].kind == "judge" and len(kept[0].examples) == 2
    assert len(problems) == 5 and all("skipped" in p for p in problems)
    assert any("criteria[3] (bad_range)" in p and "range" in p for p in problems)
    assert parse_proposals("{oops", "openai", "m") == ([], ["the proposal is not JSON: Expecting property name enclosed in double quotes at column 2"])
