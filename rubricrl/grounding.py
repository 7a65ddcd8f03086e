"""Source grounding: is an extracted value supported by the source text?

Normalises case, width (NFKC: full-width Chinese digits and punctuation), whitespace, thousands
separators, decimals and numbers with units or Chinese multipliers (万, 亿). Used by the
deterministic faithfulness judge and the invented-value penalty, so it must be fast: a Source is
built once per task and reused for every response.
"""

from __future__ import annotations

import math
import re
import unicodedata
from functools import lru_cache

_WS = re.compile(r"\s+")
# Punctuation that carries no meaning for matching (kept: digits, letters, CJK, . and -).
_PUNCT = re.compile(r"[\"'`“”‘’「」『』《》()\[\]{}<>,，、;；:：!！?？。·•*_~|/\\]+")
# A number: optional sign, digits with optional thousands separators, optional decimals,
# optional multiplier suffix.
# A minus sign counts only after a separator: in "8000元-16000元" the dash is a range.
_NUMBER = re.compile(
    r"((?<![^\s(:=：,，;；])[-−])?(?<![A-Za-z0-9.])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?\s*"
    r"(万|亿|千|百万|k(?![a-zA-Z])|K(?![a-zA-Z])|M(?![a-zA-Z])|million|billion|thousand)?"
)
_MULTIPLIERS = {
    "万": 1e4, "亿": 1e8, "千": 1e3, "百万": 1e6, "k": 1e3, "K": 1e3, "M": 1e6,
    "million": 1e6, "billion": 1e9, "thousand": 1e3,
}
_CN_DIGITS = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_CN_NUMBER = re.compile(r"[零一二两三四五六七八九十百]+")
# Unit conversions an extraction may legitimately apply (kg->g, h->min, ratio->percent, ...).
_UNIT_FACTORS = (1.0, 1e3, 1e-3, 60.0, 1 / 60.0, 100.0, 0.01, 1e4, 1e-4)


def normalize_text(s: str) -> str:
    s = unicodedata.normalize("NFKC", s).casefold()
    s = _PUNCT.sub(" ", s)
    return _WS.sub(" ", s).strip()


def _compact(s: str) -> str:
    """Normalised text without spaces: Chinese has none, and '30 h' vs '30h' should match."""
    return normalize_text(s).replace(" ", "")


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
        if value is not None and m.group() not in ("十", "百"):
            out.append(float(value))
    return out


def parse_number(value) -> float | None:
    """A number from a JSON value: numbers as is, numeric strings ('1,299.00', '¥30', '3.5万')."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        text = unicodedata.normalize("NFKC", value).strip()
        if _CN_NUMBER.fullmatch(text) and text not in ("十", "百"):
            return float(_cn_to_int(text))
        nums = extract_numbers(text, chinese=False)  # "陈一鸣" is a name, not the number one
        stripped = _NUMBER.sub("", text).strip()
        # Only a string that is essentially one number (plus a unit/currency) counts.
        if nums and len(stripped) <= 6:
            return nums[-1] if len(nums) > 1 and nums[-1] != nums[0] else nums[0]
    return None


def numbers_equal(a: float, b: float, rel: float = 1e-6) -> bool:
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-9)


class Source:
    """A source text prepared once for many grounding checks."""

    __slots__ = ("text", "norm", "compact", "numbers", "_cache")

    def __init__(self, text: str):
        self.text = text
        self.norm = normalize_text(text)
        self.compact = self.norm.replace(" ", "")
        self.numbers = frozenset(_key(n) for n in extract_numbers(text))
        self._cache: dict = {}

    def has_number(self, x: float, allow_unit_conversion: bool = False) -> bool:
        factors = _UNIT_FACTORS if allow_unit_conversion else (1.0,)
        for f in factors:
            if _key(x / f) in self.numbers:
                return True
        return False

    def supports(self, value) -> bool:
        """True if a non-null scalar or every element of an array is found in the source."""
        key = (type(value).__name__, repr(value))
        hit = self._cache.get(key)
        if hit is None:
            hit = self._supports(value)
            if len(self._cache) < 4096:
                self._cache[key] = hit
        return hit

    def _supports(self, value) -> bool:
        if value is None:
            return True
        if isinstance(value, bool):
            return True  # a yes/no answer is not a text span; only a reference can check it
        if isinstance(value, (int, float)):
            return self.has_number(float(value), allow_unit_conversion=True)
        if isinstance(value, list):
            return all(self.supports(v) for v in value)
        if isinstance(value, dict):
            return all(self.supports(v) for v in value.values())
        if isinstance(value, str):
            return self._supports_string(value)
        return False

    def _supports_string(self, value: str) -> bool:
        norm = normalize_text(value)
        if not norm:
            return True
        if norm in self.norm or norm.replace(" ", "") in self.compact:
            return True
        num = parse_number(value)
        if num is not None and self.has_number(num, allow_unit_conversion=True):
            return True
        # Multi-word values: every content token must be in the source (word order may differ).
        tokens = [t for t in norm.split(" ") if t]
        if len(tokens) > 1:
            return all(t in self.norm for t in tokens)
        return False


@lru_cache(maxsize=512)
def source_for(text: str) -> Source:
    return Source(text)


def values_match(pred, gold) -> float:
    """Credit in [0, 1] for a predicted value against the gold one (normalised comparison)."""
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
