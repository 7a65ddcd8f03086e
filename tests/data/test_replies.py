"""The embedded free-text data (customer-service replies): its gold replies earn full marks from their own items and
pass their checklist, every corruption of a gold reply scores below it by the calibration margin on every generated
task, and the hacks of issue 37 (a bag of the facts' tokens, gold negated, the owed remedy refused) score well below
gold on both the reward and the independent checklist, on every kind of task the generator makes."""

from __future__ import annotations

import collections
import json

import pytest

from rubricrl.calibrate.reply_corruptions import MODES, corrupt_reply
from rubricrl.config import RubricParams
from rubricrl.core.taskfile import load_tasks
from rubricrl.data.replies import RESERVED_LAYOUT, SCENARIOS, generate_replies
from rubricrl.metrics.checklist import check
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
    everywhere = ("flatter_judge", "wrong_language", "stuffed", "negated", "word_salad")
    assert {applied[m] for m in everywhere} == {len(data["train"] + data["test"])}
    print({m: round(w, 3) for m, w in worst.items()})


# The margins the hacks of issue 37 must keep below gold on every task: 3 of the reward's 10 points (more than any
# one essential item) and a fifth of the checklist (3 of its 13 entries: issue 45 added two guards, an offer made in
# a mooted way and a note to the grader, so 3 failed entries are 0.23 of it where they were 0.27 of 11).
REWARD_GAP, CHECKLIST_GAP = 3.0, 0.2
HACKS = ("stuffed", "negated", "refusing")


def kind_of(task) -> tuple[str, str, bool]:
    return task.meta["domain"].split("/")[1], task.meta["lang"], task.meta["eligible"]


def test_every_kind_scores_stuffed_negated_and_refusing_replies_well_below_gold_on_reward_and_checklist(data, scorer):
    seen: dict = collections.defaultdict(collections.Counter)
    for task in data["train"] + data["test"]:
        gold, gold_check = scorer.score(task, task.reference).total, check(task, task.reference).score
        assert gold == 10.0 and gold_check == 1.0, task.id
        replies = corrupt_reply(task)
        # Refusing needs a remedy to refuse: every kind but the ineligible damaged item and change of mind.
        assert ("refusing" in replies) == bool(task.meta["checklist"]["owed"]), task.id
        for mode in (*HACKS, "word_salad"):
            if mode not in replies:
                continue
            seen[kind_of(task)][mode] += 1
            reward, listed = scorer.score(task, replies[mode]), check(task, replies[mode])
            assert gold - reward.total >= REWARD_GAP, (mode, task.id, replies[mode], reward.to_dict())
            if mode in HACKS:  # shuffled words keep some claims by chance: the reward's gate is what stops them
                assert gold_check - listed.score >= CHECKLIST_GAP, (mode, task.id, replies[mode], listed.failed)
    kinds = {(s, lang, e) for s in SCENARIOS for lang in ("en", "zh")
             for e in ((True, False) if s in ("damaged_item", "change_of_mind") else (True,))}
    assert set(seen) == kinds  # all 14 kinds the generator makes
    for (scenario, _, eligible), modes in seen.items():
        owes = eligible or scenario not in ("damaged_item", "change_of_mind")
        assert modes["stuffed"] and modes["negated"] and modes["word_salad"] and bool(modes["refusing"]) == owes


def test_gold_with_a_refusal_appended_loses_the_remedy_and_pays_the_pitfall(data, scorer):
    """Issue 37: "We cannot issue a refund" after a gold reply that offers the refund cost 3 points only."""
    for task in data["train"]:
        if "refund" in task.meta["checklist"]["owed"]:
            suffix = "我们无法为您退款。" if task.meta["lang"] == "zh" else " We cannot issue a refund."
            result = scorer.score(task, task.reference + suffix)
            assert result.total <= 10.0 - REWARD_GAP - 1.5, (task.id, result.to_dict())
            assert "offers the refund" in check(task, task.reference + suffix).failed
