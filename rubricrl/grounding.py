"""Source grounding: is an extracted value supported by the source text?

Normalises case, width (NFKC: full-width Chinese digits and punctuation), whitespace, thousands
separators, decimals and numbers with units or Chinese multipliers (万, 亿). Used by the
deterministic faithfulness judge and the invented-value penalty, so it must be fast: a Source is
built once per text and reused for every response.

Without a reference, "supported" means the text states the value:
  * a number is one the text writes (with its multiplier: "3.5万" is 35000 and 3.5), or that number
    scaled by a unit conversion the task asks for *for that field* (FieldRule.factors, derived by
    field_rules from the constraints and the property description: "Give weight_g in grams." allows
    x1000 and /1000). Nothing is scaled blindly: 2999 -> 2999000 is not in a text that says 2999;
  * a string is a span of one sentence of the text (or, for a multi-word value, its words all in one
    sentence). A string that copies across a sentence boundary, or is far longer than a field value
    (copy_problem), is not an extraction;
  * a reformatted date (YYYY-MM-DD) or time (HH:MM) counts when a constraint or schema pattern of the
    task asks for that format and the text gives the same day / time ("March 5, 2024", "下午3点半");
    without such a request it does not (only a span of the text does). Dates without a year never do.
A value with a hedge ("about 2999", "约25") is no number at all (parse_number), so it never matches a
numeric gold answer either.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from dataclasses import dataclass, replace
from functools import lru_cache, wraps
from itertools import islice
from typing import Iterator, Mapping, Sequence

_WS = re.compile(r"\s+")
# Punctuation that carries no meaning for matching (kept: digits, letters, CJK, . and -, and the
# hedges ~ < > : "~2999" is not the 2999 of the text).
_PUNCT = re.compile(r"[\"'`“”‘’「」『』《》()\[\]{},，、;；:：!！?？。·•*_|/\\]+")
# A number: optional sign, digits with optional thousands separators, optional decimals,
# optional multiplier suffix.
# A minus sign counts only after a separator: in "8000元-16000元" the dash is a range.
_NUMBER = re.compile(
    r"((?<![^\s(:=：,，;；])[-−])?(?<![A-Za-z0-9.])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?\s*"
    r"(万|亿|千(?![克米瓦卡])|百万|k(?![a-zA-Z])|K(?![a-zA-Z])|M(?![a-zA-Z])|million|billion|thousand)?"
)
_MULTIPLIERS = {
    "万": 1e4, "亿": 1e8, "千": 1e3, "百万": 1e6, "k": 1e3, "K": 1e3, "M": 1e6,
    "million": 1e6, "billion": 1e9, "thousand": 1e3,
}
_CN_DIGITS = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_CN_NUMBER = re.compile(r"[零一二两三四五六七八九十百]+")
# A Chinese numeral in running text is a number only before a measure word or unit ("三人", "两室",
# "五年"), after 第, or standing alone between punctuation ("人数：三"): the 一 of 陈一鸣 is a name.
_CN_COUNTED = ("人", "位", "个", "名", "年", "岁", "月", "天", "日", "号", "周", "次", "室", "卫", "厅", "层",
               "楼", "间", "套", "家", "件", "台", "星", "分", "项", "条", "只", "张", "倍", "居", "晚", "点",
               "小时", "钟", "克", "公斤", "千克", "元", "块", "%")


# A thousands separator (one comma before exactly three digits) goes, so that '1,299' reads as '1299'
# and '12,99' as '12 99' (two numbers), as extract_numbers reads them.
_THOUSANDS_SEP = re.compile(r",(?<=\d,)(?=\d{3}(?!\d))")  # starts with ',': found by a fast scan


_MEMOS: list = []


def _memo(fn):
    """Memoise a pure function of one string: the rules and the judge read the same answer and gold
    values many times. Few long strings are kept (memory), but one huge value is read once."""
    short, long = lru_cache(maxsize=8192)(fn), lru_cache(maxsize=4)(fn)
    _MEMOS.extend((short, long))
    return wraps(fn)(lambda s: long(s) if len(s) > 1000 else short(s))


def clear_caches() -> None:
    """Forget every memoised string (benchmarks: fresh completions share nothing)."""
    for cache in _MEMOS:
        cache.cache_clear()


@_memo
def normalize_text(s: str) -> str:
    s = unicodedata.normalize("NFKC", s).casefold()
    s = _THOUSANDS_SEP.sub("", s)
    return " ".join(_PUNCT.sub(" ", s).split())  # split(): the whitespace of \s, faster than a sub


_SPACE_NOT_BETWEEN_DIGITS = re.compile(r"(?<!\d) | (?!\d)")


@_memo
def _squeeze(norm: str) -> str:
    """A normalised text without spaces (Chinese has none; '30 h' vs '30h'), except between two
    digits: '12,99' must not become the number 1299."""
    return _SPACE_NOT_BETWEEN_DIGITS.sub("", norm)


def _compact(s: str) -> str:
    """Normalised text without spaces: Chinese has none, and '30 h' vs '30h' should match."""
    return normalize_text(s).replace(" ", "")


def _is_cjk(ch: str) -> bool:
    return "\u4e00" <= ch <= "\u9fff" or "\u3400" <= ch <= "\u4dbf"


_CJK = re.compile("[\u4e00-\u9fff\u3400-\u4dbf]")


def _cn_to_int(s: str) -> int | None:
    """Chinese numerals up to 999 (三, 十五, 二十, 一百二十); None if not parseable."""
    total, current = 0, 0
    for ch in s:
        if ch in _CN_DIGITS:
            current = _CN_DIGITS[ch]
        elif ch == "十":
            total += (current or 1) * 10
            current = 0
        elif ch == "百":
            total += (current or 1) * 100
            current = 0
        else:
            return None
    return total + current


def _key(x: float) -> float:
    """Numbers compare at 9 significant digits: 82.9 x 1e8 is 8290000000.000001 in floating point."""
    return float(f"{x:.9g}")


def _cn_counts(text: str, start: int, end: int) -> bool:
    if text.startswith(_CN_COUNTED, end):
        return True
    before = text[start - 1] if start else ""
    after = text[end] if end < len(text) else ""
    return before == "第" or not (_is_cjk(before) or _is_cjk(after))


def extract_numbers(text: str, chinese: bool = True) -> list[float]:
    """Every number in a text, as floats; with a multiplier both the scaled and bare value."""
    text = unicodedata.normalize("NFKC", text)
    out: list[float] = []
    for m in _NUMBER.finditer(text):
        sign, whole, frac, mult = m.groups()
        value = float(whole.replace(",", "") + (frac or ""))
        if sign:
            value = -value
        out.append(value)
        if mult:
            out.append(value * _MULTIPLIERS[mult])
    for m in _CN_NUMBER.finditer(text) if chinese else ():
        value = _cn_to_int(m.group())
        if value is not None and m.group() not in ("十", "百") and _cn_counts(text, m.start(), m.end()):
            out.append(float(value))
    return out


# What may stand next to a number in a string that is "a number": currency symbols and codes before
# it; a currency word, a unit (rubricrl.data.domains.values.UNIT_WORDS and kin), a percent sign or a
# multiplier after it. Anything else ("about", "~", "约", "左右", "up to", "over", "<") is a hedge or
# a qualifier, and the string is no number.
_CURRENCY_BEFORE = r"(?:us\$|hk\$|nt\$|a\$|c\$|s\$|rmb|cny|usd|eur|gbp|jpy|hkd|人民币|百分之|[$¥€£₩₹+])"
_AFTER_WORDS = sorted({
    # currencies
    "元", "块", "块钱", "美元", "港元", "港币", "欧元", "日元", "英镑", "人民币", "美金", "rmb", "cny", "usd", "eur",
    "gbp", "jpy", "hkd", "yuan", "dollar", "dollars", "euro", "euros",
    # units (values.UNIT_WORDS plus the obvious neighbours)
    "h", "hr", "hrs", "hour", "hours", "小时", "个小时", "min", "mins", "minute", "minutes", "分钟", "s", "sec", "secs",
    "second", "seconds", "秒", "kg", "kgs", "kilogram", "kilograms", "千克", "公斤", "g", "gram", "grams", "克",
    "mg", "milligram", "milligrams", "毫克", "m2", "m²", "sqm", "squaremetre", "squaremetres", "squaremeter",
    "squaremeters", "平方米", "平米", "sqft", "squarefeet", "day", "days", "天", "week", "weeks", "周",
    "month", "months", "个月", "year", "years", "年", "star", "stars", "星", "分", "points",
    # percent and multipliers
    "%", "percent", "pct", "万", "亿", "千", "百万", "k", "m", "million", "billion", "thousand",
}, key=len, reverse=True)
_BEFORE_RE = re.compile(rf"{_CURRENCY_BEFORE}{{0,2}}")
_AFTER_RE = re.compile(rf"(?:{'|'.join(re.escape(w) for w in _AFTER_WORDS)}){{0,2}}")
UNIT_WHITELIST = frozenset(_AFTER_WORDS)


_NUMBER_MAX_CHARS = 200


def parse_number(value) -> float | None:
    """A number from a JSON value: numbers as is, numeric strings ('1,299.00', '¥30', '3.5万', '30 h').

    A string counts only when it is one number plus, at most, a currency and a unit or percent
    sign: 'about 2999', '~25', '约2999', '25左右', '12,99' (two numbers) and '2024年3月5日' are not.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if not isinstance(value, str):
        return None
    if len(value) > _NUMBER_MAX_CHARS and len(value.strip()) > _NUMBER_MAX_CHARS:
        return None  # no number with its currency and unit is this long: skip the scan of a huge value
    return _parse_number_str(value)


@_memo
def _parse_number_str(value: str) -> float | None:
    text = unicodedata.normalize("NFKC", value).strip()
    if _CN_NUMBER.fullmatch(text) and text not in ("十", "百"):
        return float(_cn_to_int(text))
    matches = list(_NUMBER.finditer(text))  # no Chinese numerals: "陈一鸣" is a name, not the number one
    if len(matches) != 1:
        return None
    m = matches[0]
    before = text[: m.start()].casefold().replace(" ", "")
    after = text[m.end():].casefold().replace(" ", "")
    if not (_BEFORE_RE.fullmatch(before) and _AFTER_RE.fullmatch(after)):
        return None
    sign, whole, frac, mult = m.groups()
    number = float(whole.replace(",", "") + (frac or ""))
    if sign:
        number = -number
    return number * _MULTIPLIERS[mult] if mult else number


def numbers_equal(a: float, b: float, rel: float = 1e-6) -> bool:
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-9)


# --- per-field rules: which conversions and reformattings a task asks for -------------------------

@dataclass(frozen=True)
class FieldRule:
    """How one property's values may differ from what the text writes, as the task asks.

    factors: unit-conversion factors a value may carry (value = written number x factor); 1.0 alone
    unless a constraint naming the field (or its description) names a unit of a conversion family.
    max_chars: the schema's maxLength (a string copy longer than it is no extraction).
    date / time: the task asks for YYYY-MM-DD / HH:MM (for this field or another: the format is the
    task's), so a reformatted date or time the text gives counts.
    """

    factors: tuple[float, ...] = (1.0,)
    max_chars: int | None = None
    date: bool = False
    time: bool = False


STRICT = FieldRule()

# Unit words -> the conversion family they open (both directions: kg <-> g, h <-> min, % <-> fraction).
_FAMILIES = (
    (re.compile(r"\b(?:grams?|kilo(?:gram)?s?|kgs?|milligrams?|mg)\b|克|公斤", re.I), (1e3, 1e-3)),
    (re.compile(r"\b(?:hours?|hrs?|minutes?|mins?|seconds?|secs?)\b|小时|分钟|秒", re.I), (60.0, 1 / 60.0)),
    (re.compile(r"\b(?:fractions?|percent(?:age)?s?|cents?)\b|百分|分之|美分", re.I), (100.0, 0.01)),
    (re.compile(r"(?<!ten[- ])\bthousands?\b|千", re.I), (1e3, 1e-3)),
    (re.compile(r"\bten[- ]thousands?\b|万", re.I), (1e4, 1e-4)),
    (re.compile(r"\bmillions?\b|百万", re.I), (1e6, 1e-6)),
    (re.compile(r"\bhundreds? of millions\b|\bhundred[- ]millions?\b|亿", re.I), (1e8, 1e-8)),
    (re.compile(r"\bbillions?\b|十亿", re.I), (1e9, 1e-9)),
)
# Words that look like units but are not a conversion ("without thousands separator", "24-hour").
_NOT_A_UNIT = re.compile(r"thousands?[- ]separators?|千位分隔符|千分位|\b(?:12|24)[- ]?hours?\b|(?:12|24)\s*小时制", re.I)
_STRINGY = re.compile(r"\bstrings?\b|字符串", re.I)
_ISO_DATE_WORDS = re.compile(r"yyyy-mm-dd|iso[- ]?8601|iso date", re.I)
_HHMM_WORDS = re.compile(r"\bhh:mm\b", re.I)


_IDENT = re.compile(r"[A-Za-z0-9_]+")


def _names(text: str, name: str) -> bool:
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", text) is not None


def _families(text: str) -> set[float]:
    text = _NOT_A_UNIT.sub(" ", text)
    out: set[float] = set()
    for pattern, factors in _FAMILIES:
        if pattern.search(text):
            out.update(factors)
    return out


def field_rules(constraints: Sequence[str], properties: Mapping) -> dict[str, FieldRule]:
    """Per property, what a value may be besides a span of the text (see FieldRule).

    A constraint applies to the properties it names ("Give weight_g in grams."); one that asks for a
    string ('as a string with two decimals') is a format, not a conversion, and grants no factor.
    The property's description or title counts when it names a unit ("Weight in grams").
    """
    idents = {n for n in properties if _IDENT.fullmatch(n)}
    others = sorted((n for n in properties if n not in idents), key=len, reverse=True)

    def without_names(c: str) -> str:
        """The constraint with the field names blanked: "weight_kg" must not read as a unit."""
        c = _IDENT.sub(lambda m: " " if m.group() in idents else m.group(), c)
        for n in others:
            c = c.replace(n, " ")
        return c

    out: dict[str, FieldRule] = {}
    for name, sub in properties.items():
        sub = sub if isinstance(sub, dict) else {}
        items = sub.get("items") if isinstance(sub.get("items"), dict) else {}
        factors: set[float] = {1.0}
        date = time = False
        for c in constraints:
            if not isinstance(c, str) or not _names(c, name):
                continue
            plain = without_names(c)
            if not _STRINGY.search(plain):
                factors |= _families(plain)
            date = date or bool(_ISO_DATE_WORDS.search(plain))
            time = time or bool(_HHMM_WORDS.search(plain))
        for key in ("description", "title"):
            if isinstance(sub.get(key), str):
                factors |= _families(sub[key])
        for schema in (sub, items):
            fmt, pattern = schema.get("format"), schema.get("pattern")
            date = date or fmt in ("date", "date-time") or (isinstance(pattern, str) and r"\d{4}-" in pattern)
            time = time or fmt == "time" or (isinstance(pattern, str) and ":" in pattern and r"\d" in pattern
                                             and r"\d{4}-" not in pattern)
        limit = sub.get("maxLength", items.get("maxLength"))
        limit = limit if isinstance(limit, int) and not isinstance(limit, bool) and limit >= 0 else None
        out[name] = FieldRule(tuple(sorted(factors)), limit, date, time)
    # A date or time format the task asks for anywhere is a way the task writes dates: a stated day in
    # that format in another field is a value from the text in the wrong place (wrong, not invented).
    any_date, any_time = any(r.date for r in out.values()), any(r.time for r in out.values())
    return {name: replace(r, date=r.date or any_date, time=r.time or any_time) for name, r in out.items()}


@lru_cache(maxsize=2048)
def _rules_cached(constraints: tuple, properties_json: str) -> dict[str, FieldRule]:
    return field_rules(constraints, json.loads(properties_json))


def rules_for(task) -> dict[str, FieldRule]:
    """field_rules for a Task, cached on its constraints and properties (do not mutate the result)."""
    try:
        key = json.dumps(task.properties, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError):
        return field_rules(tuple(task.constraints), task.properties)
    return _rules_cached(tuple(task.constraints), key)


# --- copying --------------------------------------------------------------------------------------

# A value copied from the text is an extraction only up to a field value's size. Limits chosen so
# that no gold value of the generated data (seed 0, 800 + 200 tasks) comes near them; see
# tests/test_grounding.py for the measured maxima.
COPY_MAX_CHARS = 80  # Latin text: more than 80 characters *and* more than 12 words is a passage
COPY_MAX_WORDS = 12
COPY_MAX_CJK_CHARS = 40  # a value with CJK characters: more than 40 characters (spaces not counted)
_ABBREVIATIONS = frozenset({"mr", "mrs", "ms", "dr", "st", "jr", "sr", "vs", "inc", "ltd", "co", "corp", "no", "prof",
                            "mt", "ft", "approx", "dept", "est", "fig", "etc", "e.g", "i.e", "u.s", "a.m", "p.m"})
# A '. ' end carries the word before it (group 1: a run of letters and dots, matched from its start
# so that each run is scanned once): initials and abbreviations do not end a sentence.
_SENTENCE_END = re.compile(r"[。！？!?]+|\n+|(?<![A-Za-z.])([A-Za-z.]*)\.(?=\s)")
_NEXT_CHAR = re.compile(r"\s*(\S?)")


def split_sentences(text: str) -> list[str]:
    """The text cut at sentence ends (。！？!? a line break, or '. ' before a capital or digit that
    does not close an abbreviation or an initial)."""
    return list(iter_sentences(text))


def iter_sentences(text: str) -> Iterator[str]:
    """split_sentences, one sentence at a time (a caller may stop early)."""
    text = unicodedata.normalize("NFKC", text)
    start = 0
    for m in _SENTENCE_END.finditer(text):
        cut = m.start()
        if m.group(1) is not None:
            word, cut = m.group(1).casefold(), m.end() - 1
            nxt = _NEXT_CHAR.match(text, m.end()).group(1)
            if not nxt or len(word.replace(".", "")) == 1 or word in _ABBREVIATIONS:
                continue
            if not (nxt.isupper() or nxt.isdigit() or _is_cjk(nxt) or nxt in "\"'“‘("):
                continue
        if text[start:cut].strip():
            yield text[start:cut]
        start = m.end()
    if text[start:].strip():
        yield text[start:]


_MAY_END = re.compile(r"[.!?。！？｡\n]")


@_memo
def _crosses_sentences(value: str) -> bool:
    return bool(_MAY_END.search(value)) and len(list(islice(filter(normalize_text, iter_sentences(value)), 2))) > 1


def copy_problem(value: str, max_chars: int | None = None, norm: str | None = None) -> str | None:
    """Why a string copies more than a field value needs (None if it does not)."""
    norm = normalize_text(value) if norm is None else norm
    if _crosses_sentences(value):
        return "copies text across a sentence boundary"
    if max_chars is not None and len(value) > max_chars:
        return f"longer than the schema's maxLength {max_chars}"
    if _CJK.search(norm):
        n = len(norm.replace(" ", ""))
        if n > COPY_MAX_CJK_CHARS:
            return f"{n} characters copied: a passage, not a field value"
    elif len(norm) > COPY_MAX_CHARS and len(norm.split(" ")) > COPY_MAX_WORDS:
        return f"{len(norm.split(' '))} words copied: a passage, not a field value"
    return None


def _alnum(ch: str) -> bool:
    return ch.isascii() and ch.isalnum()


def _cuts(hay: str, at: int, step: int, edge: str, run: str) -> bool:
    """Does a match whose `edge` character sits next to hay[at] cut a word or a number in two?
    Letters next to letters cut a word ('Air' in 'AirBeat'); a number (`run`, the needle's edge
    token, all digits) next to a digit or a decimal point and digit cuts a number ('29' in '1299',
    '99' in '12.99'); a code may sit against a number ('3U1696' in '2026.11.133U1696')."""
    if not 0 <= at < len(hay):
        return False
    ch = hay[at]
    if edge.isascii() and edge.isalpha():
        return ch.isascii() and ch.isalpha()
    if not (edge.isdigit() and run.isdigit()):
        return False
    if ch.isdigit():
        return True
    beyond = at + step
    return ch == "." and 0 <= beyond < len(hay) and hay[beyond].isdigit()


_EDGE_RUN = re.compile(r"[a-z0-9]+")


def _bounded_in(needle: str, hay: str) -> bool:
    """needle occurs in hay and does not cut a Latin word or a number in two (see _cuts)."""
    if not needle:
        return True
    runs = _EDGE_RUN.findall(needle)
    head_run = runs[0] if runs and needle.startswith(runs[0]) else ""
    tail_run = runs[-1] if runs and needle.endswith(runs[-1]) else ""
    i = hay.find(needle)
    while i >= 0:
        j = i + len(needle)
        if not _cuts(hay, i - 1, -1, needle[0], head_run) and not _cuts(hay, j, 1, needle[-1], tail_run):
            return True
        i = hay.find(needle, i + 1)
    return False


# --- dates and times as the text writes them --------------------------------------------------------

_MONTHS = {m: i + 1 for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct",
                                           "nov", "dec"))}
_MONTH = r"(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?"
_DATE_PATTERNS = (
    (re.compile(r"(?<!\d)(\d{4})\s*年\s*(\d{1,2})\s*月\s*(\d{1,2})\s*[日号]"), "ymd"),
    (re.compile(r"(?<![\d.])(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})(?![\d])"), "ymd"),
    (re.compile(rf"\b{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.I), "mdy"),
    (re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH},?\s+(\d{{4}})\b", re.I), "dmy"),
)
_TIME_PATTERNS = (
    re.compile(r"(凌晨|早上|早晨|上午|中午|下午|傍晚|晚上)?\s*(?<!\d)(\d{1,2}):(\d{2})(?!\d)\s*(am|pm|a\.m\.|p\.m\.)?", re.I),
    re.compile(r"(?<![\d:])(\d{1,2})\s*(am|pm|a\.m\.|p\.m\.)", re.I),
    re.compile(r"(凌晨|早上|早晨|上午|中午|下午|傍晚|晚上)?(\d{1,2})点(半|(\d{1,2})分)?"),
)


def _iso(y: int, m: int, d: int) -> str | None:
    return f"{y:04d}-{m:02d}-{d:02d}" if 1 <= m <= 12 and 1 <= d <= 31 else None


def text_dates(text: str) -> frozenset[str]:
    """The dates a text writes with their year, as YYYY-MM-DD."""
    text = unicodedata.normalize("NFKC", text)
    out = set()
    for pattern, order in _DATE_PATTERNS:
        for m in pattern.finditer(text):
            if order == "ymd":
                y, mo, d = (int(g) for g in m.groups())
            elif order == "mdy":
                mo, d, y = _MONTHS[m.group(1)[:3].casefold()], int(m.group(2)), int(m.group(3))
            else:
                d, mo, y = int(m.group(1)), _MONTHS[m.group(2)[:3].casefold()], int(m.group(3))
            iso = _iso(y, mo, d)
            if iso:
                out.add(iso)
    return frozenset(out)


def _hour24(h: int, marker: str | None) -> int:
    marker = (marker or "").casefold().replace(".", "")
    if marker == "am":
        return 0 if h == 12 else h
    if marker == "pm":
        return h if h == 12 else h + 12
    if marker in ("下午", "傍晚", "晚上"):
        return h + 12 if h < 12 else h
    if marker == "中午":
        return h + 12 if h < 11 else h
    if marker == "凌晨" and h == 12:
        return 0
    return h


def text_times(text: str) -> frozenset[str]:
    """The clock times a text writes, as 24-hour HH:MM ('3:30 pm', '下午3点半' -> 15:30)."""
    text = unicodedata.normalize("NFKC", text)
    out = set()
    for m in _TIME_PATTERNS[0].finditer(text):
        part, h, mi, ampm = m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)
        if ampm and not 1 <= h <= 12:
            continue
        out.add((_hour24(h, ampm or part), mi))
    for m in _TIME_PATTERNS[1].finditer(text):
        h = int(m.group(1))
        if 1 <= h <= 12:
            out.add((_hour24(h, m.group(2)), 0))
    for m in _TIME_PATTERNS[2].finditer(text):
        part, h = m.group(1), int(m.group(2))
        mi = 30 if m.group(3) == "半" else int(m.group(4) or 0)
        out.add((_hour24(h, part), mi))
    return frozenset(f"{h:02d}:{mi:02d}" for h, mi in out if 0 <= h <= 23 and 0 <= mi <= 59)


_ISO_VALUE = re.compile(r"\d{4}-\d{2}-\d{2}")
_HHMM_VALUE = re.compile(r"(\d{1,2}):(\d{2})")


# --- the source -----------------------------------------------------------------------------------

# Scalings a value may show that the task did not ask for (only to explain a rejection).
_OTHER_UNITS = (1e3, 1e-3, 60.0, 1 / 60.0, 100.0, 0.01, 1e4, 1e-4, 1e6, 1e-6, 1e8, 1e-8)


class Source:
    """A source text prepared once for many grounding checks."""

    __slots__ = ("text", "norm", "compact", "numbers", "sentences", "_dates", "_times", "_cache")

    def __init__(self, text: str):
        self.text = text
        self.norm = normalize_text(text)
        self.compact = _squeeze(self.norm)
        self.numbers = frozenset(_key(n) for n in extract_numbers(text))
        # (normalised, squeezed) per sentence: a span must lie within one sentence.
        self.sentences = tuple((n, _squeeze(n)) for n in (normalize_text(s) for s in split_sentences(text)) if n)
        self._dates: frozenset[str] | None = None
        self._times: frozenset[str] | None = None
        self._cache: dict = {}

    @property
    def dates(self) -> frozenset[str]:
        if self._dates is None:
            self._dates = text_dates(self.text)
        return self._dates

    @property
    def times(self) -> frozenset[str]:
        if self._times is None:
            self._times = text_times(self.text)
        return self._times

    def has_number(self, x: float, factors: Sequence[float] = (1.0,)) -> bool:
        """x is a number the text writes, or one of them times a factor the task asks for."""
        return any(_key(x / f) in self.numbers for f in factors)

    def supports(self, value, rule: FieldRule | None = STRICT) -> bool:
        """True if a non-null scalar or every element of an array is stated by the source, read with
        the field's rule (unit factors, copy limit, date/time formats the task asks for; None: STRICT)."""
        rule = rule or STRICT
        if isinstance(value, (str, list, dict)) and len(value) > 1000:
            return self._supports(value, rule)  # no cache entry holding a huge key
        key = (type(value).__name__, repr(value), rule)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._supports(value, rule)
            if len(self._cache) < 4096 and len(key[1]) <= 1000:
                self._cache[key] = hit
        return hit

    def _supports(self, value, rule: FieldRule) -> bool:
        if value is None:
            return True
        if isinstance(value, bool):
            return True  # a yes/no answer is not a text span; only a reference can check it
        if isinstance(value, (int, float)):
            return math.isfinite(value) and self.has_number(float(value), rule.factors)
        if isinstance(value, list):
            return all(self.supports(v, rule) for v in value)
        if isinstance(value, dict):
            return all(self.supports(v, rule) for v in value.values())
        if isinstance(value, str):
            return self._supports_string(value, rule)
        return False

    def in_one_sentence(self, value: str, norm: str | None = None) -> bool:
        """The value (normalised) is a span of one sentence of the text, not cutting a word or number."""
        norm = normalize_text(value) if norm is None else norm
        squeezed = _squeeze(norm)
        in_norm, in_compact = norm in self.norm, squeezed in self.compact  # cheap test first
        return (in_norm or in_compact) and any(
            (in_norm and _bounded_in(norm, n)) or (in_compact and _bounded_in(squeezed, c)) for n, c in self.sentences)

    def _supports_string(self, value: str, rule: FieldRule) -> bool:
        norm = normalize_text(value)
        if not norm:
            return True
        num = parse_number(value)
        if num is not None:
            return self.has_number(num, rule.factors) or self.in_one_sentence(value, norm)
        if copy_problem(value, rule.max_chars, norm):
            return False
        if self.in_one_sentence(value, norm):
            return True
        stripped = unicodedata.normalize("NFKC", value).strip()
        if rule.date and _ISO_VALUE.fullmatch(stripped):
            return stripped in self.dates
        if rule.time:
            m = _HHMM_VALUE.fullmatch(stripped)
            if m:
                return f"{int(m.group(1)):02d}:{m.group(2)}" in self.times
        # Multi-word values: every word in one sentence (word order may differ: "Chen Wei" / "Wei Chen").
        tokens = [t for t in norm.split(" ") if t]
        if len(tokens) > 1:
            return any(all(_bounded_in(t, n) for t in tokens) for n, _ in self.sentences)
        return False

    def why_not(self, value, rule: FieldRule = STRICT) -> str:
        """A short reason for an unsupported value (for judge notes)."""
        if isinstance(value, str):
            problem = copy_problem(value, rule.max_chars) if parse_number(value) is None else None
            if problem:
                return problem
            if normalize_text(value) in self.norm and not self.in_one_sentence(value):
                return "copies text across a sentence boundary"
        num = parse_number(value)
        if num is not None and any(self.has_number(num, (f,)) for f in _OTHER_UNITS):
            return "is a number of the source in another unit, a conversion the task does not ask for"
        return "not found in the source"


@lru_cache(maxsize=512)
def source_for(text: str) -> Source:
    return Source(text)


def values_match(pred, gold) -> float:
    """Credit in [0, 1] for a predicted value against the gold one (normalised comparison).

    A hedged number ('about 2999') is no number (parse_number), so it earns nothing against 2999.
    """
    if gold is None or pred is None:
        return 1.0 if gold is None and pred is None else 0.0
    if isinstance(gold, bool) or isinstance(pred, bool):
        return 1.0 if pred is gold else 0.0
    if isinstance(gold, list):
        if not isinstance(pred, list):
            return 0.0
        if not gold and not pred:
            return 1.0
        return _list_f1(pred, gold)
    if isinstance(gold, dict):
        if not isinstance(pred, dict) or not gold:
            return float(pred == gold)
        return sum(values_match(pred.get(k), v) for k, v in gold.items()) / len(gold)
    gnum, pnum = parse_number(gold), parse_number(pred)
    if isinstance(gold, (int, float)) or (gnum is not None and isinstance(pred, (int, float))):
        return 1.0 if gnum is not None and pnum is not None and numbers_equal(gnum, pnum) else 0.0
    if isinstance(pred, str) and isinstance(gold, str):
        p, g = _compact(pred), _compact(gold)
        if p == g:
            return 1.0
        if gnum is not None and pnum is not None and numbers_equal(gnum, pnum):
            # Same number but maybe another unit: equal only if the rest agrees too.
            return 1.0 if _strip_numbers(p) == _strip_numbers(g) else 0.5
        return 0.0
    return 0.0


def _strip_numbers(s: str) -> str:
    return _NUMBER.sub("", s)


def _list_f1(pred: list, gold: list) -> float:
    unmatched = list(gold)
    hits = 0.0
    for p in pred:
        best, best_i = 0.0, -1
        for i, g in enumerate(unmatched):
            c = values_match(p, g)
            if c > best:
                best, best_i = c, i
        if best_i >= 0:
            hits += best
            unmatched.pop(best_i)
    if not pred or not gold:
        return 0.0
    precision, recall = hits / len(pred), hits / len(gold)
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)
