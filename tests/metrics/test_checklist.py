"""The free-text true metric: each task's checklist, checked by a procedure apart from the reward's (the reply's
claims, sentence by sentence: rubricrl/metrics/claims.py)."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from rubricrl.calibrate.reply_corruptions import corrupt_reply
from rubricrl.core.taskfile import Task
from rubricrl.data.replies import generate_replies
from rubricrl.metrics.checklist import check
from rubricrl.metrics.claims import Amount, read

ROOT = Path(__file__).resolve().parents[2]


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
    for mode in ("drop_essential", "change_amount", "break_policy", "pad_filler", "wrong_language", "stuffed",
                 "negated", "refusing", "word_salad", "hedged", "conditional", "counterfactual", "retracted",
                 "quoted_policy"):
        assert all(failed[mode]), mode
    # A note to the grader: the reply talks to its marker, not its reader (issue 45: the checklist orders it below
    # every good reply too, by its own entry).
    assert all(failed["flatter_judge"])
    for task in tasks:
        assert "speaks to the customer only (no note to a grader)" in check(task, task.reference).passed


def _task(tasks, scenario, eligible=True, lang="en"):
    return next(t for t in tasks if scenario in t.id and t.meta["eligible"] == eligible and t.meta["lang"] == lang)


@pytest.mark.parametrize("text, acts", [
    ("We are sorry for the trouble. You can choose a refund of the item price, 45.00 EUR, or a replacement.",
     ["apology", "offer"]),
    ("Your order has shipped, so it cannot be refunded, but we are adding a voucher of 10.00 EUR.", ["refusal"]),
    ("We are writing about a refund. Thank you for your patience.", ["statement", "statement"]),
    ("非常抱歉给您带来不便。我们可以为您办理全额退款627元，或免费换货。", ["apology", "offer"]),
    ("您的订单已超过14天的退货期限，按政策无法退货退款。", ["refusal"]),
])
def test_each_sentence_gets_its_speech_act(text, acts):
    assert [s.act for s in read(text)] == acts, [(s.text, s.offered, s.refused) for s in read(text)]


def test_remedies_are_offered_or_refused_by_negation_scope():
    [s] = read("Your order has shipped, so it cannot be refunded, but we are adding a voucher of 10.00 EUR.")
    assert s.refused == {"refund"} and s.offered == {"voucher"}
    [s] = read("We will not replace your kettle and e-mail you a prepaid return label.")
    assert s.refused == {"replacement"} and not s.offered  # the label is a thing, and inside the scope
    [s] = read("A refund is not possible for this order.")  # the 3 words before a negator are in its scope
    assert s.refused == {"refund"}
    [s] = read("We will send a replacement instead of a refund.")
    assert s.offered == {"replacement"} and s.refused == {"refund"}
    [s] = read("Once it is back, we refund the item price; the shipping of 6.50 EUR is not refunded.")
    assert s.offered == {"refund"} and not s.refused  # the shipping's refund is not the item's
    [s] = read("我们无法为您办理全额退款627元，或免费换货。")
    assert s.refused == {"refund", "replacement"}  # 或 carries the negation over
    [s] = read("We are writing about a refund and a replacement.")
    assert s.affirmed == {"refund", "replacement"} and not s.offered  # named, not offered


def test_amounts_attach_to_their_noun():
    [s] = read("You can choose a refund of the item price, 122.33 EUR, or a free replacement within 14 days.")
    assert s.amounts == [Amount(122.33, "refund", False), Amount(14.0, "days", False)]
    [s] = read("Under our policy the shipping of 4.99 EUR stays with us.")
    assert s.amounts == [Amount(4.99, "shipping", False)]
    [s] = read("您的订单 R-49423 确实被重复扣款，多扣的734元会在3个工作日内退回。")
    assert s.amounts == [Amount(734.0, "refund", False), Amount(3.0, "days", False)]  # R-49423 is no amount
    [s] = read("我们为您补偿50元优惠券。")
    assert s.amounts == [Amount(50.0, "voucher", False)]


TICKETS = {"the train tickets": ["train tickets", "travel costs"]}
DEPOSIT = {"the remaining deposit": ["released", "remaining deposit"], "the full deposit": ["full deposit"]}
HINGES = {"the hinges": ["hinges", "missing part"], "a reduction": ["reduction"]}


def test_what_a_remedy_word_is_about_follows_the_sentence():
    # a pronoun object: the remedy named before it is refused, not the verb's own remedy
    [s] = read("The train tickets (54.00 EUR) are outside the order, so our policy does not reimburse them.", TICKETS)
    assert s.refused == {"the train tickets"} and "refund" not in s.refused and not s.affirmed
    # a participle after a remedy is its predicate, not its object
    [s] = read("The remaining 1,180.00 EUR will be released to your card; the full deposit cannot be released.",
               DEPOSIT)
    assert s.refused == {"the full deposit"} and s.offered == {"the remaining deposit"}
    # "both off the table" after "are": its own clause only, not the offer in the clause before ", and"
    [s] = read("For a missing part we can supply, we will send the part, and the full refund and the 20% "
               "reduction are both off the table.", HINGES)
    assert s.refused == {"refund", "a reduction"} and s.offered == {"the hinges"}
    [s] = read("I understand you would prefer your money back, but we can't offer either.")
    assert s.refused == {"refund"}  # after a verb, "either" still reaches back over "but"
    # the rule restated, neither given nor refused
    [s] = read("Refunds are only available in the first 30 days.")
    assert not (s.offered | s.refused | s.affirmed)
    # 至于: the topic waits for its sentence's refusal; 不计入退款 says what the refund leaves out
    [s] = read("至于全额退款，餐品已经送到，这个我们这边办不了，请您见谅。")
    assert s.refused == {"refund"} and not s.affirmed
    [_, s] = read("我们会退还1,300元。已使用的月份不折现，这部分不计入退款。")
    assert not s.refused


def test_a_quoted_rule_offers_nothing_whoever_it_names():
    for text in ("The Flexible Saver rate states that cancellations received later are not refunded; instead, the "
                 "guest may move the stay once, free of charge.",
                 "Our policy says that missing parts are sent free of charge, and that a missing part we can supply "
                 "does not entitle the customer to a refund."):
        [s] = read(text, HINGES)
        assert not s.offered, text
    [s] = read("Our policy says a cancelled event is refunded in full, so we will refund your order.")
    assert s.offered == {"refund"}  # our own commitment after the quotation


def test_an_amount_of_money_takes_the_one_money_remedy_of_its_sentence():
    [s] = read("There's nothing you need to do: we're refunding the whole order TK-30952, booking fee included, "
               "which comes to 142.50 EUR.")
    assert Amount(142.5, "refund", False) in s.amounts
    [s] = read("申请 KC-31946 审核通过后，1,980元会在3至5个工作日内原路退回您的支付宝。")
    assert Amount(1980.0, "refund", False) in s.amounts
    [s] = read("192.35 free 14 Hello days, or Because refund choose the replacement.")
    assert Amount(192.35, None, False) in s.amounts  # no currency: no money, no noun


def test_a_checklist_may_allow_a_derived_number(tasks):
    task = tasks[0]
    reply = task.reference + " That was 4 hours and 10 minutes late."
    assert "states only numbers the source gives" in check(task, reply).failed
    sheet = {**task.meta["checklist"], "allowed_numbers": [4, 10]}
    allowed = dataclasses.replace(task, meta={**task.meta, "checklist": sheet})
    assert "states only numbers the source gives" not in check(allowed, reply).failed


def test_a_bag_of_tokens_and_shuffled_words_are_not_prose():
    assert not any(s.prose for s in read("A-18504 132.30 refund replacement sorry Hugo Dubois"))
    assert not any(s.prose for s in read("H-15910 627 退款 换货 抱歉 徐明"))
    assert not read("patience. cannot you already account. be for Jonas Thank adding")[1].prose  # starts lowercase


def test_a_refusal_keeps_the_policy_and_a_promise_breaks_it(tasks):
    task = _task(tasks, "change_of_mind", eligible=False)
    gold = task.reference
    assert check(task, gold.replace("can no longer be returned or refunded", "cannot be returned or refunded")).strict
    broken = check(task, gold + " We will refund you anyway.")
    assert "promises no return or refund the policy does not allow" in broken.failed
    said_nothing = check(task, gold.replace("so under our policy it can no longer be returned or refunded",
                                            "so we have noted your message"))
    assert {"says no to the return", "says no to the refund"} <= set(said_nothing.failed)
    zh = _task(tasks, "late_delivery", lang="zh")
    assert "promises no refund the policy does not allow" in check(zh, zh.reference + "我们会为您退款。").failed
    assert check(zh, zh.reference).strict == 1.0  # "按政策无法退款" is a refusal


def test_an_owed_remedy_refused_fails_twice(tasks):
    task = _task(tasks, "damaged_item")
    result = check(task, task.reference + " We cannot issue a refund.")
    assert {"offers the refund", "refuses no remedy the policy grants"} <= set(result.failed)


def test_numbers_count_as_written_with_their_noun_and_invented_ones_fail(tasks):
    task = _task(tasks, "damaged_item")
    amount = next(f["number"] for f in task.meta["checklist"]["facts"] if "number" in f)
    rounded = task.reference.replace(f"{amount:.2f}", f"about {round(amount)}")
    assert f"states refund amount {amount:g}" in check(task, rounded).failed
    assert "states only numbers the source gives" in check(task, task.reference + " Expect it in 3 days.").failed
    elsewhere = f"Dear customer, we are sorry. Your kettle cost {amount:.2f} EUR and we will look into order it."
    assert f"states refund amount {amount:g}" in check(task, elsewhere).failed  # a price, not a refund


def test_a_checklist_written_by_hand_keeps_its_old_keys():
    task = Task.from_dict({
        "id": "cs1", "instruction": "Reply.", "text": "Order A-1042 (45.00 EUR) is late. Policy: no refunds.",
        "items": [{"id": "x", "criterion": "x", "importance": "essential"}],
        "meta": {"checklist": {"lang": "en", "facts": [{"what": "order", "text": "A-1042"},
                                                       {"what": "a voucher", "any_text": ["voucher"]}],
                               "refund_allowed": False, "max_words": 60}}})
    good = "We are sorry that order A-1042 is late. We cannot refund it, but we will send you a voucher."
    assert check(task, good).strict == 1.0, check(task, good).failed
    bad = check(task, "We are sorry that order A-1042 is late. We will refund 45.00 EUR today.")
    assert set(bad.failed) == {"states a voucher", "promises no refund the policy does not allow"}


def test_a_task_without_a_checklist_is_an_error(tasks):
    bare = dataclasses.replace(tasks[0], meta={})
    with pytest.raises(ValueError, match="no checklist"):
        check(bare, "x")


def _patterns(path: Path) -> set[str]:
    """The regular expressions a module compiles (re / regex .compile, .search, .findall, ...: the first
    argument when it is a string)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id in ("re", "regex")
                and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            found.add(node.args[0].value)
    return found


def test_the_checklist_reads_with_its_own_patterns_not_the_rewards():
    """Independent in method: no regular expression of the reward side is the checklist's (the imports are checked
    by tests/metrics/test_strict_metric.py and tests/test_layers.py)."""
    mine = _patterns(ROOT / "rubricrl/metrics/checklist.py") | _patterns(ROOT / "rubricrl/metrics/claims.py")
    reward = set().union(*(_patterns(p) for p in (ROOT / "rubricrl/reward").rglob("*.py")))
    assert mine and reward and not mine & reward, mine & reward
