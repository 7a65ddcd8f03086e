"""Numbers as a text writes them: thousands separators, decimals, multipliers (万, 亿, k, million), Chinese numerals
before a measure word, and what may stand beside a number in a value that is one (a currency, a unit); a hedge
('about 2999', '约25') makes a value no number."""

from __future__ import annotations

import math
import re
import unicodedata

from rubricrl.reward.grounding.text import _is_cjk, _memo

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



_EN_UNITS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve thirteen "
                                        "fourteen fifteen sixteen seventeen eighteen nineteen".split())}
_EN_TENS = {w: 10 * i for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), start=2)}
_EN_WORDS = re.compile(r"\b(?:(" + "|".join(_EN_TENS) + r")(?:[\s-](" + "|".join(list(_EN_UNITS)[1:10]) + r"))?|("
                       + "|".join(_EN_UNITS) + r"))(?:[\s-](hundred))?\b", re.I)


def word_numbers(text: str) -> list[float]:
    """English numbers written as words, up to 999 ("three-night", "twenty-four months", "two hundred"): what a
    source states when it spells a number out."""
    out = []
    for m in _EN_WORDS.finditer(text):
        tens, unit, alone, hundred = (g.casefold() if g else None for g in m.groups())
        value = _EN_TENS[tens] + (_EN_UNITS[unit] if unit else 0) if tens else _EN_UNITS[alone]
        out.append(float(value * 100 if hundred else value))
    return out


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


def number_spans(text: str) -> list[tuple[int, float]]:
    """(offset, value) of every number written in digits in an NFKC-normalised text (separators and a decimal part
    read as extract_numbers reads them; no multiplier applied, no Chinese numerals)."""
    out = []
    for m in _NUMBER.finditer(text):
        sign, whole, frac, _ = m.groups()
        value = float(whole.replace(",", "") + (frac or ""))
        out.append((m.start(2), -value if sign else value))
    return out


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
