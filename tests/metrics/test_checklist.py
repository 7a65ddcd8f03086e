"""The free-text true metric: each task's checklist, checked by code apart from the reward."""

from __future__ import annotations

import dataclasses

import pytest

from rubricrl.calibrate.reply_corruptions import corrupt_reply
from rubricrl.data.replies import generate_replies
from rubricrl.metrics.checklist import check


@pytest.fixture(scope="module")
def tasks():
    data = generate_replies(seed=5, n_train=80, n_test=40)
    return data["train"] + data["test"]


def test_every_gold_reply_passes_its_whole_checklist(tasks):
    for task in tasks:
        result = check(task, task.reference)
        assert result.strict == 1.0 and result.score == 1.0, (task.id, result.failed)


def test_content_corruptions_fail_the_checklist(tasks):
    failed = {}
    for task in tasks:
        for mode, reply in corrupt_reply(task).items():
            failed.setdefault(mode, []).append(check(task, reply).strict == 0.0)
    for mode in ("drop_essential", "change_amount", "break_policy", "pad_filler", "wrong_language"):
        assert all(failed[mode]), mode
    # A note to the grader leaves the reply's content right: the reward's pitfall item catches it, the metric
    # (which measures the reply, not the grader's view of it) does not.
    assert not any(failed["flatter_judge"])


def _task(tasks, scenario, eligible=True, lang="en"):
    return next(t for t in tasks if scenario in t.id and t.meta["eligible"] == eligible and t.meta["lang"] == lang)


def test_a_refusal_keeps_the_policy_and_a_promise_breaks_it(tasks):
    task = _task(tasks, "change_of_mind", eligible=False)
    gold = task.reference
    assert check(task, gold.replace("can no longer be returned", "cannot be refunded")).strict == 1.0
    broken = check(task, gold + " We will refund you anyway.")
    assert "promises no refund the policy does not allow" in broken.failed
    zh = _task(tasks, "late_delivery", lang="zh")
    assert "promises no refund the policy does not allow" in check(zh, zh.reference + "我们会为您退款。").failed
    assert check(zh, zh.reference).strict == 1.0  # "按政策无法退款" is a refusal


def test_numbers_count_as_written_and_invented_ones_fail(tasks):
    task = _task(tasks, "damaged_item")
    amount = next(f["number"] for f in task.meta["checklist"]["facts"] if "number" in f)
    rounded = task.reference.replace(f"{amount:.2f}", f"about {round(amount)}")
    assert f"states refund amount {amount:g}" in check(task, rounded).failed
    assert "states only numbers the source gives" in check(task, task.reference + " Expect it in 3 days.").failed


def test_a_task_without_a_checklist_is_an_error(tasks):
    bare = dataclasses.replace(tasks[0], meta={})
    with pytest.raises(ValueError, match="no checklist"):
        check(bare, "x")
