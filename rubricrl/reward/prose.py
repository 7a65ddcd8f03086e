"""A free-text reply read by sentence and clause, for the rubric items' meaning checks (rubricrl/reward/items.py):
which sentences are prose, which clauses negate what they hold, and how much of a reply is prose at all.

- A *sentence* (the grounding code's split: 。！？!? a line break, '. ' before a capital) is *prose* when it reads
  as one. English: at least 4 words, mostly words rather than codes and numbers, 12% to 85% function words (the,
  we, will, of, ...), no word repeated past a quarter of it nor any three words more than twice, no full stop
  inside it, and function words in an order English allows (no determiner before another function word or at the
  end, no modal before a preposition, "a" before a consonant; no capitalised function word inside it: how
  shuffled words read). Chinese: a run of at least 5 Han characters (not a list of words), a function word (的,
  我们, 会, ...), no four characters more than twice, and at least 30% of its Han characters in common words (a
  shuffled sentence keeps its characters and loses its words).
- *Coherence*: the share of the reply's words (a Han character is one) in prose sentences.
- A sentence *commits* the shop when it holds a modal or an offer verb (will, can, offer, add, issue, send, ...; 会,
  可以, 为您, 办理, ...), or a clause has "we" do the thing ("we refund", 我们退还): "We are writing about a refund"
  offers none.
- A *clause* is a sentence cut at ; : and at contrast or consequence (", but", ", so", "however"; in Chinese also
  at the comma, and 但, 所以, 因此): the scope of a negation. A clause is *negated* when it holds a negation or
  refusal word (not, cannot, unable, no longer, unfortunately, ...; 无法, 不能, 不予, 不会, 不退, 拒绝, ...), or,
  in Chinese, starts with 或 / 和 / 并 after a negated one; "instead of X" / "rather than X" negate only X.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

import regex

from rubricrl.reward.grounding.text import split_sentences

_WORD = regex.compile(r"\p{Han}|[\p{L}\p{N}]+(?:['’.\-][\p{L}\p{N}]+)*")
_HAN = regex.compile(r"\p{Han}")
_HAN_RUN = regex.compile(r"\p{Han}+")
_LETTERS = regex.compile(r"\p{L}+(?:['’\-]\p{L}+)*")

# --- English -----------------------------------------------------------------------------------------
_DETERMINERS = frozenset("the a an your our my their its every each".split())
_PREPOSITIONS = frozenset("of to for from with within in on at by after before about into under over during "
                          "until via per upon".split())
_AUXILIARIES = frozenset("will would can could shall should may might must is are was were be been being am "
                         "has have had do does did".split())
_PRONOUNS = frozenset("we you i it they he she us them me this that these those there here".split())
_CONNECTIVES = frozenset("and or but so because once if when while as than then also not no please".split())
FUNCTION_EN = _DETERMINERS | _PREPOSITIONS | _AUXILIARIES | _PRONOUNS | _CONNECTIVES | frozenset(
    "what which who how all any some more most very just only".split())
# After a determiner comes a noun or an adjective, never another function word.
_NOT_AFTER_DETERMINER = _DETERMINERS | _PREPOSITIONS | _AUXILIARIES | _PRONOUNS | _CONNECTIVES
_MODALS = frozenset("will would can could shall should may might must".split())
_SUBJECTS = frozenset("we i they he she".split())
_COORDINATORS = frozenset("and or but".split())
_NOT_AFTER_MODAL = (_DETERMINERS | _PREPOSITIONS | _MODALS
                    | frozenset("and or but because once if when while as than".split()))
_NOT_AFTER_SUBJECT = _DETERMINERS | _PREPOSITIONS - {"to"} | _COORDINATORS
_NOT_AFTER_PREPOSITION = _MODALS | _PREPOSITIONS | _COORDINATORS | frozenset("is are was were am".split())
_PREPOSITION_PAIRS = frozenset({("from", "within"), ("from", "under"), ("from", "over"), ("until", "after")})
_INNER_STOP = regex.compile(r"\p{L}{2,}[.]\s+(?=\p{Ll})")  # "patience. cannot": one sentence ended, another begins
_NEGATIONS_EN = frozenset("not no never cannot can't won't don't doesn't didn't isn't aren't wasn't weren't "
                          "shouldn't couldn't wouldn't unable unfortunately decline declined refuse refused "
                          "deny denied neither nor without".split())
_COMMIT_EN = frozenset("will would can could may shall offer offers offering issue issuing send sending give "
                       "giving provide providing arrange arranging add adding credit credited choose get receive "
                       "process transfer".split())
_CLAUSE_CUTS_EN = regex.compile(r"[;:]|,\s*(?:but|so|and so|however|although|though|whereas|while)\b|"
                                r"\b(?:but|however|although|whereas)\b", regex.I)
_EXCEPT_EN = regex.compile(r"\b(?:instead\s+of|rather\s+than|in\s+place\s+of)\b", regex.I)

# --- Chinese -----------------------------------------------------------------------------------------
FUNCTION_ZH = ("的", "了", "您", "我们", "我", "你", "是", "在", "会", "将", "已", "为", "给", "请", "可以", "能",
               "和", "或", "对", "按", "如", "与", "并", "也", "都", "就", "这", "该", "其", "吗", "呢", "吧", "把",
               "被", "让", "从", "到", "后", "时", "中", "内", "再", "还", "又", "很", "非常", "不")
# Common words (customer service and everyday written Chinese): a sentence whose Han characters mostly fall
# outside them is no sentence. Matched longest first.
_COMMON_ZH = frozenset("""
您好 你好 尊敬 亲爱 客户 顾客 先生 女士 感谢 谢谢 耐心 理解 支持 配合 抱歉 歉意 对不起 不好意思 道歉 遗憾 非常 十分 深表 真诚
给您 为您 帮您 向您 带来 不便 麻烦 困扰 问题 情况 其他 如有 如果 随时 联系 我们 您的 我们的 客服 团队 店铺 本店 商家 平台
订单 商品 产品 物品 包裹 快递 物流 发货 发出 已经 收到 收货 到货 送达 配送 晚到 延迟 延误 承诺 时间 日期 天内 以内 之内
工作日 个工作日 小时 今天 明天 尽快 马上 立即 稍后 之后 以后 以前 之前 期限 期间 超过 报告 损坏 破损 摔裂 外壳 质量 使用 未使用
退款 全额 退还 退回 返还 退货 换货 更换 补发 换新 免费 面单 退货面单 运费 邮费 费用 金额 价格 商品金额 款项 重复 扣款 多扣 扣了
两次 确实 补偿 优惠券 代金券 账户 银行卡 原路 发错 错误 正确 提供 办理 处理 安排 选择 请选择 确认 核实 查询 检查 申请 提交
政策 按照 根据 规定 售后 无法 不能 不予 不会 不退 可以 能够 需要 应该 必须 希望 建议 请您 告知 通知 邮件 电话 信息 回复
一个 这个 那个 这样 所以 因此 但是 不过 而且 并且 或者 以及 还是 同时 另外 然后 由于 因为 虽然 只要 只有 已 将会 会在 内退回
电热水壶 热水壶 台灯 磨豆机 跑步鞋 蓝牙音箱 音箱 空气炸锅 办公椅 电动牙刷 牙刷 满意 服务 体验 感受 心情 担心 放心 欢迎
""".split())
_NEGATIONS_ZH = ("无法", "不能", "不予", "不可", "不会", "不退", "不再", "拒绝", "恕不", "未能", "没法", "没有办法",
                 "不支持", "不提供", "不接受", "不行", "不给", "不换", "不更换", "不补", "没有", "不办理", "不允许",
                 "不符合", "很遗憾", "遗憾的是")
_COMMIT_ZH = ("会", "可以", "将", "能", "为您", "给您", "帮您", "办理", "提供", "补偿", "安排", "发放", "予以")
_CLAUSE_CUTS_ZH = regex.compile(r"[，,；;：:]|但是|但|不过|所以|因此|然而")
_JOINS_ZH = ("或", "和", "及", "以及", "并", "也")  # "无法退款，或换货": the negation carries over
_EXCEPT_ZH = regex.compile(r"而不是|而非|代替")

MIN_WORDS_EN, MIN_HAN_ZH = 4, 5
FUNCTION_SHARE_EN = (0.12, 0.85)
COMMON_SHARE_ZH = 0.3


def words(text: str) -> list[str]:
    return _WORD.findall(text)


def is_chinese(text: str) -> bool:
    han = len(_HAN.findall(text))
    return han > 0 and 3 * han >= len(regex.findall(r"\p{Latin}", text))


def sentences(text: str) -> list[str]:
    return [s for s in split_sentences(text) if s.strip()]


# --- prose -------------------------------------------------------------------------------------------

def _why_not_prose_en(sentence: str) -> str | None:
    tokens = words(sentence)
    if len(tokens) < MIN_WORDS_EN:
        return f"{len(tokens)} words"
    lower = [t.casefold() for t in tokens]
    if sum(bool(_LETTERS.fullmatch(t)) for t in tokens) < 0.6 * len(tokens):
        return "mostly codes and numbers"
    share = sum(t in FUNCTION_EN for t in lower) / len(tokens)
    if not FUNCTION_SHARE_EN[0] <= share <= FUNCTION_SHARE_EN[1]:
        return f"{share:.0%} function words"
    if _INNER_STOP.search(sentence.strip()):
        return "a full stop inside it"
    content = Counter(t for t in lower if t not in FUNCTION_EN and len(t) > 2)
    if content and max(content.values()) > max(2, len(tokens) // 4):
        return "a word repeated"
    if _repeats(lower, 3):
        return "a phrase repeated"
    return _order_problem(tokens, lower)


def _order_problem(tokens: list[str], lower: list[str]) -> str | None:
    """The first pair of words in an order English does not allow (module doc), or None."""
    for i, (word, low) in enumerate(zip(tokens, lower)):
        nxt = lower[i + 1] if i + 1 < len(lower) else None
        if i and word[0].isupper() and low in FUNCTION_EN and low != "i" and not word.isupper():
            return f"a capitalised {word!r} inside it"
        if low in _DETERMINERS and (nxt is None or nxt in _NOT_AFTER_DETERMINER):
            return f"{word!r} before {tokens[i + 1]!r}" if nxt else f"ends on {word!r}"
        if nxt is None:
            break
        if ((low in _MODALS and nxt in _NOT_AFTER_MODAL) or (low in _SUBJECTS and nxt in _NOT_AFTER_SUBJECT)
                or (low in _PREPOSITIONS and nxt in _NOT_AFTER_PREPOSITION and (low, nxt) not in _PREPOSITION_PAIRS)
                or (low in _COORDINATORS and nxt in _COORDINATORS)
                or (low == "a" and nxt[0] in "aeio" and not nxt.startswith("one"))
                or (low == "an" and nxt[0].isalpha() and nxt[0] not in "aeiouh")):
            return f"{word!r} before {tokens[i + 1]!r}"
    return None


def _repeats(units, n: int, most: int = 2) -> bool:
    """Some run of n words (Chinese: characters) comes back more than `most` times: a loop, not a sentence."""
    runs = Counter(tuple(units[i:i + n]) for i in range(len(units) - n + 1))
    return bool(runs) and max(runs.values()) > most


def _common_share_zh(text: str) -> float:
    han = "".join(_HAN.findall(text))  # runs of Han characters: codes and numbers end no word
    if not han:
        return 0.0
    covered, i = 0, 0
    while i < len(han):
        for n in (5, 4, 3, 2):
            if i + n <= len(han) and han[i:i + n] in _COMMON_ZH:
                covered += n
                i += n
                break
        else:
            i += 1
    return covered / len(han)


def _why_not_prose_zh(sentence: str) -> str | None:
    han = len(_HAN.findall(sentence))
    if han < MIN_HAN_ZH:
        return f"{han} Han characters"
    run = max(len(r) for r in _HAN_RUN.findall(sentence))
    if run < MIN_HAN_ZH:
        return f"no run of {MIN_HAN_ZH} Han characters (a list of words)"
    if not any(w in sentence for w in FUNCTION_ZH):
        return "no function word"
    if _repeats("".join(_HAN.findall(sentence)), 4):
        return "a phrase repeated"
    share = _common_share_zh(sentence)
    if share < COMMON_SHARE_ZH:
        return f"{share:.0%} of it in common words"
    return None


@lru_cache(maxsize=4096)
def why_not_prose(sentence: str) -> str | None:
    """None when the sentence reads as prose (module doc), else why not."""
    return _why_not_prose_zh(sentence) if is_chinese(sentence) else _why_not_prose_en(sentence)


@dataclass(frozen=True)
class Coherence:
    share: float  # of the reply's words in prose sentences
    sentences: int
    prose: int
    example: str  # a sentence that is not prose and why ("" when every one is)


def coherence(reply: str, language: str) -> Coherence:
    """How much of the reply is prose in `language` (a sentence in another language is not)."""
    total = good = n_prose = 0
    example = ""
    parts = sentences(reply)
    for s in parts:
        n = len(words(s))
        total += n
        why = why_not_prose(s) if is_chinese(s) == (language == "zh") else f"not in {language}"
        if why is None:
            good += n
            n_prose += 1
        elif not example:
            example = f"{s.strip()[:60]!r}: {why}"
    return Coherence(good / total if total else 0.0, len(parts), n_prose, example)


# --- clauses and negation ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Clause:
    text: str
    negated: bool
    prose: bool  # the sentence it belongs to is prose
    sentence: str


@lru_cache(maxsize=1024)
def _commits(sentence: str) -> bool:
    if is_chinese(sentence):
        return any(c in sentence for c in _COMMIT_ZH)
    return any(w in _COMMIT_EN or w.endswith("'ll") for w in (t.casefold().replace("’", "'") for t in words(sentence)))


def commits(sentence: str, clause: str, what: list[str]) -> bool:
    """The sentence commits the shop to something: a modal or an offer verb (will, can, offer, add, issue, ...; 会,
    可以, 为您, 办理, ...), or the clause has "we" do one of `what` ("we refund", 我们退还)."""
    if _commits(sentence):
        return True
    if is_chinese(sentence):
        return any(f"{s}{w}" in clause for s in ("我们", "我") for w in what)
    said = [w.casefold() for w in words(clause)]
    return any(a in ("we", "i") and b in {t.casefold() for t in what} for a, b in zip(said, said[1:]))


def _negated(text: str, zh: bool) -> bool:
    if zh:
        return any(n in text for n in _NEGATIONS_ZH)
    low = [w.casefold().replace("’", "'") for w in words(text)]
    return any(w in _NEGATIONS_EN or w.endswith("n't") for w in low)


def _cut(sentence: str, zh: bool) -> list[tuple[str, bool]]:
    """(clause, negated by an 'instead of' before it)."""
    out = []
    for part in (_CLAUSE_CUTS_ZH if zh else _CLAUSE_CUTS_EN).split(sentence):
        pieces = (_EXCEPT_ZH if zh else _EXCEPT_EN).split(part)
        out.append((pieces[0], False))
        out += [(p, True) for p in pieces[1:]]
    return [(c, forced) for c, forced in out if c and c.strip()]


@lru_cache(maxsize=512)
def clauses(reply: str) -> tuple[Clause, ...]:
    """Every clause of the reply, in order, with its negation and whether its sentence is prose."""
    out = []
    for s in sentences(reply):
        zh, prose = is_chinese(s), why_not_prose(s) is None
        before = False
        for text, forced in _cut(s, zh):
            negated = forced or _negated(text, zh) or (zh and before and text.lstrip().startswith(_JOINS_ZH))
            out.append(Clause(text, negated, prose, s))
            before = negated
    return tuple(out)
