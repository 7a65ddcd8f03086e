"""The reward's reading of a reply by sentence and clause (rubricrl/reward/prose.py) and the item checks built on it:
`states` / `not_states` (a fact stated in a prose sentence, its negation and refusal) and the `coherent` gate."""

from __future__ import annotations

import random

import pytest

from rubricrl.core.items import Item, check_problems
from rubricrl.reward.items import check_item
from rubricrl.reward.load import load_rubric
from rubricrl.reward.prose import clauses, coherence, why_not_prose
from rubricrl.reward.scoring import RubricScorer
from tests.reward.test_items import GOLD, ITEMS, free_task

REFUND = ["refund", "refunded"]


def item(check, importance="essential") -> Item:
    return Item("x", "c", importance, check)


@pytest.mark.parametrize("sentence", [
    "We are sorry for the trouble.", "You can choose a refund of the item price, 45.00 EUR, or a replacement.",
    "Thank you for your patience.", "非常抱歉给您带来不便。", "我们可以为您办理全额退款627元，或免费换货，请选择。",
])
def test_real_sentences_are_prose(sentence):
    assert why_not_prose(sentence) is None


@pytest.mark.parametrize("sentence, why", [
    ("A-18504 132.3 replacement sorry Hugo Dubois", "function words"),
    ("Order: A-1042, refund 45.00 EUR", "function words"),
    ("refund refund refund refund the refund for you", "repeated"),
    ("We will refund the price and we will refund the price and we will refund the price.", "a phrase repeated"),
    ("We the refund will for your order.", "before"),
    ("shoes running Because the item Dear", "capitalised"),
    ("订单 A-1 退款 换货 抱歉 您", "a list of words"),
    ("发了的歉更供电您芳换您的订单款", "dictionary words"),
])
def test_token_bags_and_shuffled_words_are_not(sentence, why):
    assert why in (why_not_prose(sentence) or ""), why_not_prose(sentence)


def test_coherence_is_the_share_of_words_in_prose_sentences_of_the_language():
    assert coherence(GOLD, "en").share == 1.0
    assert coherence(GOLD, "zh").share == 0.0  # English prose is no Chinese reply
    words = GOLD.split()
    random.Random(0).shuffle(words)
    assert coherence(" ".join(words), "en").share < 0.5
    assert coherence("A-1042 45.00 refund replacement sorry", "en").share == 0.0


@pytest.mark.parametrize("text, negated", [
    ("We will refund 45.00 EUR.", [False]),
    ("We cannot refund the item.", [True]),
    ("Your order has shipped, so it cannot be refunded, but we are adding a voucher.", [False, True, False]),
    ("We refund 45.00 EUR; the shipping is not refunded.", [False, True]),
    ("We will send a replacement instead of a refund.", [False, True]),
    ("按政策无法退款；我们为您补偿50元优惠券。", [True, False]),
    ("我们无法为您办理全额退款627元，或免费换货。", [True, True]),  # the negation carries over 或
    ("您的订单在30天内且未使用，退回后我们退还商品金额204元，运费15元不退。", [False, False, True]),
])
def test_a_clause_is_the_scope_of_a_negation(text, negated):
    assert [c.negated for c in clauses(text)] == negated, [(c.text, c.negated) for c in clauses(text)]


@pytest.mark.parametrize("check, good, bad", [
    ({"kind": "states", "text": "A-1042"}, "Your kettle from order A-1042 arrived damaged.", "A-1042 refund sorry"),
    ({"kind": "states", "value": 45, "near": REFUND, "polarity": "offered"},
     "We will refund 45.00 EUR to your card.", "We are writing about order 45.00 EUR and a refund."),
    ({"kind": "states", "value": 45, "near": REFUND, "polarity": "offered"},
     "We will refund 45.00 EUR to your card.", "We cannot refund 45.00 EUR to your card."),
    ({"kind": "states", "text": REFUND, "polarity": "offered", "ignore": ["shipping"]},
     "We will refund the item; the shipping is not refunded.", "We will refund the item. Sorry, we cannot refund."),
    ({"kind": "states", "text": REFUND, "polarity": "negated"},
     "Under our policy we cannot offer a refund.", "Under our policy we can offer a refund."),
    ({"kind": "not_states", "text": REFUND, "polarity": "negated", "ignore": ["shipping"]},
     "We will refund 45.00 EUR; the shipping is not refunded.", "We will not refund the item price."),
    ({"kind": "not_states", "text": REFUND, "polarity": "affirmed"},
     "It can no longer be refunded.", "It cannot be replaced. That said, we refund right away."),
    ({"kind": "states", "text": ["退款"], "polarity": "offered"}, "我们可以为您办理全额退款。", "我们无法为您办理全额退款。"),
    ({"kind": "coherent", "language": "en"}, GOLD, "A-1042 45.00 EUR refund replacement sorry"),
    ({"kind": "coherent", "language": "zh"}, "您好，非常抱歉给您带来不便。我们会为您办理退款。", GOLD),
])
def test_meaning_checks_pass_a_good_reply_and_fail_a_bad_one(check, good, bad):
    assert not check_problems(check)
    ok, no = check_item(item(check), good), check_item(item(check), bad)
    assert ok.passed is True and no.passed is False, (ok.reason, no.reason)


@pytest.mark.parametrize("check, problem", [
    ({"kind": "states"}, "exactly one of text, value"),
    ({"kind": "states", "text": "x", "value": 1}, "exactly one of text, value"),
    ({"kind": "states", "text": "x", "polarity": "maybe"}, ".polarity: must be one of any, affirmed, offered"),
    ({"kind": "not_states", "text": "x", "near": "refund"}, ".near: must be a non-empty list"),
    ({"kind": "coherent", "language": "fr"}, ".language: must be one of en, zh"),
    ({"kind": "coherent", "language": "en", "min_share": 1.5}, ".min_share: must be a number in (0, 1]"),
])
def test_meaning_checks_are_validated(check, problem):
    assert any(problem in p for p in check_problems(check)), check_problems(check)


def test_an_incoherent_reply_earns_no_item_credit_and_still_pays_its_pitfalls():
    gate = {"id": "coherent", "criterion": "Answers in sentences", "importance": "important",
            "check": {"kind": "coherent", "language": "en"}}
    scorer, task = RubricScorer(load_rubric("free_text")), free_task(items=[gate, *ITEMS])
    assert scorer.score(task, GOLD).total == 10.0
    stuffed = scorer.score(task, "A-1042 45.00 EUR refund replacement sorry")
    assert stuffed.component("items").score == 0.0 and "no item credit: coherent" in stuffed.component("items").reason
    invented = scorer.score(task, "A-1042 50 EUR refund replacement sorry")  # the invented 50 still costs
    assert invented.total == -3.0, invented.to_dict()
    # Without the gate item the same bag of tokens earns most of the items (what issue 37 found).
    assert scorer.score(free_task(), "A-1042 45.00 EUR refund replacement sorry").total > 5.0
