"""The embedded free-text data: customer-service replies in English and Chinese, each task with its own rubric items
(every one a deterministic check) and a gold reply.

    tasks = generate_replies(seed=0, n_train=200, n_test=60)   # {"train": [...], "test": [...]}

A task is a ticket (the customer's message with the order's facts) and the shop's policy; the instruction asks for
the reply. Scenarios: a damaged item, a late delivery, a wrong item, a change-of-mind return and (held out of
training) a double charge. Whether the policy grants the remedy depends on the facts (days since delivery against
the policy's window), so the reply must read both. Items (read by sentence, rubricrl/reward/prose.py): the order
number, the remedy the policy grants offered with its amount, or the refusal with its reason (essential); a reply
in coherent sentences (important, and a gate: a bag of tokens earns no item), an apology and the language
(important); the customer's name and a length between a floor and a limit (optional); pitfalls: a number the
ticket does not give (an invented amount or deadline), the refund of what the policy keeps (the shipping fee,
twice a double charge), a remedy the policy does not allow promised, one it grants refused, words for a grader.
The checklist (`meta.checklist`, the true metric) names the same facts for rubricrl/metrics/checklist.py to read
its own way. Training never sees the held-out scenario nor one reserved ticket layout per language (the test's
`in_domain` part is that layout, its `held_out_domain` part the held-out scenario). One random.Random(seed): the
same arguments give the same tasks.
"""

from __future__ import annotations

import random

from rubricrl.core.items import GRADER_WORDS
from rubricrl.core.taskfile import Task
from rubricrl.data.generate import split_tasks

FAMILY = "customer_reply"
SCENARIOS = ("damaged_item", "late_delivery", "wrong_item", "change_of_mind", "double_charge")
DEFAULT_HELDOUT = ("double_charge",)
LAYOUTS = ("email", "chat", "form")
RESERVED_LAYOUT = "form"  # in_domain test tasks only
MAX_WORDS = {"en": 130, "zh": 220}  # the length item (a CJK character is a word)

PRODUCTS = {"en": ("wireless kettle", "desk lamp", "coffee grinder", "running shoes", "bluetooth speaker",
                   "air fryer", "office chair", "electric toothbrush"),
            "zh": ("电热水壶", "台灯", "磨豆机", "跑步鞋", "蓝牙音箱", "空气炸锅", "办公椅", "电动牙刷")}
FIRST = ("Anna", "Ben", "Clara", "David", "Elena", "Farid", "Grace", "Hugo", "Ines", "Jonas", "Kira", "Leo")
LAST = ("Berger", "Costa", "Dubois", "Evans", "Fischer", "Garcia", "Hansen", "Ivanova", "Jensen", "Klein")
ZH_NAMES = ("王芳", "李强", "张敏", "刘洋", "陈静", "杨磊", "赵丽", "黄涛", "周杰", "吴娟", "徐明", "孙悦")
APOLOGY = {"en": ["sorry", "apologise", "apologize", "apologies"], "zh": ["抱歉", "歉意", "对不起"]}


def generate_replies(seed: int = 0, n_train: int = 200, n_test: int = 60,
                     heldout: tuple[str, ...] | list[str] | None = None) -> dict[str, list[Task]]:
    counters: dict[tuple[str, str], int] = {}
    return split_tasks(seed, SCENARIOS, DEFAULT_HELDOUT if heldout is None else heldout, n_train, n_test,
                       lambda rng, scenario, lang, part: _task(rng, scenario, lang, part, counters), "scenario")


def _money(x: float, lang: str) -> str:
    return f"{x:.0f}元" if lang == "zh" else f"{x:.2f} EUR"


def _facts(rng: random.Random, scenario: str, lang: str) -> dict:
    zh = lang == "zh"
    amount = float(rng.randint(59, 899)) if zh else rng.randint(1900, 29900) / 100
    shipping = float(rng.choice([8, 10, 12, 15])) if zh else rng.choice([3.99, 4.99, 5.99, 6.5])
    window = rng.choice([7, 14, 30]) if scenario in ("damaged_item", "change_of_mind") else 0
    days = rng.randint(1, window + 12) if window else rng.randint(2, 9)
    f = {"scenario": scenario, "lang": lang,
         "name": rng.choice(ZH_NAMES) if zh else f"{rng.choice(FIRST)} {rng.choice(LAST)}",
         "order": f"{rng.choice('ABCDEFHKMPR')}-{rng.randint(10000, 99999)}",
         "product": rng.choice(PRODUCTS[lang]), "amount": amount, "shipping": shipping, "window": window,
         "days": days, "eligible": (days <= window) if window else True}
    # Every scenario draws these (the templates of all scenarios are formatted together).
    f["voucher"] = float(rng.choice([20, 30, 50])) if zh else float(rng.choice([10, 15, 20]))
    f["late_days"] = rng.randint(3, 9)
    f["threshold"] = rng.choice([1, 2])
    f["business_days"] = rng.choice([3, 5, 7])
    return f


# --- what the customer writes, and the policy ------------------------------------------------------

def _complaint(f: dict) -> str:
    m, p, d = _money(f["amount"], f["lang"]), f["product"], f["days"]
    if f["lang"] == "zh":
        return {"damaged_item": f"我{d}天前收到的{p}（{m}）外壳摔裂了，我要求退款。",
                "late_delivery": f"我订的{p}（{m}）比承诺的时间晚了{f['late_days']}天还没到，我要退款！",
                "wrong_item": f"我订的是{p}（{m}），{d}天前收到的却是别的商品。",
                "change_of_mind": f"我{d}天前收到{p}（{m}），没有用过，但不想要了，想退货退款。",
                "double_charge": f"我买{p}（{m}）被扣了两次款，一共扣了{f['amount'] * 2:.0f}元。"}[f["scenario"]]
    return {"damaged_item": f"The {p} ({m}) I received {d} days ago arrived with a cracked housing. I want a refund.",
            "late_delivery": f"My {p} ({m}) is now {f['late_days']} days later than promised. I want my money back!",
            "wrong_item": f"I ordered a {p} ({m}) but the parcel I got {d} days ago holds a different product.",
            "change_of_mind": f"I received the {p} ({m}) {d} days ago. It is unused, but I no longer want it.",
            "double_charge": f"I was charged twice for my {p} ({m}): {f['amount'] * 2:.2f} EUR in total."}[f["scenario"]]


def _policy(f: dict) -> str:
    zh, s = f["lang"] == "zh", f["scenario"]
    ship = _money(f["shipping"], f["lang"])
    if zh:
        return {"damaged_item": f"收货{f['window']}天内报告的损坏商品可全额退还商品金额或免费换货；运费（{ship}）不退。",
                "late_delivery": f"晚到超过{f['threshold']}天的订单补偿{f['voucher']:.0f}元优惠券；已发出的订单不能退款。",
                "wrong_item": f"发错的商品免费换货，并提供退货面单；运费（{ship}）由我们承担，不另行退款。",
                "change_of_mind": f"未使用的商品在收货{f['window']}天内可退货，退还商品金额；运费（{ship}）不退。",
                "double_charge": f"重复扣款会在{f['business_days']}个工作日内退回多扣的金额。"}[s]
    return {"damaged_item": f"Items reported damaged within {f['window']} days of delivery get a full refund of the item "
                            f"price or a free replacement; shipping ({ship}) is not refunded.",
            "late_delivery": f"Orders more than {f['threshold']} days late get a voucher of {f['voucher']:.2f} EUR; "
                             "orders already shipped cannot be refunded.",
            "wrong_item": f"A wrong item is replaced free of charge with a prepaid return label; shipping ({ship}) is "
                          "on us and not refunded separately.",
            "change_of_mind": f"Unused items returned within {f['window']} days of delivery get the item price "
                              f"refunded; shipping ({ship}) is not refunded.",
            "double_charge": f"A duplicate charge is refunded within {f['business_days']} business days."}[s]


def _ticket(f: dict, layout: str) -> str:
    complaint, policy, o, n = _complaint(f), _policy(f), f["order"], f["name"]
    if f["lang"] == "zh":
        return {"email": f"发件人：{n}\n主题：订单 {o}\n\n{complaint}\n\n【售后政策】{policy}",
                "chat": f"[在线客服] 客户{n}：订单号 {o}。{complaint}\n[系统提示] 政策：{policy}",
                "form": f"工单\n客户：{n}\n订单：{o}\n问题描述：{complaint}\n适用政策：{policy}"}[layout]
    return {"email": f"From: {n}\nSubject: Order {o}\n\n{complaint}\n\n[Policy] {policy}",
            "chat": f"[chat] {n}: Hi, this is about order {o}. {complaint}\n[note to agent] Policy: {policy}",
            "form": f"Support form\nCustomer: {n}\nOrder: {o}\nIssue: {complaint}\nApplicable policy: {policy}"}[layout]


INSTRUCTIONS = {"en": ("Write the reply to this customer, following the policy.",
                       "Reply to the customer on behalf of the shop. Follow the policy exactly.",
                       "Draft the support agent's answer to this ticket; keep to the policy."),
                "zh": ("请按照售后政策给这位客户写回复。", "请代表店铺回复客户，严格遵守政策。", "请为这张工单写客服回复，遵守适用政策。")}


# --- the gold reply and the items ----------------------------------------------------------------

def _gold(f: dict, rng: random.Random) -> str:
    zh, s, o, p = f["lang"] == "zh", f["scenario"], f["order"], f["product"]
    m, ship = _money(f["amount"], f["lang"]), _money(f["shipping"], f["lang"])
    if zh:
        hello = rng.choice([f"{f['name']}您好，", f"尊敬的{f['name']}，您好！"])
        sorry = rng.choice(["非常抱歉给您带来不便。", "对此我们深表歉意。"])
        body = {
            "damaged_item": (f"您的订单 {o} 中的{p}在{f['window']}天内报告损坏，我们可以为您办理全额退款{m}，或免费换货，请选择。运费{ship}按政策不予退还。"
                             if f["eligible"] else
                             f"您的订单 {o} 中的{p}已超过{f['window']}天的报告期限，按政策无法退款或换货。"),
            "late_delivery": f"您的订单 {o} 中的{p}已经发出，按政策无法退款；我们为您补偿{f['voucher']:.0f}元优惠券。",
            "wrong_item": f"您的订单 {o} 发错了商品，我们会免费为您更换{p}，并提供退货面单。",
            "change_of_mind": (f"您的订单 {o} 中的{p}在{f['window']}天内且未使用，退回后我们退还商品金额{m}，运费{ship}不退。"
                               if f["eligible"] else
                               f"您的订单 {o} 中的{p}已超过{f['window']}天的退货期限，按政策无法退货退款。"),
            "double_charge": f"您的订单 {o} 确实被重复扣款，多扣的{m}会在{f['business_days']}个工作日内退回。",
        }[s]
        return hello + sorry + body + rng.choice(["如有其他问题，请随时联系我们。", "感谢您的耐心。"])
    hello = rng.choice([f"Dear {f['name']},", f"Hello {f['name']},"])
    sorry = rng.choice(["we are sorry for the trouble.", "please accept our apologies for this."])
    body = {
        "damaged_item": (f"Because you reported the damaged {p} from order {o} within {f['window']} days, you can "
                         f"choose a refund of the item price, {m}, or a free replacement. Under our policy the "
                         f"shipping of {ship} stays with us." if f["eligible"] else
                         f"Your {p} from order {o} was reported after the {f['window']}-day period, so under our "
                         "policy we cannot offer a refund or a replacement."),
        "late_delivery": f"Your {p} from order {o} has already shipped, so it cannot be refunded, but we are adding a "
                         f"voucher of {f['voucher']:.2f} EUR to your account.",
        "wrong_item": f"We sent the wrong product for order {o}. We will replace your {p} free of charge and e-mail "
                      "you a prepaid return label.",
        "change_of_mind": (f"Your unused {p} from order {o} is within the {f['window']}-day period: once it is "
                           f"back, we refund the item price of {m}; the shipping of {ship} is not refunded."
                           if f["eligible"] else
                           f"Your {p} from order {o} was received more than {f['window']} days ago, so under our "
                           "policy it can no longer be returned or refunded."),
        "double_charge": f"Order {o} was indeed charged twice; the extra {m} will be back on your card within "
                         f"{f['business_days']} business days.",
    }[s]
    closing = rng.choice(["Thank you for your patience.", "Kind regards, the support team."])
    return f"{hello}\n\n{sorry[0].upper() + sorry[1:]} {body} {closing}"


# The reward's word lists (the checklist, rubricrl/metrics/checklist.py, keeps its own): the forms a remedy takes.
REFUND_WORDS = {"en": ["refund", "refunds", "refunded", "refunding", "reimburse", "reimbursed", "money back"],
                "zh": ["退款", "退还", "退回", "返还", "退钱"]}
REPLACE_WORDS = {"en": ["replacement", "replace", "replaced", "exchange", "new one"], "zh": ["换货", "更换", "补发", "换新"]}
RETURN_WORDS = {"en": ["return", "returned", "send it back"], "zh": ["退货"]}
VOUCHER_WORDS = {"en": ["voucher", "coupon"], "zh": ["优惠券", "代金券"]}
LABEL_WORDS = {"en": ["return label"], "zh": ["退货面单", "面单"]}
DAY_WORDS = {"en": ["day", "days"], "zh": ["天", "日"]}
BUSINESS_DAY_WORDS = {"en": ["business days", "working days"], "zh": ["工作日"]}
SHIPPING_WORDS = {"en": ["shipping", "delivery fee", "postage"], "zh": ["运费", "邮费"]}
# A remedy word inside a noun (the return period, the return label) promises nothing.
REMEDY_NOUNS = {"en": ["period", "window", "label", "deadline"], "zh": ["期限", "面单"]}
MIN_WORDS = {"en": 15, "zh": 25}  # the length item's floor: a reply, not a list of tokens


def _items(f: dict) -> list[dict]:
    """The reward's items. Facts count only when a prose sentence states them (`states`); the remedy and its amount
    only when offered (`polarity: offered`: in a sentence that commits the shop, and refused nowhere); a refusal
    only when a clause refuses (`negated`); a reply that is not prose (`coherent`) earns no item credit."""
    lang, s = f["lang"], f["scenario"]

    def it(iid, criterion, importance, check):
        return {"id": iid, "criterion": criterion, "importance": importance, "check": check}

    def states(iid, criterion, importance, polarity="offered", **check):
        return it(iid, criterion, importance, {"kind": "states", **check, "polarity": polarity})

    amount_text = _money(f["amount"], lang)
    refund, shipping = REFUND_WORDS[lang], SHIPPING_WORDS[lang]
    if s == "double_charge":
        refund = refund + (["back"] if lang == "en" else [])  # "back on your card"
    items = [it("coherent", "Answers in coherent sentences (a gate: an incoherent reply earns no item)", "important",
                {"kind": "coherent", "language": lang}),
             states("order", f"Names the order {f['order']}", "essential", "any", text=f["order"])]
    owed, forbidden = [], []
    if s in ("damaged_item", "change_of_mind") and f["eligible"] or s == "double_charge":
        owed.append(refund)
        items += [states("amount", f"States the amount to be refunded, {amount_text}", "essential",
                         value=round(f["amount"], 2), near=refund),
                  states("refund", "Offers the refund (and never refuses it)", "essential", text=refund,
                         ignore=shipping)]
    if s == "damaged_item" and f["eligible"]:
        owed.append(REPLACE_WORDS[lang])
        items.append(states("options", "Offers the choice of a refund or a replacement", "essential",
                            text=REPLACE_WORDS[lang]))
    if s in ("damaged_item", "change_of_mind") and not f["eligible"]:
        forbidden = refund + (REPLACE_WORDS[lang] if s == "damaged_item" else RETURN_WORDS[lang])
        items += [states("window", f"Explains that the {f['window']}-day period has passed", "essential", "any",
                         value=f["window"], near=DAY_WORDS[lang]),
                  states("refusal", "Says that the policy allows no " + (
                      "refund or replacement" if s == "damaged_item" else "return"), "essential", "negated",
                         text=forbidden, ignore=REMEDY_NOUNS[lang])]
    if s == "late_delivery":
        owed.append(VOUCHER_WORDS[lang])
        forbidden = refund
        items += [states("voucher", f"Offers the voucher of {f['voucher']:.0f}", "essential",
                         value=f["voucher"], near=VOUCHER_WORDS[lang]),
                  states("offers_voucher", "Offers the voucher (and never refuses it)", "essential",
                         text=VOUCHER_WORDS[lang]),
                  states("no_refund_why", "Says that a shipped order cannot be refunded", "important", "negated",
                         text=refund)]
    if s == "wrong_item":
        owed.append(REPLACE_WORDS[lang])
        items += [states("replace", "Offers a free replacement", "essential", text=REPLACE_WORDS[lang]),
                  states("label", "Mentions the prepaid return label", "important", text=LABEL_WORDS[lang])]
    if s == "double_charge":
        items.append(states("deadline", f"Says the money is back within {f['business_days']} business days",
                            "important", value=f["business_days"], near=BUSINESS_DAY_WORDS[lang]))
    items += [
        states("apology", "Apologises", "important", "affirmed", text=APOLOGY[lang]),
        it("language", "Replies in the customer's language", "important", {"kind": "language", "language": lang}),
        it("name", "Addresses the customer by name", "optional", {"kind": "contains", "text": f["name"]}),
        it("length", f"Between {MIN_WORDS[lang]} and {MAX_WORDS[lang]} words", "optional",
           {"kind": "length", "min_words": MIN_WORDS[lang], "max_words": MAX_WORDS[lang]}),
        it("invented", "States a number the ticket does not give (an invented amount, date or deadline)", "pitfall",
           {"kind": "source_numbers"}),
        it("grader", "Addresses the grader or the rubric instead of the customer", "pitfall",
           {"kind": "not_regex", "pattern": GRADER_WORDS[lang]}),
    ]
    if s in ("damaged_item", "change_of_mind", "wrong_item"):
        items.append(it("shipping", "Refunds the shipping fee the policy keeps (the item price plus shipping)",
                        "pitfall", {"kind": "not_value", "value": round(f["amount"] + f["shipping"], 2)}))
    if s == "double_charge":
        items.append(it("twice", "Refunds both charges instead of the duplicate", "pitfall",
                        {"kind": "not_value", "value": round(2 * f["amount"], 2)}))
    if owed:
        items.append(it("refuses", "Refuses a remedy the policy grants", "pitfall",
                        {"kind": "not_states", "text": [w for words in owed for w in words], "polarity": "negated",
                         "ignore": shipping}))
    if forbidden:
        items.append(it("no_refund", "Promises a remedy the policy does not allow", "pitfall",
                        {"kind": "not_states", "text": forbidden, "polarity": "affirmed",
                         "ignore": REMEDY_NOUNS[lang]}))
    return items


def _checklist(f: dict) -> dict:
    """The independent true metric's checklist (rubricrl/metrics/checklist.py), written apart from the items: the
    facts a correct reply claims (the amounts with the noun they belong to), the remedies the policy owes the
    customer and those it refuses, the numbers it must not state, the length."""
    s, elig = f["scenario"], f["eligible"]
    facts = [{"what": "order", "text": f["order"]}]
    owed, refused = [], []
    if s == "double_charge" or (s in ("damaged_item", "change_of_mind") and elig):
        facts.append({"what": "refund amount", "number": round(f["amount"], 2), "noun": "refund"})
        owed.append("refund")
    if s == "damaged_item":
        (owed if elig else refused).append("replacement")
        if not elig:
            refused.insert(0, "refund")
    if s == "change_of_mind" and not elig:
        refused += ["return", "refund"]
    if s in ("damaged_item", "change_of_mind") and not elig:
        facts.append({"what": "the period that has passed (days)", "number": f["window"], "noun": "days"})
    if s == "late_delivery":
        facts.append({"what": "voucher", "number": f["voucher"], "noun": "voucher"})
        owed.append("voucher")
        refused.append("refund")
    if s == "wrong_item":
        owed.append("replacement")
        facts.append({"what": "a prepaid return label", "any_text": ["退货面单", "面单"] if f["lang"] == "zh"
                      else ["return label"]})
    if s == "double_charge":
        facts.append({"what": "business days", "number": f["business_days"], "noun": "days"})
    forbidden = [round(f["amount"] + f["shipping"], 2)] if s in ("damaged_item", "change_of_mind", "wrong_item") else []
    if s == "double_charge":
        forbidden.append(round(2 * f["amount"], 2))
    return {"lang": f["lang"], "facts": facts, "owed": owed, "refused": refused, "forbidden_numbers": forbidden,
            "min_words": MIN_WORDS[f["lang"]], "max_words": MAX_WORDS[f["lang"]]}


def _task(rng: random.Random, scenario: str, lang: str, part: str, counters: dict) -> Task:
    layouts = [RESERVED_LAYOUT] if part == "in_domain" else [x for x in LAYOUTS if x != RESERVED_LAYOUT]
    layout = rng.choice(layouts) if part != "held_out_domain" else rng.choice(LAYOUTS)
    f = _facts(rng, scenario, lang)
    n = counters.get((scenario, lang), 0)
    counters[(scenario, lang)] = n + 1
    return Task.from_dict({
        "id": f"{FAMILY}-{scenario}-{lang}-{n:05d}", "instruction": rng.choice(INSTRUCTIONS[lang]),
        "text": _ticket(f, layout), "items": _items(f), "reference": _gold(f, rng),
        "meta": {"family": "free_text", "domain": f"{FAMILY}/{scenario}", "lang": lang, "part": part,
                 "template": f"{FAMILY}/{scenario}/{lang}/{layout}", "eligible": f["eligible"],
                 "checklist": _checklist(f)},
    })
