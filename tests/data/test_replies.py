"""The embedded free-text data (customer-service replies): its gold replies earn full marks from their own items, and
every corruption of a gold reply scores below it by the calibration margin, on every generated task."""

from __future__ import annotations

import collections
import json

import pytest

from rubricrl.calibrate.reply_corruptions import MODES, corrupt_reply
from rubricrl.config import RubricParams
from rubricrl.core.taskfile import load_tasks
from rubricrl.data.replies import RESERVED_LAYOUT, SCENARIOS, generate_replies
from rubricrl.reward.load import load_rubric
from rubricrl.reward.scoring import RubricScorer


@pytest.fixture(scope="module")
def data():
    return generate_replies(seed=3, n_train=120, n_test=60)


@pytest.fixture(scope="module")
def scorer():
    return RubricScorer(load_rubric("free_text"))


def test_the_same_seed_gives_the_same_tasks_and_the_test_holds_out_a_scenario_and_a_layout(data):
    again = generate_replies(seed=3, n_train=120, n_test=60)
    assert [t.to_dict() for t in again["train"] + again["test"]] == [t.to_dict() for t in data["train"] + data["test"]]
    train, test = data["train"], data["test"]
    parts = collections.Counter(t.meta["part"] for t in test)
    assert parts == {"in_domain": 36, "held_out_domain": 24}
    assert {t.meta["domain"] for t in train} == {f"customer_reply/{s}" for s in SCENARIOS if s != "double_charge"}
    assert {t.meta["domain"] for t in test if t.meta["part"] == "held_out_domain"} == {"customer_reply/double_charge"}
    assert not any(t.meta["template"].endswith(RESERVED_LAYOUT) for t in train)
    assert all(t.meta["template"].endswith(RESERVED_LAYOUT) for t in test if t.meta["part"] == "in_domain")
    assert collections.Counter(t.meta["lang"] for t in train) == {"en": 60, "zh": 60}
    assert {t.meta["eligible"] for t in train} == {True, False}  # the policy grants the remedy or not
    assert len({t.id for t in train + test}) == len(train + test)


def test_every_task_is_valid_in_a_task_file_and_every_item_is_checked(tmp_path, data):
    path = tmp_path / "replies.jsonl"
    tasks = data["train"] + data["test"]
    path.write_text("".join(json.dumps(t.to_dict(), ensure_ascii=False) + "\n" for t in tasks), encoding="utf-8")
    assert load_tasks(path) == tasks
    assert all(i.check is not None for t in tasks for i in t.items)  # the CPU default needs no judge for them
    kinds = collections.Counter(i.importance for t in tasks for i in t.items)
    assert set(kinds) == {"essential", "important", "optional", "pitfall"}


def test_every_gold_reply_scores_full_marks(data, scorer):
    for task in data["train"] + data["test"]:
        result = scorer.score(task, task.reference)
        assert result.total == result.max_total == 10.0, (task.id, result.to_dict())


def test_every_corruption_scores_below_gold_by_the_margin_on_every_task(data, scorer):
    margin = RubricParams().min_margin
    applied, worst = collections.Counter(), {}
    for task in data["train"] + data["test"]:
        gold = scorer.score(task, task.reference).total
        for mode, reply in corrupt_reply(task).items():
            gap = gold - scorer.score(task, reply).total
            applied[mode] += 1
            worst[mode] = min(worst.get(mode, gap), gap)
            assert gap >= margin, (mode, task.id, reply, scorer.score(task, reply).to_dict())
    assert set(applied) == set(MODES)  # every mode applied somewhere
    assert applied["flatter_judge"] == applied["wrong_language"] == len(data["train"] + data["test"])
    print({m: round(w, 3) for m, w in worst.items()})
