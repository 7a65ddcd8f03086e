"""Per-field rules: which unit conversions, copy limit and date/time formats a task asks for each property."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Mapping, Sequence

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
