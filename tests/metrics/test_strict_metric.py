"""The strict per-field metric: parsing, value equality, per-task counts and micro rates."""

import ast
import json
from pathlib import Path

import numpy as np
import pytest

from rubricrl.metrics import strict
from rubricrl.metrics.strict import (METRICS, StrictCounts, parse_answer, per_task, strict_counts,
                                   summarize, values_equal)
from rubricrl.core.taskfile import Task


# --------------------------------------------------------------------------- independence


def test_imports_nothing_from_the_reward_side():
    tree = ast.parse(Path(strict.__file__).read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module or "")
    forbidden = ("rubricrl.reward", "rubricrl.calibrate", "rubricrl.metrics", "rubricrl.train", "rubricrl.evaluate")
    assert not [m for m in imported if m.startswith(forbidden)], imported
    assert {m for m in imported if m.startswith("rubricrl")} == {"rubricrl.core.taskfile"}


def test_the_metrics_layer_shares_no_code_with_the_reward():
    """Not the strict metric alone: nothing in rubricrl/metrics/ reaches the reward, lazily or through another
    module (the real import closure, as the DVC deps and the layer test read it)."""
    from tools.imports import closure

    root = Path(strict.__file__).resolve().parents[2]
    for module in sorted((root / "rubricrl" / "metrics").glob("*.py")):
        reached = closure(module.relative_to(root), root)
        assert not [f for f in reached if f.startswith(("rubricrl/reward/", "rubricrl/calibrate/"))], (module, reached)


# --------------------------------------------------------------------------- equality

EQUAL = [
    # None
    (None, None),
    # bool
    (True, True),
    (False, False),
    # numbers
    (25, 25),
    (25.0, 25),
    (25, 25.0),
    (0.1 + 0.2, 0.3),
    (1299.0000000001, 1299),
    (10**30, 10**30),
    ("25", 25),
    ("  25 ", 25),
    ("25.0", 25),
    ("-3.5", -3.5),
    ("0.038", 0.038),
    # strings
    ("AirBeat", "AirBeat"),
    ("airbeat pro", "AirBeat Pro"),
    ("  AirBeat \n\t Pro ", "AirBeat Pro"),
    ("ＡｉｒＢｅａｔ", "AirBeat"),  # full-width letters (NFKC)
    ("１２９９.００", "1299.00"),  # full-width digits in a string gold
    ("STRASSE", "Straße"),  # casefold
    ("1299.00", "1299.00"),
    ("3.8%", "3.8%"),
    ("2024-03-05", "2024-03-05"),
    ("09:30", "09:30"),
    ("$25", "$25"),
    # lists
    (["a", "b"], ["a", "b"]),
    (["b", "a"], ["a", "b"]),
    (["A", "b "], ["a", "B"]),
    (["x", "y", "x"], ["x", "x", "y"]),
    ([], []),
    (["25", 3], [25, 3]),
    # dicts
    ({"a": 1, "b": "X"}, {"b": "x", "a": 1}),
    ({"a": [2, 1]}, {"a": [1, 2]}),
    ({}, {}),
]

NOT_EQUAL = [
    # None
    (0, None),
    ("", None),
    ("null", None),
    ([], None),
    (None, 0),
    (None, ""),
    (None, False),
    # bool
    (1, True),
    (0, False),
    (True, 1),
    (False, 0),
    ("true", True),
    (False, True),
    # numbers
    (26, 25),
    (25.001, 25),
    ("$25", 25),
    ("25$", 25),
    ("about 25", 25),
    ("25 kg", 25),
    ("25%", 25),
    ("1,299", 1299),
    ("1 299", 1299),
    ("1e3", 1000),
    ("+25", 25),
    ("25.", 25),
    (".5", 0.5),
    ("２５", 25),  # full-width digits are no JSON number literal
    ("", 25),
    ([25], 25),
    (None, 25),
    # strings
    ("25", "$25"),
    ("$25", "25"),
    ("about 25", "25"),
    ("AirBeat", "AirBeat Pro"),
    ("AirBeat Pro.", "AirBeat Pro"),
    ("Air-Beat", "AirBeat"),
    ("1299.0", "1299.00"),
    ("1299", "1299.00"),
    (1299, "1299.00"),
    (1299.0, "1299.00"),
    (3.8, "3.8%"),
    ("0.038", "3.8%"),
    ("2024-3-5", "2024-03-05"),
    ("9:30", "09:30"),
    (["AirBeat"], "AirBeat"),
    # lists
    (["a"], ["a", "b"]),
    (["a", "b", "c"], ["a", "b"]),
    (["a", "a", "b"], ["a", "b", "b"]),  # duplicates counted
    (["a", "b"], ["a", "a"]),
    ("a, b", ["a", "b"]),
    ({"0": "a"}, ["a"]),
    (["a", "c"], ["a", "b"]),
    # dicts
    ({"a": 1}, {"a": 1, "b": None}),  # missing key != null inside a nested object
    ({"a": 1, "b": 2}, {"a": 1}),
    ({"a": 2}, {"a": 1}),
    ([1], {"a": 1}),
]


@pytest.mark.parametrize("pred,gold", EQUAL)
def test_values_equal(pred, gold):
    assert values_equal(pred, gold) is True


@pytest.mark.parametrize("pred,gold", NOT_EQUAL)
def test_values_not_equal(pred, gold):
    assert values_equal(pred, gold) is False


def test_huge_integers_compare_without_overflow():
    assert values_equal(10**400, 10**400)
    assert not values_equal(10**400 + 1, 10**400)
    assert not values_equal(10**400, 5)


# --------------------------------------------------------------------------- parsing

PARSED = [
    ('{"a": 1}', {"a": 1}),
    ('  \n{"a": 1}\n ', {"a": 1}),
    ('```json\n{"a": 1}\n```', {"a": 1}),
    ('```\n{"a": 1}\n```', {"a": 1}),
    ('```JSON\n{"a": [1, 2]}\n  ```', {"a": [1, 2]}),
    ('Here is the JSON: {"a": 1}', {"a": 1}),
    ('Sure!\n```json\n{"a": 1}\n```\nHope this helps.', {"a": 1}),
    ('{"a": 1} and some trailing words {"b": 2}', {"a": 1}),
    ('Note {not json} then {"a": 2}', {"a": 2}),
    ('{}', {}),
    ('{"a": {"b": null}}', {"a": {"b": None}}),
]

NOT_PARSED = [
    "",
    "   ",
    "I cannot find the product.",
    '{"a": NaN}',
    '{"a": Infinity}',
    '{"a": -Infinity}',
    'Answer: {"a": NaN}',
    '{"a": 1e400}',
    "[1, 2]",
    '[{"a": 1}]',
    '"{\\"a\\": 1}"',
    "42",
    "null",
    '```json\n[{"a": 1}]\n```',
    '{"a": 1, "b": ',
    '{"name": "Lumo", "price": 2',
    '{"a": 1, "b": {"c": 2}, "d": ',  # a truncated object yields none of its nested objects
    "{'a': 1}",
    "[" * 100_000,
]


@pytest.mark.parametrize("text,expected", PARSED)
def test_parse_answer(text, expected):
    assert parse_answer(text) == expected


@pytest.mark.parametrize("text", NOT_PARSED)
def test_not_parsed(text):
    assert parse_answer(text) is None


def test_scan_is_bounded():
    text = "{x " * (strict.MAX_SCAN_STARTS + 1) + '{"a": 1}'
    assert parse_answer(text) is None
    text = "{x " * (strict.MAX_SCAN_STARTS - 1) + '{"a": 1}'
    assert parse_answer(text) == {"a": 1}


# --------------------------------------------------------------------------- counts

SCHEMA = {"type": "object", "required": ["name", "price", "tags", "date"],
          "properties": {"name": {"type": "string"}, "price": {"type": ["number", "null"]},
                         "tags": {"type": ["array", "null"], "items": {"type": "string"}},
                         "date": {"type": ["string", "null"]}}}
GOLD = {"name": "Lumo lamp", "price": 25, "tags": ["red", "small"], "date": None}


def task(reference=GOLD, schema=SCHEMA, task_id="t1"):
    return Task(task_id, "Extract.", "text", schema, (), reference)


def counts(**kw):
    base = dict(fields=4, right=0, present=3, present_right=0, null_for_present=0, absent=1,
                invented=0, parsed=True)
    base.update(kw)
    return StrictCounts(**base)


COUNT_CASES = [
    ("perfect", GOLD, counts(right=4, present_right=3)),
    ("order and case", {"tags": ["Small", "red"], "date": None, "price": "25", "name": "lumo LAMP"},
     counts(right=4, present_right=3)),
    ("missing key is null", {"name": "Lumo lamp", "price": 25, "tags": ["red", "small"]},
     counts(right=4, present_right=3)),
    ("null for present", {"name": "Lumo lamp", "price": None, "tags": None, "date": None},
     counts(right=2, present_right=1, null_for_present=2)),
    ("left out present", {"name": "Lumo lamp", "date": None},
     counts(right=2, present_right=1, null_for_present=2)),
    ("invented", {**GOLD, "date": "2024-03-05"}, counts(right=3, present_right=3, invented=1)),
    ("wrong is not null", {**GOLD, "price": "$25", "name": "Lumo"}, counts(right=2, present_right=1)),
    ("extra keys ignored", {**GOLD, "colour": "red", "note": None}, counts(right=4, present_right=3)),
    ("empty object", {}, counts(right=1, null_for_present=3)),
]


@pytest.mark.parametrize("label,answer,expected", COUNT_CASES, ids=[c[0] for c in COUNT_CASES])
def test_strict_counts(label, answer, expected):
    got = strict_counts(task(), json.dumps(answer))
    assert got == expected
    assert got.exact == (expected.right == expected.fields)


@pytest.mark.parametrize("response", ["no idea", '{"name": "Lumo lamp", "price": 2', "[]", '{"price": NaN}'])
def test_unparsed_counts_neither_abstention_nor_invention(response):
    got = strict_counts(task(), response)
    assert got == counts(parsed=False)
    assert not got.exact


def test_gold_null_answered_null_is_right_and_all_null_gold():
    gold = {"name": None, "price": None}
    schema = {"type": "object", "properties": {"name": {"type": ["string", "null"]},
                                               "price": {"type": ["number", "null"]}}}
    got = strict_counts(task(gold, schema), '{"name": null}')
    assert got == StrictCounts(fields=2, right=2, present=0, present_right=0, null_for_present=0,
                               absent=2, invented=0, parsed=True)
    assert got.exact


def test_reference_missing_a_property_counts_it_as_gold_null():
    got = strict_counts(task({"name": "Lumo lamp", "price": 25, "tags": ["red", "small"]}), json.dumps(GOLD))
    assert got == counts(right=4, present_right=3)


def test_task_without_reference_is_an_error():
    with pytest.raises(ValueError, match="t9"):
        strict_counts(task(None, task_id="t9"), "{}")


def test_generated_gold_answers_score_exact():
    from rubricrl.data.generate import generate_dataset

    splits = generate_dataset(seed=0, n_train=24, n_test=12)
    tasks = splits["train"] + splits["test"]
    for t in tasks:
        for response in (json.dumps(t.reference), json.dumps(t.reference, ensure_ascii=False, indent=2),
                         f"```json\n{json.dumps(t.reference)}\n```"):
            assert strict_counts(t, response).exact, (t.id, response)


# --------------------------------------------------------------------------- rates


def test_summarize_micro_rates():
    rows = [
        StrictCounts(fields=4, right=3, present=3, present_right=2, null_for_present=1, absent=1,
                     invented=0, parsed=True),
        StrictCounts(fields=2, right=2, present=2, present_right=2, null_for_present=0, absent=0,
                     invented=0, parsed=True),
        StrictCounts(fields=4, right=0, present=1, present_right=0, null_for_present=0, absent=3,
                     invented=0, parsed=False),
        StrictCounts(fields=5, right=4, present=3, present_right=3, null_for_present=0, absent=2,
                     invented=1, parsed=True),
    ]
    assert summarize(rows) == {
        "field_accuracy": pytest.approx(9 / 15),
        "present_accuracy": pytest.approx(7 / 9),
        "exact_object_rate": pytest.approx(1 / 4),
        "null_for_present_rate": pytest.approx(1 / 9),
        "invented_rate": pytest.approx(1 / 6),
        "parsed_rate": pytest.approx(3 / 4),
        "n": 4,
    }


def test_summarize_none_when_denominator_is_zero():
    only_present = StrictCounts(fields=2, right=2, present=2, present_right=2, null_for_present=0,
                                absent=0, invented=0, parsed=True)
    out = summarize([only_present])
    assert out["invented_rate"] is None
    assert out["field_accuracy"] == 1.0 and out["exact_object_rate"] == 1.0
    empty = summarize([])
    assert empty["n"] == 0
    assert all(empty[name] is None for name in METRICS)


def test_per_task_numerators_and_denominators():
    rows = [counts(right=4, present_right=3), counts(right=1, null_for_present=3, invented=1),
            counts(parsed=False)]
    num, den = per_task(rows, "field_accuracy")
    np.testing.assert_array_equal(num, [4, 1, 0])
    np.testing.assert_array_equal(den, [4, 4, 4])
    num, den = per_task(rows, "exact_object_rate")
    np.testing.assert_array_equal(num, [1, 0, 0])
    np.testing.assert_array_equal(den, [1, 1, 1])
    num, den = per_task(rows, "invented_rate")
    np.testing.assert_array_equal(num, [0, 1, 0])
    np.testing.assert_array_equal(den, [1, 1, 1])
    assert num.dtype == float and den.dtype == float
    for name in METRICS:  # summarize is the ratio of the per-task sums
        num, den = per_task(rows, name)
        assert summarize(rows)[name] == pytest.approx(num.sum() / den.sum())
    with pytest.raises(ValueError, match="unknown metric"):
        per_task(rows, "f1")
