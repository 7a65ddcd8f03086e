"""The claims a free-text reply makes, sentence by sentence: what the checklist (rubricrl/metrics/checklist.py)
compares with a task's facts. A procedure of its own, apart from the reward's (rubricrl/reward: clause-level
presence tests with their own word lists): nothing here is imported from it or copied from it.

Per sentence (cut after 。！？!? a line break, or a full stop before a space):
- *prose* or not. English: at least 4 words, a capital first letter, mostly words (not codes and numbers), a
  function word and a finite-verb cue (an auxiliary or modal, a contraction, a past form, a common verb, a subject
  pronoun or "please" followed by a word). Chinese: a run of at least 6 Han characters (a list of words has none),
  a function character (的, 了, 您, 会, ...) and a two-character verb from its list (a shuffled sentence keeps its
  characters and loses its words);
- *negation scope*, NegEx-style. English: a negator (not, no, cannot, unable, ...) covers the words after it up
  to a scope end (; : but, so, however, instead, ...) and the 3 words before it ("a refund is not possible");
  "instead of X" / "rather than X" cover X. Chinese: a negator (无法, 不能, 不予, 不 but not 不便, ...) covers the
  rest of its clause, and the next clause when that one starts with 或 / 和 / 并 (the negation carries over);
- *remedies* (refund, replacement, voucher, return, and a task's own: a repair, a date change, named by its
  checklist's words): a remedy word inside a negation scope is *refused*; outside
  every one it is *affirmed*, and *offered* when a prose sentence commits to it before naming it (a modal or an
  offer verb: will, can, adding, choose, ...; 会, 可以, 为您, 我们, ...; or "we refund"); one that names a thing
  (a return label, 退货期限) or whose object is the shipping fee ("the shipping is not refunded") claims nothing,
  nor does a rule restated ("refunds are only available in the first 30 days"). What a remedy word is about
  follows the sentence: a task's own remedy as its object ("reimburse the train tickets") or as the antecedent of
  its pronoun object ("the train tickets ... our policy does not reimburse them") is what is given or refused; a
  participle after a remedy is its predicate ("the full deposit cannot be released"); "either" after a verb reaches
  back over the sentence ("... but we can't offer either"), "both" after "are" only over its own clause ("X and Y
  are both off the table"). In Chinese a topic opened by 至于 / 关于 takes the first refusal of its sentence, and
  不计入退款 says what a refund leaves out, not that it is refused;
- *amounts*: each number that is not part of an identifier, with the noun it attaches to (the nearest of refund,
  voucher, shipping and days within a few words: "a refund of the item price, 132.30 EUR" is a refund, "within
  5 business days" days; an amount of money no noun claims, the one money remedy its sentence affirms: "we're
  refunding the whole order, ..., which comes to 142.50 EUR", 1,980元会...原路退回) and whether it stands in a
  negation scope;
- *modality*: an offer counts only when it is made outright. A sentence whose offer is hedged (a modal of
  possibility with the shop or the matter as its subject: "we may", "it might", or perhaps, possibly, try to;
  也许, 可能, 尽量), set under a condition the shop imposes (if, unless, provided, as long as; 如果, 只要, 除非,
  ...; followed by what it asks for: a proof, a photo, an approval, a check; "if you prefer" is a choice), counterfactual (a modal followed by "have" and a past
  participle, "had you"; 本来, 本可以), or reported from the policy by no one (the policy or the terms as the
  subject of says / states / allows ..., a rate, warranty or contract too; no one of the shop committing before the
  quotation or in a clause of its own after it; 规定, 条款, 政策 with no first person nor 为您 / 给您) offers nothing: its
  remedies are *mooted*. An offer a later sentence withdraws (on second thought, disregard, withdraw, correction;
  更正, 收回, 请忽略, 不作数) is mooted too;
- the speech act: refusal, offer, apology or statement.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

REMEDIES = ("refund", "replacement", "voucher", "return")

# --- English -----------------------------------------------------------------------------------------------
_TOKEN_EN = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}|[A-Za-z]{1,4}-\d+|\d+(?:,\d{3})*(?:\.\d+)?|[A-Za-z]+(?:['’][A-Za-z]+)?|[;:,]")
_REMEDY_EN = {
    "refund": [("refund",), ("refunds",), ("refunded",), ("refunding",), ("refundable",), ("reimburse",),
               ("reimbursed",),
               ("reimbursement",), ("money", "back"), ("goes", "back"), ("back", "on", "your"), ("back", "to", "your"),
               ("credited", "back")],
    "replacement": [("replacement",), ("replacements",), ("replace",), ("replaced",), ("replacing",), ("exchange",),
                    ("exchanged",), ("new", "one")],
    "voucher": [("voucher",), ("vouchers",), ("coupon",), ("gift", "card"), ("store", "credit")],
    "return": [("return",), ("returned",), ("returning",), ("send", "it", "back")],
}
_THING_EN = frozenset("label labels period window policy request form address deadline process".split())
_SHIPPING_EN = frozenset("shipping postage".split())
_RESTRICTIONS_EN = frozenset("for if within when in to during after before available possible".split())
_CURRENCIES_EN = frozenset("eur euro euros usd dollars gbp pounds chf cny rmb yuan".split())
_NOUNS_EN = {"refund": frozenset("refund refunds refunded refunding reimbursement price amount charge extra "
                                  "duplicate".split()),
             "voucher": frozenset("voucher vouchers coupon".split()),
             "shipping": _SHIPPING_EN, "days": frozenset("day days business working".split())}
_NEGATORS_EN = frozenset("non not no never cannot can't won't don't doesn't didn't isn't aren't wasn't weren't unable "
                         "neither nor without decline declined refuse refused deny denied".split())
_NEGATOR_PAIRS_EN = {("instead", "of"), ("rather", "than"), ("in", "place")}
# Refusals in other words: "off the table", "out of the question", "in no position to", "beyond what we".
_REFUSALS_EN = (("off", "the", "table"), ("out", "of", "the", "question"), ("in", "no", "position"),
                ("not", "in", "a", "position"), ("beyond", "what"), ("outside", "what"), ("not", "something", "we"))
_BOTH_EN = frozenset("either both neither".split())  # "we cannot offer either": the remedies named before it
_COSTS_EN = frozenset("costs cost expenses fee fees charges".split())
_BE_EN = frozenset("is are was were be been".split())
_PREDICATES_EN = frozenset("possible available refundable eligible allowed permitted covered included offered "
                           "granted refunded replaced returned".split())
_SCOPE_ENDS_EN = frozenset("; : but so however although though yet whereas while instead except because since "
                           "which unless when".split())
_AUX_EN = frozenset("is are was were be been am will would can could shall should may might must has have had do "
                    "does did".split())
# Common verbs (their -s, -es, -d, -ed and -ing forms count too): a sentence's finite verb, where no auxiliary shows it.
_VERBS_EN = frozenset("accept apologise apologize arrive ask cost cover charge choose contact deliver deserve expect "
                      "get give go help hold hope include keep know let look make meet need note offer pay process "
                      "receive refund remain replace reply return see send ship stay take thank want wish".split())
_SUBJECTS_EN = frozenset("we i you they he she it please".split())
_FUNCTION_EN = frozenset("the a an of to for in on at with from by and or but we you your our it is are this that "
                         "will can be as".split())
# What makes a remedy named in a sentence an offer: a commitment before it (a modal, an offer verb, eligibility),
# or the shop doing it ("we refund").
_COMMIT_EN = frozenset("will can could may shall going happy offer offering offered issue issuing send sending give "
                       "provide arrange adding add process processing choose receive get entitled eligible".split())
_APOLOGY_EN = frozenset("sorry apologise apologize apologies apology regret".split())

# --- Chinese -----------------------------------------------------------------------------------------------
_REMEDY_ZH = {"refund": ("退款", "退还", "退回", "返还", "退钱", "退给", "退费", "拿回"),
              "replacement": ("换货", "更换", "补发", "换新", "调换", "重新发货"),
              "voucher": ("优惠券", "代金券", "礼券", "购物券", "红包"),
              "return": ("退货",)}
_THING_ZH = ("期限", "面单", "政策", "申请", "地址", "流程", "运费", "费", "手续费")  # 退货期限; 改签费 is a fee
_SHIPPING_ZH = ("运费", "邮费")
_NOUNS_ZH = {"refund": _REMEDY_ZH["refund"] + ("金额", "多扣", "货款", "价款"), "voucher": _REMEDY_ZH["voucher"],
             "shipping": _SHIPPING_ZH}
_DAY_UNITS_ZH = ("个工作日", "工作日", "天", "日", "个月")
_NEGATORS_ZH = ("无法", "不能", "不予", "不会", "不可", "不再", "拒绝", "没有", "没法", "未能", "恕不", "办不了", "办不到",
                "做不到", "超出了", "超出", "不")
# Said after their object, these refuse the whole clause ("全额退款这一块我们办不了"); a clause that only names a
# topic ("换新机这项，...不能提供") takes the next clause's refusal.
_AFTER_OBJECT_ZH = ("办不了", "办不到", "做不到", "超出了", "超出", "不能提供", "无法提供", "不提供", "不支持", "无法办理",
                    "不予办理", "不行")
_TOPIC_ENDS_ZH = ("这项", "这一项", "这一块", "这块", "方面", "的话", "这个")
_NOT_NEGATORS_ZH = ("不便", "不好意思", "不客气", "不过", "不满", "不错", "不少", "不仅", "不同", "不久", "不断",
                    "不计入")  # 不计入退款: what the refund leaves out, not a refusal
_CLAUSE_MARKS_ZH = "，,；;：:"
_CARRY_ZH = ("或者", "或是", "或", "以及", "及", "和", "并且", "并", "也")
_TURNS_ZH = ("但是", "但", "不过", "然而", "所以", "因此")
_SUBORDINATORS_EN = frozenset("as because since although though while when once after if".split())
_VERBS_ZH = ("办理", "提供", "收到", "联系", "感谢", "抱歉", "退款", "退还", "退回", "更换", "换货", "补发", "补偿",
             "超过", "使用", "报告", "发出", "选择", "扣款", "发错", "处理", "安排", "确认", "带来", "深表", "表示",
             "可以", "无法", "不能", "希望", "需要", "已经", "承担", "返还", "赔偿", "发货", "寄回", "退货", "到账",
             "扣了", "收取", "保留", "提交", "告知", "通知", "核实", "检查", "解决", "给您", "为您", "欢迎", "理解")
_FUNCTION_ZH = ("的", "了", "您", "我们", "会", "可以", "在", "为", "请", "已", "将", "按", "和", "或", "与", "对", "给",
                "把", "被", "是", "后")
_COMMIT_ZH = ("会", "可以", "将", "能够", "为您", "给您", "帮您", "办理", "提供", "补偿", "安排", "我们", "予以")
_APOLOGY_ZH = ("抱歉", "歉意", "对不起", "道歉")
_NUMBER = re.compile(r"(?<![A-Za-z0-9.\-])\d+(?:,\d{3})*(?:\.\d+)?")
_ID = re.compile(r"[A-Za-z]{1,4}-\d+")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


@dataclass(frozen=True)
class Amount:
    value: float
    noun: str | None  # refund, voucher, shipping, days, or None
    negated: bool


@dataclass
class Sentence:
    text: str
    words: int
    prose: bool
    offered: set[str] = field(default_factory=set)  # remedies offered (prose sentences only)
    refused: set[str] = field(default_factory=set)  # remedies refused
    affirmed: set[str] = field(default_factory=set)  # remedies named outside a negation scope (prose or not)
    amounts: list[Amount] = field(default_factory=list)
    apology: bool = False
    spans: list[tuple[int, int]] = field(default_factory=list)  # negation scopes, as character offsets
    mooted: set[str] = field(default_factory=set)  # remedies named in a hedged, conditional, ... or withdrawn offer
    withdraws: bool = False  # the sentence takes back what came before it

    @property
    def act(self) -> str:
        return ("refusal" if self.refused else "offer" if self.offered else "apology" if self.apology
                else "statement")

    def negated_at(self, offset: int) -> bool:
        return any(a <= offset < b for a, b in self.spans)


def split_sentences(text: str) -> list[str]:
    out, start = [], 0
    for i, ch in enumerate(text):
        if ch in "。！？!?\n" or (ch == "." and (i + 1 == len(text) or text[i + 1].isspace())):
            if text[start:i + 1].strip():
                out.append(text[start:i + 1].strip())
            start = i + 1
    if text[start:].strip():
        out.append(text[start:].strip())
    return out


def _is_han(c: str) -> bool:
    return "\u3400" <= c <= "\u9fff"


def _chinese(sentence: str) -> bool:
    han = sum(_is_han(c) for c in sentence)
    return han > 0 and 3 * han >= sum(c.isascii() and c.isalpha() for c in sentence)


def read(reply: str, remedies: dict[str, list[str]] | None = None) -> list[Sentence]:
    """The reply's sentences with their claims (module doc). `remedies`: a task's own remedies beyond the built-in
    four, {name: the words that name it} (a checklist's open `owed` / `refused` entries)."""
    text = unicodedata.normalize("NFKC", reply)
    en, zh = _REMEDY_EN, _REMEDY_ZH
    if remedies:
        en = {**_REMEDY_EN, **{name: [tuple(t for t, _, _ in _tokens_en(w)) for w in words]
                               for name, words in remedies.items()}}
        zh = {**_REMEDY_ZH, **{name: tuple(unicodedata.normalize("NFKC", w) for w in words)
                               for name, words in remedies.items()}}
    out = [_read_zh(s, zh) if _chinese(s) else _read_en(s, en) for s in split_sentences(text)]
    last = max((i for i, s in enumerate(out) if s.withdraws), default=0)
    for s in out[:last]:  # a later sentence withdraws these offers
        s.mooted |= s.offered
        s.offered = set()
    return out


# --- modality ----------------------------------------------------------------------------------------------
_POSSIBILITY_EN = frozenset("may might".split())
_SUBJECTS_OF_HEDGE_EN = frozenset("we i it this that there which they".split())
_HEDGE_WORDS_EN = frozenset("perhaps possibly maybe potentially probably".split())
_TRYING_EN = frozenset("try trying attempt attempting hope hoping".split())
_CONDITIONS_EN = frozenset("if unless provided providing assuming".split())
_CHOICE_VERBS_EN = frozenset("prefer wish like want rather choose need".split())
_REPORTERS_EN = frozenset("says say states state allows allow entitles entitle provides provide reads specifies "
                          "stipulates".split())
# What a condition the shop imposes asks for (prefixes): a proof, a photo, an approval, a check.
_ASKED_EN = ("approv", "agree", "confirm", "verif", "review", "manager", "supervisor", "provid", "submit", "upload",
             "photo", "proof", "certificat", "receipt", "invoice", "evidence", "document", "inspect", "assess",
             "eligib", "qualif", "fill", "form")
_RULE_NOUNS_EN = frozenset("policy policies terms rules regulation regulations rate tariff conditions agreement "
                           "contract charter warranty guarantee".split())
_THEN_EN = frozenset("so ; therefore and then".split())  # "our policy says ..., so we will": a commitment of our own
_WITHDRAW_EN = frozenset("disregard withdraw withdrawn retract retracted rescind rescinded revoke revoked "
                         "correction".split())


def _moot_en(low: list[str]) -> bool:
    """The sentence offers nothing outright (module doc: modality)."""
    for i, w in enumerate(low):
        nxt = low[i + 1] if i + 1 < len(low) else ""
        prev = low[i - 1] if i else ""
        if w in _HEDGE_WORDS_EN or (w in _POSSIBILITY_EN and (prev in _SUBJECTS_OF_HEDGE_EN or nxt == "be")):
            return True
        if w in _TRYING_EN and nxt == "to":
            return True
        condition = (w in _CONDITIONS_EN and not (w == "if" and (nxt in ("so", "needed") or any(
            v in _CHOICE_VERBS_EN for v in low[i + 1:i + 5])))) or (w == "long" and prev == "as" and nxt == "as")
        if condition and any(v.startswith(_ASKED_EN) for v in low[i + 1:]):
            return True
        if w == "have" and prev in ("would", "could", "might", "should", "not", "wouldn't", "couldn't") and \
                len(nxt) > 3 and nxt.endswith(("ed", "en", "t")):
            return True
        if w == "had" and nxt == "you":
            return True
        # the policy quoted, and no one of the shop committing before the quotation or in a clause of its own
        # after it ("a missing part we can supply" inside the quotation is still the policy's)
        if w in _REPORTERS_EN and any(n in _RULE_NOUNS_EN for n in low[max(0, i - 6):i]) and not any(
                ((a in ("we", "i") and (b in _AUX_EN | {"'ll"} or b.endswith("n't")))
                 or a in ("we're", "i'm", "we'll", "i'll")) and (k < i or (k and low[k - 1] in _THEN_EN))
                for k, (a, b) in enumerate(zip(low, low[1:]))):
            return True
    return False


def _withdraws_en(low: list[str]) -> bool:
    """The sentence takes back what came before: a word of withdrawal, "on second thought", "after all", "having
    looked (reviewed, checked) ...", "... again" / "further" after a look, "I've just seen", an opening
    "Actually,"."""
    pairs = set(zip(low, low[1:]))
    looked = {"looked", "reviewed", "checked", "rechecked", "checking", "reviewing", "looking"}
    return bool(set(low) & _WITHDRAW_EN) or bool(pairs & {("second", "thought"), ("scratch", "that"),
                                                         ("after", "all"), ("just", "seen"), ("just", "noticed")}) \
        or any(a == "having" and b in looked for a, b in pairs) \
        or any(w in looked and {"again", "further"} & set(low[k + 1:k + 3]) for k, w in enumerate(low)) \
        or (low[:2] == ["actually", ","])


_MOOT_ZH = ("也许", "或许", "大概", "尽量", "争取", "试着", "说不定", "不一定", "未必", "本来", "本可以", "本应",
            "要是早", "如果早")  # hedges and counterfactuals; a condition counts only with what it asks for
_CONDITIONS_ZH = ("如果", "要是", "只要", "前提是", "除非", "倘若", "假如", "条件是", "视情况")
_ASKED_ZH = ("审核", "审批", "同意", "批准", "核实", "确认", "证明", "照片", "截图", "上传", "提供", "提交", "检测", "凭证",
             "发票", "主管", "经理", "评估", "符合")
_CHOICE_ZH = ("如您需要", "如果您需要", "如果您愿意", "如您愿意", "如果您希望", "如您希望", "如有", "如果有任何", "如果您有",
              "如果方便", "如您方便", "如果您选择", "如您选择", "如果您想", "如您想", "如果您要", "如您要")
_RULES_ZH = ("规定", "条款", "政策")
# Someone commits: the shop acting (我们会, 我们为, ...; not 我们的) or the customer's right (您可以).
_FIRST_PERSON_ZH = ("我们会", "我们将", "我们可以", "我们为", "我们给", "我们帮", "我们已", "我们马上", "我们立即",
                    "我们这边", "我会", "我将", "为您", "给您", "帮您", "您可以", "您将")
_WITHDRAW_ZH = ("更正", "收回", "撤回", "请忽略", "不作数", "不算数", "说错了", "复核", "再核对", "再次核实", "再次核对",
                "重新核对", "重新核实", "仔细看了", "又查了", "刚刚又查", "经再次")


def _moot_zh(sentence: str) -> bool:
    rest = sentence
    for c in _CHOICE_ZH:
        rest = rest.replace(c, "")
    if any(m in rest for m in _MOOT_ZH) or (
            any(c in rest for c in _CONDITIONS_ZH) and any(a in rest for a in _ASKED_ZH)):
        return True
    if "可能" in rest.replace("尽可能", "").replace("不可能", ""):
        return True
    return any(r in sentence for r in _RULES_ZH) and not any(f in sentence for f in _FIRST_PERSON_ZH)


# --- English -----------------------------------------------------------------------------------------------

def _tokens_en(text: str) -> list[tuple[str, int, int]]:
    return [(m.group().casefold().replace("’", "'"), m.start(), m.end()) for m in _TOKEN_EN.finditer(text)]


def _read_en(sentence: str, remedies: dict = _REMEDY_EN) -> Sentence:
    toks = _tokens_en(sentence)
    words = [t for t, _, _ in toks if t not in (";", ":", ",")]
    low = [t for t, _, _ in toks]
    alpha = [w for w in words if (w[0].isalpha() and "-" not in w) or _DATE.fullmatch(w)]  # a date reads as a word
    first = next((c for c in sentence if c.isalnum()), "")
    verb = any(w in _AUX_EN or "'" in w or (len(w) > 4 and w.endswith("ed")) or _verb_en(w) or w in _APOLOGY_EN
               for w in words) or any(
        low[i] in _SUBJECTS_EN and low[i + 1][0].isalpha() for i in range(len(low) - 1))
    prose = (len(words) >= 4 and (first.isupper() or first.isdigit()) and verb and len(alpha) >= 0.6 * len(words)
             and any(w in _FUNCTION_EN for w in words))
    out = Sentence(sentence, len(words), prose, apology=any(w in _APOLOGY_EN for w in words),
                   withdraws=_withdraws_en(low))
    negated = _scopes_en(low)
    moot = _moot_en(low)
    for i, (t, a, b) in enumerate(toks):
        if negated[i]:
            out.spans.append((a, b))
    found = [(remedy, i, len(phrase)) for remedy, phrases in remedies.items() for i in range(len(low))
             for phrase in [next((p for p in phrases if tuple(low[i:i + len(p)]) == p), None)] if phrase]
    commits = any(w in _COMMIT_EN or w.endswith("'ll") for w in low)
    # "we can't offer either": what the sentence named before a negated either / both is refused
    either = next((k for k in range(len(low)) if negated[k] and low[k] in _BOTH_EN), len(low))
    # ... but "X and Y are both off the table": after a verb "be", its own clause's subjects only
    since = 0
    if either < len(low) and either and low[either - 1] in _BE_EN:
        since = either
        while since > 0 and low[since - 1] not in _SCOPE_ENDS_EN and not (low[since - 1] == "," and low[since] == "and"):
            since -= 1
    # "As you weren't given a meal voucher, we ...": a fronted reason's negation is a circumstance, not a refusal
    circumstance = low and low[0] in _SUBORDINATORS_EN and "," in low
    reason_ends = low.index(",") if circumstance else 0
    pronouns: list[tuple[str, bool]] = []

    def restricted(k: int) -> bool:
        while k < len(low) and low[k] not in _SCOPE_ENDS_EN:
            if low[k] == "only" and k + 1 < len(low) and low[k + 1] in _RESTRICTIONS_EN:
                return True
            k += 1
        return False

    def after_pronoun(k: int) -> bool:
        return k < len(low) and low[k] in ("them", "it", "those", "these")

    for remedy, i, n in found:
        # "reimburse the train tickets", "release the full deposit": the object, a task's own remedy named within
        # the next 3 words, is what is given or refused, not this word's remedy; and "the joining fee can't be
        # refunded", "travel costs are not reimbursed": so is the subject of a participle.
        if any(other != remedy and other not in _REMEDY_EN and i + n <= j <= i + n + 3 and not low[j].endswith("ed")
               and not set(low[i + n:j]) & {"or", "and", ","} for other, j, _ in found):
            continue  # (a participle after it is its predicate: "the full deposit cannot be released")
        if after_pronoun(i + n) and any(other not in _REMEDY_EN and j < i for other, j, _ in found):
            # "the train tickets ... our policy does not reimburse them": the object is the remedy named before
            for other, j, _ in found:
                if other not in _REMEDY_EN and j < i:
                    pronouns.append((other, negated[i] or (either < len(low) and since <= i < either)))
            continue
        if low[i].endswith(("ed", "able")) and (any(
                other != remedy and other not in _REMEDY_EN and (i - 7 <= j < i or (negated[i] and j < i))
                and not set(low[j:i]) & _SCOPE_ENDS_EN for other, j, _ in found)
                or any(w in _COSTS_EN for w in low[max(0, i - 7):i])):
            continue  # (negated, anywhere before it: "the joining fee ..., as our terms make it non-refundable")
        after = low[i + n] if i + n < len(low) else ""
        if after in _THING_EN or _about_shipping_en(low, i, n):
            continue  # a return label; the shipping is not refunded
        if i < reason_ends:
            continue
        if negated[i] or (either < len(low) and since <= i < either):
            out.refused.add(remedy)
            continue
        if restricted(i + n):
            continue  # "refunds are only available in the first 30 days": the rule, neither given nor refused
        out.affirmed.add(remedy)
        doing = any(low[k] in ("we're", "i'm") and (low[k + 1].endswith("ing") or (
            low[k + 1] == "also" and k + 2 < i and low[k + 2].endswith("ing"))) for k in range(i - 1))
        if prose and (commits or doing or (i and low[i - 1] in ("we", "i", "we're", "i'm"))
                      or (i > 1 and low[i - 2] in ("we", "i") and low[i - 1] in ("are", "am"))
                      or (low[i].endswith("ed") and i and low[i - 1] in ("is", "are", "been", "be"))):
            (out.mooted if moot else out.offered).add(remedy)
    for other, refused in pronouns:
        if refused:
            out.refused.add(other)
            out.affirmed.discard(other)
            out.offered.discard(other)
    # An amount of money no noun claims belongs to the one money remedy the sentence affirms ("we're refunding the
    # whole order, booking fee included, which comes to 142.50 EUR").
    money = [r for r in ("refund", "voucher") if r in out.affirmed]
    for i, (t, a, b) in enumerate(toks):
        if t[0] in ",;:":
            continue
        if t[0].isdigit() and not _DATE.fullmatch(t):
            noun = _attach_en(low, i)
            if noun is None and len(money) == 1 and (
                    (i + 1 < len(low) and low[i + 1] in _CURRENCIES_EN) or (a > 0 and sentence[a - 1] in "€$£")):
                noun = money[0]
            out.amounts.append(Amount(round(float(t.replace(",", "")), 2), noun, negated[i]))
    return out


def _verb_en(word: str) -> bool:
    return any(word == v + end or (end in ("d", "ing") and word == v[:-1] + end and v.endswith("e"))
               for v in _VERBS_EN for end in ("", "s", "es", "d", "ed", "ing"))


def _about_shipping_en(low: list[str], i: int, n: int) -> bool:
    """The remedy's object is the shipping fee: "refund (of) the shipping", or a participle whose subject it is
    ("the shipping of 6.50 EUR is not refunded")."""
    if any(w in _SHIPPING_EN for w in low[i + n:i + n + 3]):
        return True
    if not low[i].endswith("ed"):
        return False
    k = i - 1
    while k >= max(0, i - 7) and low[k] not in _SCOPE_ENDS_EN:
        if low[k] in _SHIPPING_EN:
            return True
        k -= 1
    return False


def _scopes_en(low: list[str]) -> list[bool]:
    """Per token: inside a negation scope. A comma ends one only when it closes a clause the sentence opens with
    (As you weren't given one, we ...); a refusal in other words (off the table, in no position to) covers its
    clause both ways."""
    inside = [False] * len(low)
    fronted = low[0] in _SUBORDINATORS_EN if low else False
    first_comma = next((k for k, t in enumerate(low) if t == ","), len(low))
    for i in range(len(low)):
        phrase = next((r for r in _REFUSALS_EN if tuple(low[i:i + len(r)]) == r), None)
        if phrase:
            a = i  # back to the clause's start: a scope end, or a comma before "and" (a clause of its own)
            while a > 0 and low[a - 1] not in _SCOPE_ENDS_EN and not (low[a - 1] == "," and low[a] == "and"):
                a -= 1
            b = i
            while b < len(low) and low[b] not in _SCOPE_ENDS_EN:
                b += 1
            for k in range(a, b):
                inside[k] = True
    for i, w in enumerate(low):
        pair = (w, low[i + 1]) in _NEGATOR_PAIRS_EN if i + 1 < len(low) else False
        if w not in _NEGATORS_EN and not w.endswith("n't") and not pair:
            continue
        j = i + (2 if pair else 1)
        while j < len(low) and low[j] not in _SCOPE_ENDS_EN and not (fronted and j == first_comma > i):
            inside[j] = True
            j += 1
        # Backwards: the 3 words before it, or the whole clause before a negated predicate ("a refund or a
        # replacement is not possible": its subject is what is refused).
        predicate = (i and low[i - 1] in _BE_EN) or (i + 1 < len(low) and low[i + 1] in _PREDICATES_EN) or (
            i + 2 < len(low) and low[i + 1] == "be")
        k = i - 1
        while not pair and k >= (0 if predicate else max(0, i - 3)) and low[k] not in _SCOPE_ENDS_EN and not (
                fronted and k == first_comma < i):
            inside[k] = True
            k -= 1
    return inside


def _attach_en(low: list[str], at: int) -> str | None:
    """The noun a number attaches to: the nearest of the nouns within 10 words before it or 3 after (punctuation
    does not count as a word; "we're refunding the whole order, booking fee included, which comes to 142.50 EUR")."""
    index = [k for k, t in enumerate(low) if t not in (",", ";", ":")]
    pos = {k: n for n, k in enumerate(index)}
    best: tuple[int, str] | None = None
    for k in index:
        gap = pos[k] - pos.get(at, 0)
        if k == at or not -10 <= gap <= 3:
            continue
        for noun, words in _NOUNS_EN.items():
            if low[k] in words:
                d = abs(gap) * 2 + (1 if gap < 0 else 0)  # a tie goes to the noun after ("5 business days")
                if best is None or d < best[0]:
                    best = (d, noun)
    return best[1] if best else None


# --- Chinese -----------------------------------------------------------------------------------------------

def _clauses_zh(sentence: str) -> list[tuple[int, int]]:
    cuts, start = [], 0
    for i, ch in enumerate(sentence):
        if ch in _CLAUSE_MARKS_ZH:
            cuts.append((start, i))
            start = i + 1
    cuts.append((start, len(sentence)))
    return [(a, b) for a, b in cuts if b > a]


def _negator_at(sentence: str, i: int) -> int:
    """The length of the negator starting at i, 0 if none."""
    if sentence.startswith(_NOT_NEGATORS_ZH, i):
        return 0
    return next((len(n) for n in _NEGATORS_ZH if sentence.startswith(n, i)), 0)


def _scopes_zh(sentence: str) -> list[tuple[int, int]]:
    spans, carry, topic = [], False, None
    for a, b in _clauses_zh(sentence):
        body = sentence[a:b].lstrip()
        a0 = b - len(body)
        if carry and body.startswith(_CARRY_ZH):
            spans.append((a0, b))
            continue
        carry = False
        if any(x in body for x in _AFTER_OBJECT_ZH):
            spans.append((a0, b))
            if topic is not None:
                spans.append(topic)
            topic = None
            continue
        # A topic (换新机这项，...) takes the next clause's refusal; one opened by 至于 / 关于 waits for the first
        # refusal of its sentence (至于全额退款，餐品已经送到，这个我们这边办不了).
        held = topic if topic is not None and sentence[topic[0]:topic[1]].lstrip().startswith(("至于", "关于")) else None
        topic = (a0, b) if body.rstrip().endswith(_TOPIC_ENDS_ZH) or body.startswith(("至于", "关于")) else held
        i, before = a0, len(spans)
        while i < b:
            n = _negator_at(sentence, i)
            if n:
                end = next((k for k in range(i + n, b) if sentence.startswith(_TURNS_ZH, k)), b)
                spans.append((i, end))
                carry = end == b
                i = end
            else:
                i += 1
        if held is not None and len(spans) > before:
            spans.append(held)
            topic = None
    return spans


def _segmented_verb_zh(sentence: str) -> bool:
    """A verb of two or more characters by jieba's part-of-speech tags (its dictionary, any business's words), in a
    sentence whose Han characters mostly stand in words of two or more (a shuffled one breaks into single
    characters)."""
    import warnings

    with warnings.catch_warnings():  # jieba 0.42.1's regex literals warn when first compiled
        warnings.simplefilter("ignore", DeprecationWarning)
        import jieba
        import jieba.posseg

    jieba.setLogLevel(60)
    tagged = [(w, f) for w, f in jieba.posseg.lcut(sentence) if any(_is_han(c) for c in w)]
    singles = sum(len(w) == 1 and w not in _FUNCTION_ZH for w, _ in tagged)
    return any(f.startswith("v") and len(w) >= 2 for w, f in tagged) and singles <= 0.5 * len(tagged)


def _read_zh(sentence: str, remedies: dict = _REMEDY_ZH) -> Sentence:
    han = sum(_is_han(c) for c in sentence)
    latin = len(_TOKEN_EN.findall(sentence))
    run = longest = 0
    for c in sentence:
        run = run + 1 if _is_han(c) else 0
        longest = max(longest, run)
    prose = longest >= 6 and any(w in sentence for w in _FUNCTION_ZH) and (
        any(v in sentence for v in _VERBS_ZH) or _segmented_verb_zh(sentence))
    out = Sentence(sentence, han + latin, prose, apology=any(a in sentence for a in _APOLOGY_ZH),
                   withdraws=any(w in sentence for w in _WITHDRAW_ZH))
    out.spans = _scopes_zh(sentence)
    moot = _moot_zh(sentence)
    for remedy, words in remedies.items():
        for w in words:
            for m in re.finditer(re.escape(w), sentence):
                clause = next(a for a, b in _clauses_zh(sentence) if a <= m.start() < b)
                before, after = sentence[clause:m.start()], sentence[m.end():m.end() + 3]
                if after.startswith(_THING_ZH) or any(s in before or s in after for s in _SHIPPING_ZH):
                    continue  # 退货期限; 运费按政策不予退还
                if out.negated_at(m.start()):
                    out.refused.add(remedy)
                else:
                    out.affirmed.add(remedy)
                    if prose and any(c in sentence[:m.start()] for c in _COMMIT_ZH):
                        (out.mooted if moot else out.offered).add(remedy)
    money = [r for r in ("refund", "voucher") if r in out.affirmed]
    ids = [m.span() for m in _ID.finditer(sentence)]
    for m in _NUMBER.finditer(sentence):
        if any(a <= m.start() < b for a, b in ids):
            continue
        noun = _attach_zh(sentence, m.start(), m.end())
        if noun is None and len(money) == 1 and sentence[m.end():].lstrip().startswith(("元", "块")):
            noun = money[0]  # 1,980元会在3至5个工作日内原路退回: the sentence's one money remedy
        out.amounts.append(Amount(round(float(m.group().replace(",", "")), 2), noun, out.negated_at(m.start())))
    return out


def _attach_zh(sentence: str, start: int, end: int) -> str | None:
    rest = sentence[end:].lstrip()
    if rest.startswith(_DAY_UNITS_ZH):
        return "days"
    best: tuple[int, str] | None = None
    for noun, words in _NOUNS_ZH.items():
        for w in words:
            k = sentence.rfind(w, max(0, start - 6 - len(w)), start)
            if k >= 0 and (best is None or start - (k + len(w)) < best[0]):
                best = (start - (k + len(w)), noun)
            k = sentence.find(w, end, end + 5 + len(w))
            if k >= 0 and (best is None or k - end < best[0]):
                best = (k - end, noun)
    return best[1] if best else None
