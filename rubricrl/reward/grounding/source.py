"""A source text prepared once for many grounding checks, and the normalised match of a value against gold."""

from __future__ import annotations

import math
import unicodedata
from functools import lru_cache
from typing import Sequence

from rubricrl.reward.grounding.dates import _HHMM_VALUE, _ISO_VALUE, text_dates, text_times
from rubricrl.reward.grounding.fields import STRICT, FieldRule
from rubricrl.reward.grounding.numbers import _NUMBER, _key, extract_numbers, numbers_equal, parse_number
from rubricrl.reward.grounding.text import _bounded_in, _compact, _squeeze, copy_problem, normalize_text, split_sentences

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

    def mentions(self, phrase: str) -> bool:
        """The phrase (normalised: case, width, punctuation, whitespace) occurs anywhere in the text without cutting
        a word or number in two ("refund" is not in "refunded"; Chinese needs no word boundary)."""
        norm = normalize_text(phrase)
        return bool(norm) and (_bounded_in(norm, self.norm) or _bounded_in(_squeeze(norm), self.compact))

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
