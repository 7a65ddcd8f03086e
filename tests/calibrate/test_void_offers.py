"""Offers that are no offers (issue 45): a hedged, conditional, counterfactual, retracted or policy-quoting reply
fails the reward's owed-remedy items and the checklist's "offers the ..." entry, on every generated scenario that
owes a remedy, in both languages; and the readings that must not void an offer ("you may choose", "if you
prefer", "we will refund as quickly as possible") leave it standing."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from rubricrl.calibrate.reply_corruptions import MODES
from rubricrl.core.taskfile import Task
from rubricrl.data.replies import generate_replies
from rubricrl.metrics.checklist import check
from rubricrl.reward.items import check_item
from rubricrl.reward.load import load_rubric
from rubricrl.reward.scoring import RubricScorer

VOID = ("hedged", "conditional", "counterfactual", "retracted", "quoted_policy")


@pytest.fixture(scope="module")
def tasks():
    out = generate_replies(seed=0, n_train=200, n_test=60)
    return out["train"] + out["test"]


def _owed_items(task: Task):
    """The items that ask for a remedy the policy owes: offered, by its words (not an amount)."""
    return [i for i in task.items if i.check and i.check["kind"] == "states" and i.check.get("polarity") == "offered"
            and "text" in i.check]


@pytest.mark.parametrize("mode", VOID)
def test_a_void_offer_fails_the_owed_remedy_items_and_the_checklist_on_every_scenario(tasks, mode):
    scorer, seen = RubricScorer(load_rubric("free_text")), Counter()
    for task in tasks:
        if not task.meta["checklist"]["owed"]:
            continue
        reply = MODES[mode](task, random.Random(f"0:{task.id}:{mode}"))
        assert reply is not None and reply != task.reference, (mode, task.id)
        items = _owed_items(task)
        assert items, task.id
        for item in items:
            verdict = check_item(item, reply, task.text)
            assert verdict.passed is False, (mode, task.id, item.id, verdict.reason, reply)
            assert check_item(item, task.reference, task.text).passed, (task.id, item.id)
        sheet = check(task, reply)
        missed = [e for e in sheet.failed if e.startswith("offers the")]
        assert missed, (mode, task.id, sheet.failed, reply)
        assert not check(task, task.reference).failed
        assert scorer.score(task, reply).total <= scorer.score(task, task.reference).total - 0.4
        seen[(task.meta["domain"], task.meta["lang"])] += 1
    owing = {(t.meta["domain"], t.meta["lang"]) for t in tasks if t.meta["checklist"]["owed"]}
    assert set(seen) == owing and len(owing) == 10  # 5 scenarios x 2 languages


@pytest.mark.parametrize("reply, lang", [
    ("You may choose a refund of 45.00 EUR or a free replacement.", "en"),
    ("If you prefer, we will refund the 45.00 EUR instead of sending a replacement.", "en"),
    ("We will refund 45.00 EUR as quickly as possible.", "en"),
    ("Once the item is back, we refund the 45.00 EUR.", "en"),
    ("我们会尽可能快地为您退款45元。", "zh"),
    ("如您需要，我们可以为您办理退款45元。", "zh"),
])
def test_a_plain_offer_stands(reply, lang):
    from rubricrl.metrics.claims import read
    from rubricrl.reward.prose import clauses

    assert all(c.void is None for c in clauses(reply)), [(c.text, c.void) for c in clauses(reply)]
    assert "refund" in {r for s in read(reply) for r in s.offered}


@pytest.mark.parametrize("reply, why", [
    ("We may be able to refund 45.00 EUR.", "hedged"),
    ("It might be possible to refund 45.00 EUR.", "hedged"),
    ("We will try to refund 45.00 EUR.", "hedged"),
    ("If the manager agrees, we will refund 45.00 EUR.", "conditional"),
    ("Provided that you send a photo, we will refund 45.00 EUR.", "conditional"),
    ("We would have refunded 45.00 EUR if you had written sooner.", "counterfactual"),
    ("Our policy says customers in your case get a refund of 45.00 EUR.", "quoted"),
    ("我们也许可以为您退款45元。", "hedged"),
    ("如果经理同意，我们会为您退款45元。", "conditional"),
    ("本来我们可以为您退款45元。", "counterfactual"),
    ("根据规定，损坏的商品可以退款45元。", "quoted"),
])
def test_a_void_offer_is_read_as_void_by_both(reply, why):
    from rubricrl.metrics.claims import read
    from rubricrl.reward.prose import clauses

    assert {c.void for c in clauses(reply)} - {None} == {why}, [(c.text, c.void) for c in clauses(reply)]
    assert not any(s.offered for s in read(reply))


def test_a_later_retraction_voids_the_offers_before_it():
    from rubricrl.metrics.claims import read
    from rubricrl.reward.prose import clauses

    for reply in ("We will refund 45.00 EUR. On second thought, this does not qualify.",
                  "我们会为您退款45元。更正：再次核实后，以上内容不作数。"):
        assert clauses(reply)[0].void == "retracted"
        assert not any(s.offered for s in read(reply)) and "refund" in read(reply)[0].mooted
