"""The hand-written free-text reference set (rubricrl/calibrate/reference.py): what it holds, how a bad scenario
file is named, and the reward and checklist measured on it against the rubric stage's bars."""

from __future__ import annotations

from collections import Counter

import pytest

from rubricrl.calibrate.gate import gate_failures
from rubricrl.calibrate.reference import (FAILURE_KINDS, GOOD, HELDOUT_DIR, _interval, _phi, load_reference,
                                          measure, reference_failures)
from rubricrl.calibrate.section import reference_lines
from rubricrl.config import RubricParams
from rubricrl.core.errors import TaskFileError
from rubricrl.reward.load import load_rubric
from rubricrl.reward.scoring import RubricScorer


@pytest.fixture(scope="module")
def scenarios():
    return load_reference()


@pytest.fixture(scope="module")
def report(scenarios):
    return measure(scenarios, RubricScorer(load_rubric("free_text")), RubricParams().min_margin)


def test_the_set_has_twelve_scenarios_in_both_languages_with_every_failure_kind(scenarios):
    assert len(scenarios) >= 12
    langs = Counter(s.task.meta["lang"] for s in scenarios)
    assert langs["en"] >= 6 and langs["zh"] >= 6
    for s in scenarios:
        kinds = Counter(r.kind for r in s.replies)
        assert kinds[GOOD] >= 3, s.path
        assert "generator" not in s.task.meta["domain"] and s.task.meta["domain"].startswith("reference/")
    seen = Counter(r.kind for s in scenarios for r in s.replies)
    assert set(FAILURE_KINDS) <= set(seen), set(FAILURE_KINDS) - set(seen)
    assert all(seen[k] >= 6 for k in FAILURE_KINDS), seen
    # The scenarios are none of the generator's.
    from rubricrl.data.replies import SCENARIOS
    assert not any(name in s.task.meta["domain"] for s in scenarios for name in SCENARIOS)


def test_the_reward_and_the_checklist_hold_the_rubric_stage_bars(report):
    bars = RubricParams()
    assert report["n_pairs"] >= 12 * 3 * 14
    assert report["good_scored_zero"] == [], report["good_scored_zero"]
    assert report["reward_pair_accuracy"] >= bars.reference_min_reward, report["kinds"]
    assert report["checklist_pair_accuracy"] >= bars.reference_min_checklist, report["kinds"]
    assert reference_failures(report, bars) == []
    assert report["kinds_under_margin"] == [], report["kinds"]  # every failure kind below every good reply by it
    assert set(report["kinds"]) == set(FAILURE_KINDS)


def test_the_gate_fails_below_a_bar_and_names_it(report):
    strict = RubricParams(reference_min_reward=1.0, reference_min_checklist=1.0)
    report = {**report, "reward_pair_accuracy": min(report["reward_pair_accuracy"], 0.99),
              "checklist_pair_accuracy": min(report["checklist_pair_accuracy"], 0.99)}
    fails = reference_failures(report, strict)
    assert any("the reward orders" in f and "rubric.reference_min_reward=1.0" in f for f in fails), fails
    assert any("the checklist orders" in f and "rubric.reference_min_checklist=1.0" in f for f in fails), fails
    close = {**report, "kinds_under_margin": ["grader"],
             "kinds": {**report["kinds"], "grader": {**report["kinds"]["grader"], "under_margin": 2}}}
    assert any("2 pairs of grader score less than rubric.min_margin=" in f
               for f in reference_failures(close, RubricParams())), reference_failures(close, RubricParams())
    zero = {**report, "good_scored_zero": ["t/gold"]}
    assert any("1 good replies score 0 (t/gold)" in f for f in reference_failures(zero, RubricParams()))
    # Through the rubric stage's gate: the reference block is one of its reasons.
    base = {"probes": {}, "reward": {"spearman_accuracy": 0.9}, "reference": report}
    assert [f for f in gate_failures(base, strict) if f.startswith("reference set")] == fails


def test_the_figures_carry_an_interval_over_scenarios(report):
    for metric in ("reward", "checklist"):
        lo, hi = report[f"{metric}_pair_interval"]
        assert 0 <= lo <= report[f"{metric}_pair_accuracy"] <= hi <= 1
    # scenarios are resampled, not pairs: one scenario of four with every pair wrong (0.75 of 40 pairs) spans 0.25
    # to 1, where 40 independent pairs would give about 0.6 to 0.9
    assert _interval([0, 10, 10, 10], [10, 10, 10, 10]) == [0.25, 1.0]
    assert _interval([10, 10], [10, 10]) == [1.0, 1.0] and _interval([], []) is None


def test_the_held_out_scenarios_are_measured_and_reported_but_never_gated():
    held = load_reference(HELDOUT_DIR)
    assert len(held) >= 4 and {s.task.meta["lang"] for s in held} == {"en", "zh"}
    names = {s.task.id for s in held} & {s.task.id for s in load_reference()}
    assert not names, names  # no scenario of the development set
    for s in held:
        assert set(FAILURE_KINDS) <= {r.kind for r in s.replies}, s.path
    out = measure(held, RubricScorer(load_rubric("free_text")), RubricParams().min_margin)
    assert out["n_pairs"] >= 4 * 3 * 16 and out["reward_pair_interval"] and out["checklist_pair_interval"]
    text = "\n".join(reference_lines(out, heldout=True))
    assert "held out" in text and "never gated" in text and str(out["n_pairs"]) in text
    base = {"probes": {}, "reward": {"spearman_accuracy": 0.9}, "reference_heldout": {**out, "good_scored_zero": ["x"],
                                                                                         "reward_pair_accuracy": 0.0}}
    assert not [f for f in gate_failures(base, RubricParams()) if "reference" in f]


def test_phi_is_pearson_of_two_binary_series_and_none_when_one_is_constant():
    assert _phi([True, False, True, False], [True, False, True, False]) == 1.0
    assert _phi([True, False, True, False], [False, True, False, True]) == -1.0
    assert _phi([True, True], [True, False]) is None
    assert _phi([True, False, False, False], [True, True, False, False]) == pytest.approx(0.5774, abs=1e-4)


def _write(folder, text):
    folder.mkdir(exist_ok=True)
    (folder / "s.yaml").write_text(text, encoding="utf-8")
    return folder


GOOD_TASK = """task:
  id: t1
  instruction: Reply to the customer.
  text: "Order A-1 arrived broken. [Policy] Broken items get a refund of 45.00 EUR."
  reference: We are sorry. We will refund 45.00 EUR for order A-1.
  meta:
    lang: en
    domain: reference/x
    checklist: {lang: en, facts: [{what: order, text: A-1}], owed: [refund]}
  items:
    - {id: order, criterion: Names A-1, importance: essential, check: {kind: contains, text: A-1}}
replies:
  - {id: gold, kind: good, text: We are sorry. We will refund 45.00 EUR for order A-1.}
  - {id: h, kind: hedged, text: We are sorry. We may refund 45.00 EUR for order A-1.}
"""


def test_a_bad_scenario_file_is_named_by_file_line_and_key(tmp_path):
    folder = _write(tmp_path / "ok", GOOD_TASK)
    [scenario] = load_reference(folder)
    assert [r.kind for r in scenario.replies] == ["good", "hedged"] and scenario.replies[1].where.endswith("s.yaml:14")
    bad = GOOD_TASK.replace("kind: hedged", "kind: hedgy").replace("check: {kind: contains, text: A-1}",
                                                                  "check: {kind: contains}")
    bad = bad.replace("owed: [refund]", "owed: [money]")
    with pytest.raises(TaskFileError) as err:
        load_reference(_write(tmp_path / "bad", bad))
    problems = err.value.problems
    path = str(tmp_path / "bad" / "s.yaml")
    assert f"{path}:10: items.order.check.text: missing (a contains check needs it)" in problems, problems
    assert any(p.startswith(f"{path}:6: meta.checklist.owed[0]: 'money' is no built-in remedy") for p in problems)
    assert any(p.startswith(f"{path}:14: replies[1].kind: 'hedgy' is not good nor a failure kind") for p in problems)
    no_good = GOOD_TASK.replace("kind: good", "kind: padded")
    with pytest.raises(TaskFileError, match="need at least one good reply and one failure"):
        load_reference(_write(tmp_path / "nogood", no_good))
