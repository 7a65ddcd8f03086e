"""A free-text reply read by sentence and clause, for the rubric items' meaning checks (rubricrl/reward/items.py):
which sentences are prose, which clauses negate what they hold, and how much of a reply is prose at all.

- A *sentence* (the grounding code's split: 。！？!? a line break, '. ' before a capital) is *prose* when it reads
  as one. English: at least 4 words, mostly words rather than codes and numbers, 12% to 85% function words (the,
  we, will, of, ...), no word repeated past a quarter of it nor any three words more than twice, no full stop
  inside it, and function words in an order English allows (no determiner before another function word or at the
  end, no modal before a preposition, "a" before a consonant; no capitalised function word inside it: how
  shuffled words read). Chinese: a run of at least 5 Han characters (not a list of words), a function word (的,
  我们, 会, ...), no four characters more than twice, and at least 30% of its Han characters in dictionary words
  of two or more characters (jieba's dictionary: a shuffled sentence keeps its characters and loses its words).
- *Coherence*: the share of the reply's words (a Han character is one) in prose sentences, not counting its
  framing: a short greeting before the first prose sentence and up to 3 short sign-off lines after the last one
  ("Dear Ms Bello,", "Kind regards,", "Northwind Air Customer Relations"; 思远您好, 祝好), 8 words or fewer each.
- A sentence *commits* the shop when it holds a modal or an offer verb (will, can, offer, add, issue, send, ...; 会,
  可以, 为您, 办理, ...), or a clause has "we" do the thing ("we refund", 我们退还): "We are writing about a refund"
  offers none.
- A commitment is *void* (its clause offers nothing, whatever its verbs) when its sentence is hedged (may,
  might, perhaps, possibly, try, hope, ...; 也许, 可能, 尽量, ...); conditional on what the shop asks for or
  decides: an if / provided / as long as / unless (如果, 只要, 前提是, ...) with a photo, a proof, an approval, a
  check ("if the manager agrees"; 审核, 证明, 上传, ...), where "if you prefer" or "if your trip is cancelled"
  sets no condition; counterfactual ("would have", "could have", "had you"; 本来, 本可以, 要是早); a quotation of
  the policy with no one committing ("our policy says members get ..."; 政策, 规定 with no 我们会 / 为您);
  retracted by a later sentence ("on second thought", "having checked again", "please disregard"; 更正, 复核,
  不作数, ...); or the customer's wish reported back ("you'd prefer your money back").
- A *clause* is a sentence cut at ; : and at contrast or consequence (", but", ", so", "however"), before a reason
  (", because", ", since", ", as") or "when", at ", and" before a new subject, after a fronted "As ..., " clause;
  in Chinese also at the comma (not inside 1,300元), and 但, 所以, 因此: the scope of a negation. A clause is
  *negated* when it holds a negation or refusal word (not, cannot, unable, no longer, unfortunately, ...; "off the
  table", "in no position"; 无法, 不能, 不予, 不会, 不退, 拒绝, 办不了, ...), when a later clause of its sentence
  refuses "either" / "both" of what it named ("... but we can't offer either"), or, in Chinese, when it starts
  with 或 / 和 / 并 after a negated one; "instead of X" / "rather than X" negate only X. A reason or circumstance
  clause (as, because, since, when, ...) refuses nothing by its negation ("As you weren't given a meal voucher,
  we are sending you one"). A computation in brackets ("16.50 EUR (45.00 / 30 x 11)") states its result only.
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
_PREPOSITION_PAIRS = frozenset({("from", "within"), ("from", "under"), ("from", "over"), ("until", "after")}
                               | {(p, "to") for p in ("over", "up", "due", "prior", "next", "according", "back", "on",
                                                      "out", "in", "from")})
_INNER_STOP = regex.compile(r"\p{L}{2,}[.]\s+(?=\p{Ll})")  # "patience. cannot": one sentence ended, another begins
# Refusals in other words (their clause says no): "off the table", "in no position to grant".
_REFUSALS_EN = regex.compile(r"\boff\s+the\s+table\b|\bout\s+of\s+the\s+question\b|\bin\s+no\s+position\b|"
                             r"\bnot\s+in\s+a\s+position\b|\b(?:beyond|outside)\s+what\s+(?:we|our)\b", regex.I)
# "we can't offer either": the negation reaches back to the remedies its sentence named before it.
_BOTH_EN = regex.compile(r"\b(?:offer|give|provide|do|grant|allow|accept|approve|arrange|issue)\s+(?:you\s+)?"
                         r"(?:either|both|them)\b", regex.I)
# A clause that gives a reason or a circumstance ("As you weren't given a meal voucher, ...", "when we're able to
# supply the part") refuses nothing by its negation: it neither vetoes an offer nor falls into a refusal pitfall.
_SUBORDINATE_EN = regex.compile(r"^\W*(?:as|because|since|although|though|while|when|given\s+that)\b", regex.I)
# The customer's wish reported back offers nothing: "you'd prefer your money back", "you asked for a refund".
_WISH_EN = regex.compile(r"(?<!\bif\s+)\byou(?:['’]d|\s+would)?\s+(?:prefer|like|want|wanted|asked|requested|"
                         r"hoped|wished)\b", regex.I)  # "if you prefer" is a choice
# A computation shown in brackets ("16.50 EUR (45.00 / 30 x 11)") states the result, not its operands.
_WORKING = regex.compile(r"\((?=[^()]*\d\s*[x×/÷*+]\s*\d)[^()=]*\)")  # "(... = 1,180.00)" keeps its result
_NEGATIONS_EN = frozenset("not no never cannot can't won't don't doesn't didn't isn't aren't wasn't weren't "
                          "shouldn't couldn't wouldn't unable unfortunately decline declined refuse refused "
                          "deny denied neither nor without".split())
_COMMIT_EN = frozenset("will would can could may shall offer offers offering issue issuing send sending give "
                       "giving provide providing arrange arranging add adding credit credited choose get receive "
                       "process transfer".split())
# "we may", "it might", "perhaps": a hedge; "you may choose" is a permission, not one.
_HEDGE_EN = regex.compile(r"\b(?:we|i|it|this|that|there|which|they)\s+(?:may|might|could\s+possibly)\b|"
                          r"\bmight\b(?!\s+(?:want|like|wish))|\bmay\s+be\s+(?:able|possible)\b|"
                          r"\b(?:perhaps|possibly|maybe|potentially|probably|unsure|uncertain)\b|"
                          r"\b(?:try|trying|attempt|attempting|hope|hoping)\s+to\b|\bnot\s+sure\b|"
                          r"\bsee\s+(?:if|whether|what)\b|\bno\s+guarantee|\bcannot\s+promise\b|\bcan['’]t\s+promise\b",
                          regex.I)
_CONDITION_EN = regex.compile(r"\b(?:if|provided|providing|as\s+long\s+as|unless|on\s+condition|assuming|"
                              r"only\s+when|only\s+after)\b", regex.I)  # "subject to availability": the policy's
# A condition the shop imposes (a proof, an approval, a check): "if you send us a photo and the manager approves";
# "if your trip is cancelled" or "if you prefer" sets none.
_IMPOSED_EN = regex.compile(r"\b(?:approv\w*|agree[sd]?|confirm\w*|verif\w*|review\w*|sign\w*\s+off|manager|"
                            r"supervisor|send\s+us|provide|submit\w*|upload\w*|photos?|proof|certificate|receipts?|"
                            r"invoices?|evidence|documentation|inspect\w*|assess\w*|eligib\w*|qualif\w*|"
                            r"fill\s+(?:in|out)|forms?|bank\s+details)\b", regex.I)
_IMPOSED_ZH = ("审核", "审批", "同意", "批准", "核实", "确认", "证明", "照片", "截图", "上传", "提供", "提交", "检测", "凭证",
               "发票", "主管", "经理", "评估", "符合条件")
_CHOICE_EN = regex.compile(r"\bif\s+(?:you|that)\s+(?:would\s+|'d\s+|’d\s+)?(?:prefer|wish|like|want|rather|choose|opt|decide|"
                           r"need|suits?|works?|is\s+easier|is\s+more\s+convenient)\b|\bif\s+so\b|\bif\s+needed\b|"
                           r"\bif\s+you\s+have\s+(?:any|further|more)\b", regex.I)
_COUNTERFACTUAL_EN = regex.compile(r"\b(?:would|could|might|should)(?:\s+not|n['’]t)?\s+have\s+\w+|\bhad\s+you\b|"
                                   r"\bif\s+(?:you|it|the\s+\w+)\s+had\b|\bwere\s+it\s+not\b", regex.I)
_QUOTES_EN = regex.compile(r"\b(?:policy|policies|terms|rules|regulations?|conditions|rate|tariff|agreement|"
                           r"contract|charter|warranty|guarantee)\b.{0,30}\b(?:says?|states?|"
                           r"provides?|allows?|entitles?|reads?|specif(?:y|ies)|sets?\s+out|stipulates?)\b|"
                           r"\b(?:according\s+to|under|per|as\s+per)\s+(?:our|the)\s+(?:\w+\s+)?(?:policy|terms|rules)\b",
                           regex.I)
_SPEAKER_EN = regex.compile(r"\b(?:we|i)\s*(?:['’]ll|['’]ve|['’]re|will|shall|can|are|have|am|would\s+like)\b|"
                            r"\byou\s+(?:will|can|['’]ll)\s+(?:receive|get|have|choose|see|keep)\b|"
                            r"\b(?:we|i)\s+(?:refund|replace|send|issue|offer|credit|arrange|give|return|waive|"
                            r"repair|cover|reimburse)\b", regex.I)
_RETRACT_EN = regex.compile(r"\bon\s+second\s+thoughts?\b|\bdisregard\b|\bscratch\s+that\b|\btake\s+(?:that|it)\s+back\b|"
                            r"\bhaving\s+(?:looked|reviewed|checked|re-?checked)\b|^\s*actually,|"
                            r"\b(?:looked|checked|reviewed)\s+(?:into\s+it\s+|the\s+\w+\s+)?(?:again|further)\b|"
                            r"\bI(?:['’]ve|\s+have)\s+just\s+(?:seen|noticed)\b|\bafter\s+checking\s+again\b|"
                            r"\b(?:withdraw|retract|rescind|revoke)\w*\b|\bcorrection\b|\bafter\s+all\b|"
                            r"\bno\s+longer\s+(?:stands|applies|valid)\b|\bignore\s+(?:that|the\s+above|my\s+previous)\b",
                            regex.I)
_CLAUSE_CUTS_EN = regex.compile(r"[;:]|,\s*(?:but|so|and so|however|although|though|whereas|while)\b|"
                                r"\b(?:but|however|although|whereas)\b|"
                                # the reason after the main clause: "we can't refund it, because we can repair it"
                                r",\s*(?=(?:because|since|as|unless)\b)|\s(?=when\b)|"
                                # "I'm sorry to say we can't ...": the apology is not what is refused
                                r"(?<=\b(?:sorry|afraid)(?:\s+to\s+say)?)\s+(?=(?:that\s+)?(?:we|i|it|this|the|your)\b)|"
                                # a new subject after ", and": "..., and the full refund is off the table"
                                r",\s*and\s+(?=(?:we|you|i|it|they|this|our|your|the)\b)|"
                                # the comma closing a fronted subordinate clause: "As you weren't given one, we ..."
                                r"(?<=^\s*(?:as|because|since|although|though|while|when|once|after)\b[^,;:]{3,80}),",
                                regex.I)
_EXCEPT_EN = regex.compile(r"\b(?:instead\s+of|rather\s+than|in\s+place\s+of)\b", regex.I)

# --- Chinese -----------------------------------------------------------------------------------------
FUNCTION_ZH = ("的", "了", "您", "我们", "我", "你", "是", "在", "会", "将", "已", "为", "给", "请", "可以", "能",
               "和", "或", "对", "按", "如", "与", "并", "也", "都", "就", "这", "该", "其", "吗", "呢", "吧", "把",
               "被", "让", "从", "到", "后", "时", "中", "内", "再", "还", "又", "很", "非常", "不")
# A shuffled sentence keeps its characters and loses its words: the share of its Han characters that jieba's
# dictionary (the jieba package's own dict.txt, 349,046 words of general written Chinese) cuts into words of two or
# more characters. Measured (issue 45): fluent replies of every business 0.41 to 0.92, the same characters shuffled
# 0.0 to 0.17.
_NEGATIONS_ZH = ("无法", "不能", "不予", "不可", "不会", "不退", "不再", "拒绝", "恕不", "未能", "没法", "没有办法",
                 "办不了", "办不到", "做不到", "不在", "不属于", "不包括", "不含", "超出", "不收",
                 "不支持", "不提供", "不接受", "不行", "不给", "不换", "不更换", "不补", "没有", "不办理", "不允许",
                 "不符合", "很遗憾", "遗憾的是", "办理不了", "处理不了", "安排不了", "提供不了", "不参与")
_COMMIT_ZH = ("会", "可以", "将", "能", "为您", "给您", "帮您", "办理", "提供", "补偿", "安排", "发放", "予以")
_CLAUSE_CUTS_ZH = regex.compile(r"[，；;：:]|,(?!\d{3}(?!\d))|但是|但|不过|所以|因此|然而|(?=[（(])|(?<=[）)])")  # 1,300元 is one
# number; a bracket is an aside of its own
_JOINS_ZH = ("或", "和", "及", "以及", "并", "也")  # "无法退款，或换货": the negation carries over
# A clause that only names its topic ("至于换新机，这个我们办不了"; "换新机这项，...不能提供") takes the next one's refusal.
_TOPIC_ZH = ("这项", "这一项", "这一块", "这块", "方面", "的话")
_EXCEPT_ZH = regex.compile(r"而不是|而非|代替")
_HEDGES_ZH = ("也许", "或许", "可能", "大概", "尽量", "争取", "看看能不能", "试着", "试试", "说不定", "不一定", "未必")
_CONDITION_ZH = ("如果", "假如", "要是", "只要", "前提是", "除非", "倘若", "若", "只有", "条件是", "视情况")
_CHOICE_ZH = ("如您需要", "如果您需要", "如果您愿意", "如您愿意", "如果您希望", "如您希望", "如果您更", "如有", "如果有任何",
              "如果您有", "如果方便", "如您方便", "如果您选择", "如您选择", "如果您想", "如您想", "如果您要", "如您要",
              "如果选择", "若您选择", "若选择")
_COUNTERFACTUAL_ZH = ("本来", "本可以", "本应", "要是早", "如果早", "早点", "早些")
_QUOTES_ZH = ("政策", "规定", "条款", "规则", "协议", "条例", "章程", "服务承诺")
_SPEAKER_ZH = ("我们会", "我们将", "我们已", "我们可以", "我们为您", "为您", "给您", "帮您", "我们马上", "我们立即", "您可以",
               "您将", "我们这边会", "我们这边可以", "我会", "我将", "我们承诺")
_RETRACT_ZH = ("更正", "收回", "撤回", "请忽略", "不作数", "不算数", "说错了", "再次核实后", "重新核实后", "复核", "再核对",
               "再次核对", "重新核对", "又查了", "再查了")

MIN_WORDS_EN, MIN_HAN_ZH = 4, 5
FUNCTION_SHARE_EN = (0.12, 0.85)
WORD_SHARE_ZH = 0.3


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
    for i, t in enumerate(tokens):  # "9 May", "May 9": the month, not the modal
        if t == "May" and any(tokens[j][:1].isdigit() for j in (i - 1, i + 1) if 0 <= j < len(tokens)):
            lower[i] = "may."
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


@lru_cache(maxsize=1)
def _jieba():
    import logging
    import warnings

    with warnings.catch_warnings():  # jieba 0.42.1's regex literals (invalid escapes) warn when first compiled
        warnings.simplefilter("ignore", DeprecationWarning)
        import jieba
        import jieba.finalseg  # noqa: F401

    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    return jieba


def word_share_zh(text: str) -> float:
    """The share of the text's Han characters inside dictionary words of two or more characters (jieba, no HMM:
    no guessed words)."""
    han = total = 0
    for word in _jieba().lcut(text, HMM=False):
        n = len(_HAN.findall(word))
        total += n
        if n >= 2 and n == len(word):
            han += n
    return han / total if total else 0.0


def _why_not_prose_zh(sentence: str) -> str | None:
    han = len(_HAN.findall(sentence))
    if han < MIN_HAN_ZH:
        return f"{han} Han characters"
    run = max(len(r) for r in _HAN_RUN.findall(sentence))
    if run < MIN_HAN_ZH:
        return f"no run of {MIN_HAN_ZH} Han characters (a list of words)"
    if not any(w in sentence for w in FUNCTION_ZH):
        return "no function word"
    han = "".join(_HAN.findall(sentence))
    if _repeats(han, 4, max(3, len(han) // 15)):  # a loop, not a sentence naming its date thrice
        return "a phrase repeated"
    share = word_share_zh(sentence)
    if share < WORD_SHARE_ZH:
        return f"{share:.0%} of it in dictionary words"
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
    repeated: str = ""  # a sentence of 4 words or more said again word for word (padding), "" if none


FRAMING_WORDS, FRAMING_TAIL = 8, 3


def coherence(reply: str, language: str) -> Coherence:
    """How much of the reply is prose in `language` (a sentence in another language is not), its framing aside."""
    parts = sentences(reply)
    why = [why_not_prose(s) if is_chinese(s) == (language == "zh") else f"not in {language}" for s in parts]
    prose = [i for i, w in enumerate(why) if w is None]
    framing: set[int] = set()
    if prose:
        short = [len(words(s)) <= FRAMING_WORDS for s in parts]
        framing = {i for i in range(prose[0]) if i == 0 and short[i]}
        tail = range(prose[-1] + 1, len(parts))
        if len(tail) <= FRAMING_TAIL and all(short[i] for i in tail):
            framing |= set(tail)
    total = good = 0
    example = ""
    for i, s in enumerate(parts):
        if i in framing:
            continue
        n = len(words(s))
        total += n
        if why[i] is None:
            good += n
        elif not example:
            example = f"{s.strip()[:60]!r}: {why[i]}"
    seen, repeated = set(), ""
    for s in parts:
        key = " ".join(w.casefold() for w in words(s))
        if key in seen and len(words(s)) >= MIN_WORDS_EN and not repeated:
            repeated = s.strip()[:60]
        seen.add(key)
    return Coherence(good / total if total else 0.0, len(parts), len(prose), example, repeated)


# --- clauses and negation ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Clause:
    text: str
    negated: bool
    prose: bool  # the sentence it belongs to is prose
    sentence: str
    void: str | None = None  # why a commitment here is void (hedged, conditional, counterfactual, quoted, retracted)
    subordinate: bool = False  # a reason or circumstance ("as you weren't given one"): its negation refuses nothing


@lru_cache(maxsize=1024)
def _commits(sentence: str) -> bool:
    if is_chinese(sentence):
        return any(c in sentence for c in _COMMIT_ZH)
    return any(w in _COMMIT_EN or w.endswith("'ll") for w in (t.casefold().replace("’", "'") for t in words(sentence)))


def commits(sentence: str, clause: str, what: list[str]) -> bool:
    """The sentence commits the shop to something: a modal or an offer verb (will, can, offer, add, issue, ...; 会,
    可以, 为您, 办理, ...), or the clause has "we" do one of `what` ("we refund", "we're refunding", "we are
    refunding", 我们退还), or its object is done in the present passive ("your order is refunded in full")."""
    if _commits(sentence):
        return True
    if is_chinese(sentence):
        return any(f"{s}{w}" in clause for s in ("我们", "我") for w in what)
    said = [w.casefold().replace("’", "'") for w in words(clause)]
    stems = tuple(t.casefold() for t in what if len(t) >= 4)
    done = {t.casefold() for t in what}

    def does(word: str) -> bool:  # "refund", "refunding", "refunds"
        return word in done or (bool(stems) and word.startswith(stems))

    return any((a in ("we", "i", "we're", "i'm", "we've", "i've") and does(b))
               or (a in ("we", "i") and b in ("are", "am", "have") and does(c))
               or (a in ("is", "are", "be") and b.endswith("ed") and does(b))  # "your order is refunded in full"
               or (a in ("we're", "i'm") and b.endswith("ing") and len(b) > 4)  # we're (also) emailing you ...
               or (a in ("we're", "i'm") and b in ("also", "now", "already") and c.endswith("ing") and len(c) > 4)
               for a, b, c in zip(said, said[1:] + [""], said[2:] + ["", ""]))


def _negated(text: str, zh: bool) -> bool:
    if zh:
        return any(n in text for n in _NEGATIONS_ZH)
    low = [w.casefold().replace("’", "'") for w in words(text)]
    return any(w in _NEGATIONS_EN or w.endswith("n't") for w in low) or bool(_REFUSALS_EN.search(text))


def _cut(sentence: str, zh: bool) -> list[tuple[str, bool]]:
    """(clause, negated by an 'instead of' before it)."""
    out = []
    for part in (_CLAUSE_CUTS_ZH if zh else _CLAUSE_CUTS_EN).split(sentence):
        pieces = (_EXCEPT_ZH if zh else _EXCEPT_EN).split(part)
        out.append((pieces[0], False))
        out += [(p, True) for p in pieces[1:]]
    return [(c, forced) for c, forced in out if c and c.strip()]


@lru_cache(maxsize=2048)
def void_reason(sentence: str) -> str | None:
    """Why a commitment in this sentence is void (module doc), or None: hedged, conditional, counterfactual or
    quoted (a retraction is the reply's: `clauses` applies it)."""
    if is_chinese(sentence):
        if any(c in sentence for c in _COUNTERFACTUAL_ZH):
            return "counterfactual"
        rest = sentence
        for choice in _CHOICE_ZH:
            rest = rest.replace(choice, "")
        if (any(c in rest for c in _CONDITION_ZH if c != "若") or regex.search(r"(?<![倘])若(?![干])", rest)) and \
                any(w in rest for w in _IMPOSED_ZH):
            return "conditional"
        if any(h in sentence.replace("尽可能", "").replace("不可能", "") for h in _HEDGES_ZH):
            return "hedged"
        if any(q in sentence for q in _QUOTES_ZH) and not any(w in sentence for w in _SPEAKER_ZH):
            return "quoted"
        return None
    if _COUNTERFACTUAL_EN.search(sentence):
        return "counterfactual"
    rest = _CHOICE_EN.sub(" ", sentence)
    if _CONDITION_EN.search(rest) and _IMPOSED_EN.search(rest):
        return "conditional"
    if _HEDGE_EN.search(sentence):
        return "hedged"
    if _QUOTES_EN.search(sentence) and not _SPEAKER_EN.search(sentence):
        return "quoted"
    return None


def _retracts(sentence: str) -> bool:
    if is_chinese(sentence):
        return any(r in sentence for r in _RETRACT_ZH)
    return bool(_RETRACT_EN.search(sentence))


@lru_cache(maxsize=512)
def clauses(reply: str) -> tuple[Clause, ...]:
    """Every clause of the reply, in order, with its negation, whether its sentence is prose and why a commitment
    in it would be void (module doc)."""
    out = []
    parts = sentences(reply)
    # A sentence that retracts voids every commitment before it.
    last_retraction = max((i for i, s in enumerate(parts) if _retracts(s)), default=-1)
    for k, s in enumerate(parts):
        zh, prose = is_chinese(s), why_not_prose(s) is None
        void = "retracted" if k < last_retraction else void_reason(s)
        before = False
        cut = [(_WORKING.sub(" ", text), forced) for text, forced in _cut(s, zh)]
        negations = [forced or _negated(text, zh) for text, forced in cut]
        # "... your money back or a new laptop, but we can't offer either": the clauses up to that one refused
        upto = max((j for j, (n, (text, _)) in enumerate(zip(negations, cut)) if n and not zh and _BOTH_EN.search(text)),
                   default=-1)
        if zh:  # a topic clause takes the refusal of the clause after it; one opened by 至于 / 关于, of any later one
            negations = [n or (j + 1 < len(cut) and negations[j + 1] and text.rstrip().endswith(_TOPIC_ZH)) or (
                text.strip().startswith(("至于", "关于")) and any(negations[j + 1:]))
                for j, (n, (text, _)) in enumerate(zip(negations, cut))]
        for j, ((text, forced), negated) in enumerate(zip(cut, negations)):
            negated = j <= upto or negated or (zh and before and text.lstrip().startswith(_JOINS_ZH))
            out.append(Clause(text, negated, prose, s, "wish" if not zh and _WISH_EN.search(text) else void,
                              not zh and bool(_SUBORDINATE_EN.search(text))))
            if not text.lstrip().startswith(("(", "（")):  # an aside does not carry its negation on: "...（不收改签费），或全额退票"
                before = negated
    return tuple(out)
