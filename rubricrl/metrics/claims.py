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
- *remedies* (refund, replacement, voucher, return): a remedy word inside a negation scope is *refused*; outside
  every one it is *affirmed*, and *offered* when a prose sentence commits to it before naming it (a modal or an
  offer verb: will, can, adding, choose, ...; 会, 可以, 为您, 我们, ...; or "we refund"); one that names a thing
  (a return label, 退货期限) or whose object is the shipping fee ("the shipping is not refunded") claims nothing;
- *amounts*: each number that is not part of an identifier, with the noun it attaches to (the nearest of refund,
  voucher, shipping and days within a few words: "a refund of the item price, 132.30 EUR" is a refund, "within
  5 business days" days) and whether it stands in a negation scope;
- the speech act: refusal, offer, apology or statement.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

REMEDIES = ("refund", "replacement", "voucher", "return")

# --- English -----------------------------------------------------------------------------------------------
_TOKEN_EN = re.compile(r"[A-Za-z]{1,4}-\d+|\d+(?:,\d{3})*(?:\.\d+)?|[A-Za-z]+(?:['’][A-Za-z]+)?|[;:]")
_REMEDY_EN = {
    "refund": [("refund",), ("refunds",), ("refunded",), ("refunding",), ("reimburse",), ("reimbursed",),
               ("reimbursement",), ("money", "back"), ("back", "on", "your"), ("back", "to", "your"),
               ("credited", "back")],
    "replacement": [("replacement",), ("replace",), ("replaced",), ("replacing",), ("exchange",), ("exchanged",),
                    ("new", "one")],
    "voucher": [("voucher",), ("vouchers",), ("coupon",), ("gift", "card"), ("store", "credit")],
    "return": [("return",), ("returned",), ("returning",), ("send", "it", "back")],
}
_THING_EN = frozenset("label labels period window policy request form address deadline process".split())
_SHIPPING_EN = frozenset("shipping postage".split())
_NOUNS_EN = {"refund": frozenset("refund refunds refunded reimbursement price amount charge extra duplicate".split()),
             "voucher": frozenset("voucher vouchers coupon".split()),
             "shipping": _SHIPPING_EN, "days": frozenset("day days business working".split())}
_NEGATORS_EN = frozenset("not no never cannot can't won't don't doesn't didn't isn't aren't wasn't weren't unable "
                         "neither nor without decline declined refuse refused deny denied".split())
_NEGATOR_PAIRS_EN = {("instead", "of"), ("rather", "than"), ("in", "place")}
_SCOPE_ENDS_EN = frozenset("; : but so however although though yet whereas while instead except".split())
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
_REMEDY_ZH = {"refund": ("退款", "退还", "退回", "返还", "退钱", "退给"),
              "replacement": ("换货", "更换", "补发", "换新", "调换", "重新发货"),
              "voucher": ("优惠券", "代金券", "礼券", "购物券"),
              "return": ("退货",)}
_THING_ZH = ("期限", "面单", "政策", "申请", "地址", "流程", "运费")
_SHIPPING_ZH = ("运费", "邮费")
_NOUNS_ZH = {"refund": _REMEDY_ZH["refund"] + ("金额", "多扣", "货款", "价款"), "voucher": _REMEDY_ZH["voucher"],
             "shipping": _SHIPPING_ZH}
_DAY_UNITS_ZH = ("个工作日", "工作日", "天", "日", "个月")
_NEGATORS_ZH = ("无法", "不能", "不予", "不会", "不可", "不再", "拒绝", "没有", "没法", "未能", "恕不", "不")
_NOT_NEGATORS_ZH = ("不便", "不好意思", "不客气", "不过", "不满", "不错", "不少", "不仅", "不同", "不久", "不断")
_CLAUSE_MARKS_ZH = "，,；;：:"
_CARRY_ZH = ("或者", "或是", "或", "以及", "及", "和", "并且", "并", "也")
_TURNS_ZH = ("但是", "但", "不过", "然而", "所以", "因此")
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


def read(reply: str) -> list[Sentence]:
    """The reply's sentences with their claims (module doc)."""
    text = unicodedata.normalize("NFKC", reply)
    return [_read_zh(s) if _chinese(s) else _read_en(s) for s in split_sentences(text)]


# --- English -----------------------------------------------------------------------------------------------

def _read_en(sentence: str) -> Sentence:
    toks = [(m.group().casefold().replace("’", "'"), m.start(), m.end()) for m in _TOKEN_EN.finditer(sentence)]
    words = [t for t, _, _ in toks if t not in (";", ":")]
    low = [t for t, _, _ in toks]
    alpha = [w for w in words if w[0].isalpha() and "-" not in w]
    first = next((c for c in sentence if c.isalnum()), "")
    verb = any(w in _AUX_EN or "'" in w or (len(w) > 4 and w.endswith("ed")) or _verb_en(w) for w in words) or any(
        low[i] in _SUBJECTS_EN and low[i + 1][0].isalpha() for i in range(len(low) - 1))
    prose = (len(words) >= 4 and (first.isupper() or first.isdigit()) and verb and len(alpha) >= 0.6 * len(words)
             and any(w in _FUNCTION_EN for w in words))
    out = Sentence(sentence, len(words), prose, apology=any(w in _APOLOGY_EN for w in words))
    negated = _scopes_en(low)
    for i, (t, a, b) in enumerate(toks):
        if negated[i]:
            out.spans.append((a, b))
    for remedy, phrases in _REMEDY_EN.items():
        for i in range(len(low)):
            phrase = next((p for p in phrases if tuple(low[i:i + len(p)]) == p), None)
            if phrase is None:
                continue
            after = low[i + len(phrase)] if i + len(phrase) < len(low) else ""
            if after in _THING_EN or _about_shipping_en(low, i, len(phrase)):
                continue  # a return label; the shipping is not refunded
            if negated[i]:
                out.refused.add(remedy)
            else:
                out.affirmed.add(remedy)
                if prose and (any(w in _COMMIT_EN or w.endswith("'ll") for w in low[:i])
                              or (i and low[i - 1] in ("we", "i"))):
                    out.offered.add(remedy)
    for i, (t, a, b) in enumerate(toks):
        if t[0].isdigit():
            out.amounts.append(Amount(round(float(t.replace(",", "")), 2), _attach_en(low, i), negated[i]))
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
    """Per token: inside a negation scope."""
    inside = [False] * len(low)
    for i, w in enumerate(low):
        pair = (w, low[i + 1]) in _NEGATOR_PAIRS_EN if i + 1 < len(low) else False
        if w not in _NEGATORS_EN and not w.endswith("n't") and not pair:
            continue
        j = i + (2 if pair else 1)
        while j < len(low) and low[j] not in _SCOPE_ENDS_EN:
            inside[j] = True
            j += 1
        k = i - 1
        while not pair and k >= max(0, i - 3) and low[k] not in _SCOPE_ENDS_EN:
            inside[k] = True
            k -= 1
    return inside


def _attach_en(low: list[str], at: int) -> str | None:
    best: tuple[int, str] | None = None
    for k in range(max(0, at - 5), min(len(low), at + 4)):
        for noun, words in _NOUNS_EN.items():
            if k != at and low[k] in words:
                d = abs(k - at) * 2 + (1 if k < at else 0)  # a tie goes to the noun after ("5 business days")
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
    spans, carry = [], False
    for a, b in _clauses_zh(sentence):
        body = sentence[a:b].lstrip()
        a0 = b - len(body)
        if carry and body.startswith(_CARRY_ZH):
            spans.append((a0, b))
            continue
        carry = False
        i = a0
        while i < b:
            n = _negator_at(sentence, i)
            if n:
                end = next((k for k in range(i + n, b) if sentence.startswith(_TURNS_ZH, k)), b)
                spans.append((i, end))
                carry = end == b
                i = end
            else:
                i += 1
    return spans


def _read_zh(sentence: str) -> Sentence:
    han = sum(_is_han(c) for c in sentence)
    latin = len(_TOKEN_EN.findall(sentence))
    run = longest = 0
    for c in sentence:
        run = run + 1 if _is_han(c) else 0
        longest = max(longest, run)
    prose = longest >= 6 and any(v in sentence for v in _VERBS_ZH) and any(w in sentence for w in _FUNCTION_ZH)
    out = Sentence(sentence, han + latin, prose, apology=any(a in sentence for a in _APOLOGY_ZH))
    out.spans = _scopes_zh(sentence)
    for remedy, words in _REMEDY_ZH.items():
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
                        out.offered.add(remedy)
    ids = [m.span() for m in _ID.finditer(sentence)]
    for m in _NUMBER.finditer(sentence):
        if any(a <= m.start() < b for a, b in ids):
            continue
        out.amounts.append(Amount(round(float(m.group().replace(",", "")), 2), _attach_zh(sentence, m.start(), m.end()),
                                  out.negated_at(m.start())))
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
