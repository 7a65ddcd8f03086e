"""Leaving a field out is never cheaper than stating null for it, with or without references (README: rubric
economics), on the rubric stage's calibration tasks and on 14 hand-written tasks (tests/reward/data)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from rubricrl.calibrate.draft import derive_rubric
from rubricrl.config import Params
from rubricrl.core.taskfile import SchemaValidator, load_tasks
from rubricrl.data.prepare import prepare_splits
from rubricrl.reward.load import load_rubric
from rubricrl.reward.scoring import RubricScorer

HAND_TASKS = Path(__file__).resolve().parent / "data" / "hand_tasks.jsonl"


@pytest.fixture(scope="module")
def calibration_tasks():
    """The rubric stage's calibration tasks (the CPU default's first 50 validation tasks) and its draft rubric."""
    params = Params()
    splits = prepare_splits(params.data)
    return splits["val"][: params.rubric.n_calibration], derive_rubric(splits["train"])


@pytest.fixture(scope="module")
def hand_tasks():
    return load_tasks(HAND_TASKS)


def _dump(obj) -> str:
    return json.dumps(obj, ensure_ascii=False)


def _nullable(task, name) -> bool:
    return SchemaValidator(task.schema).at(task.properties[name]).first_error(None) is None


def _prices(scorer, tasks):
    """(task id, field, stated?, required?, price of its null, price of leaving it out) per nullable field, with and
    without references; a price is the gold answer's total minus the answer's total."""
    rows = []
    for task in tasks:
        for shown in (task, replace(task, reference=None)):
            gold = scorer.score(shown, _dump(task.reference)).total
            for name in (k for k in task.properties if _nullable(task, k)):
                null = scorer.score(shown, _dump({**task.reference, name: None})).total
                omit = scorer.score(shown, _dump({k: v for k, v in task.reference.items() if k != name})).total
                rows.append((task.id, shown.reference is not None, name, task.reference[name] is not None,
                             name in task.required, gold - null, gold - omit))
    return rows


def _check(rows):
    cheaper = [r for r in rows if r[6] < r[5] - 1e-9]
    assert not cheaper, f"{len(cheaper)} left-out fields cheaper than their null, first: {cheaper[:3]}"
    for tid, referenced, name, stated, required, null, omit in rows:
        # Exactly a null's price, plus the required_fields point when the schema requires the key.
        assert omit == pytest.approx(null + (1.0 if required else 0.0)), (tid, referenced, name)
        if not stated:
            assert omit >= -1e-9, (tid, referenced, name)  # never above gold, which states the null
    assert {r[1] for r in rows} == {True, False} and {r[3] for r in rows} == {True, False}


def test_leaving_a_field_out_never_beats_its_null_on_the_calibration_tasks(calibration_tasks):
    tasks, drafted = calibration_tasks
    shipped = load_rubric("json_extraction")
    for rubric in (drafted, shipped):
        rows = _prices(RubricScorer(rubric), tasks)
        assert len({r[0] for r in rows}) == len(tasks) == 50
        _check(rows)


def test_leaving_a_field_out_never_beats_its_null_on_the_hand_written_tasks(hand_tasks):
    """Optional nullable fields, two-field schemas, enums, lists, Chinese keys: where the old judge averaged over
    the fields present only, leaving a field out gained its share of the judge's credit."""
    assert len(hand_tasks) == 14
    rows = _prices(RubricScorer(load_rubric("json_extraction")), hand_tasks)
    assert any(not r[4] for r in rows) and any(r[4] for r in rows)  # optional and required fields alike
    _check(rows)


def test_a_left_out_field_is_judged_as_a_null(hand_tasks):
    """The measured case: label-free, the meeting room the text never names, left out, scored 14.0 > 13.5."""
    task = next(t for t in hand_tasks if t.id == "hand-06-meeting")
    scorer = RubricScorer(load_rubric("json_extraction"))
    free = replace(task, reference=None)
    null = scorer.score(free, _dump({"topic": "budget review", "room": None}))
    omit = scorer.score(free, _dump({"topic": "budget review"}))
    assert null.component("faithfulness").score == omit.component("faithfulness").score == 2.25  # (1 + 0.5) / 2
    assert "room: null cannot be verified without a reference (left out: judged as a null)" \
        in omit.component("faithfulness").reason
    assert omit.total == null.total - 1.0  # and required_fields charges the missing key
    # With the reference: a stated value left out is judged and charged as its null.
    book = next(t for t in hand_tasks if t.id == "hand-13-book")  # only the title is required
    answer = {k: v for k, v in book.reference.items() if k != "author"}
    left_out = scorer.score(book, _dump(answer))
    nulled = scorer.score(book, _dump({**answer, "author": None}))
    # Its faithfulness share 6/4, and missed_values' 2 + field_types' share 3/4 (dearer than any wrong value).
    assert left_out.total == nulled.total == 15.0 - 6.0 / 4 - (2.0 + 3.0 / 4)
    assert "author: null although the source gives 'Elena Marsh' (left out" in left_out.component("faithfulness").reason
    assert left_out.component("missed_values").score == 2.75


def test_a_field_the_reference_leaves_out_is_not_judged(hand_tasks):
    """An optional key the reference omits: the gold answer omits it too and keeps full marks."""
    book = next(t for t in hand_tasks if t.id == "hand-13-book")
    partial = {k: v for k, v in book.reference.items() if k != "pages"}
    task = replace(book, reference=partial)
    result = RubricScorer(load_rubric("json_extraction")).score(task, _dump(partial))
    assert result.total == result.max_total == 15.0
    assert result.component("faithfulness").reason == "3/3 fields faithful"
    # An answer with no schema field at all has nothing to judge.
    assert RubricScorer(load_rubric("json_extraction")).score(task, "{}").component("faithfulness").score == 0.0
