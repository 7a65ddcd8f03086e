"""What a domain is made of: fields (what a schema may ask), facts (a value and how the text
writes it) and the record a template renders from.

The record remembers what the template actually said, so the gold answer is built from the text
that exists: a fact the template never rendered becomes a gold null, and a near-mention is only
tagged as a hard case when its sentence was written.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass
from typing import Any

LANGS = ("en", "zh")
_FORMATTER = string.Formatter()


@dataclass(frozen=True)
class Fact:
    value: Any  # canonical value: float, int, str, list[str], bool, (y, m, d), (h, m)
    surface: str = ""  # exactly how the text writes it ("" for enums and booleans)
    unit: str = ""  # currency code or measurement unit ("USD", "CNY", "kg", "h", "m2", ...)


@dataclass(frozen=True)
class Conv:
    """Another unit a schema may ask for: gold = value * factor (a grounding unit factor)."""

    names: tuple[str, ...]
    factor: float
    unit: tuple[str, str]  # (English, Chinese) unit words for the constraint
    integer: bool = False
    source: str = ""  # only for facts in this unit or currency ("" = any)


@dataclass(frozen=True)
class Field:
    key: str
    kind: str  # text | list | int | money | qty | percent | rating | date | time | enum | bool
    names: tuple[str, ...]  # property-name synonyms for the schema
    desc: tuple[str, str]  # (English, Chinese) description
    p_absent: float = 0.0  # chance the text leaves it out (gold null)
    p_schema: float = 0.6  # chance a schema asks for it
    requires: str = ""  # an earlier field without which this one is never said (old price -> price)
    implied_by: tuple[str, ...] = ()  # fields that, once all said, say this one (brand in the product name)
    enum: tuple[str, ...] = ()
    conv: tuple[Conv, ...] = ()


def placeholders(phrase: str) -> list[str]:
    return [name for _, name, _, _ in _FORMATTER.parse(phrase) if name]


class Record:
    """The facts of one text; templates render it through say/line/by_value."""

    def __init__(self, rng: random.Random, lang: str, fields: list[Field], facts: dict[str, Fact],
                 near_bank: dict[str, list[str]]):
        self.rng, self.lang, self.facts = rng, lang, facts
        self.absent: dict[str, bool] = {}
        for f in fields:
            if f.key not in facts or rng.random() < f.p_absent or (f.requires and f.requires in self.absent):
                self.absent[f.key] = True
        self.near_bank = near_bank
        # Only facts that exist can be almost-mentioned (no battery talk for an air fryer).
        self.near = [k for k in self.absent if k in facts and k in near_bank and rng.random() < 0.7]
        self.implies = [(f.key, f.implied_by) for f in fields if f.implied_by and f.key not in self.absent]
        self.said: dict[str, bool] = {}
        self.said_near: dict[str, bool] = {}

    def has(self, key: str) -> bool:
        return key in self.facts and key not in self.absent

    def pick(self, options):
        return self.rng.choice(options)

    def say(self, *phrases: str) -> str:
        """One phrase whose facts are all present (preferring facts not yet said), formatted."""
        ok = [p for p in phrases if all(self.has(k) for k in placeholders(p))]
        pool = [p for p in ok if not any(k in self.said for k in placeholders(p))] or ok
        if not pool:
            return ""
        phrase = self.rng.choice(pool)
        for k in placeholders(phrase):
            self.said[k] = True
        for k, sources in self.implies:
            if all(s in self.said for s in sources):
                self.said[k] = True
        return phrase.format_map({k: self.facts[k].surface for k in placeholders(phrase)})

    def line(self, key: str, *phrases: str, near: tuple[str, ...] = ()) -> str:
        """Say `key` once; if it is absent but near-mentioned, an almost-mention instead."""
        if key in self.said:
            return ""
        if self.has(key):
            return self.say(*[p for p in phrases if key in placeholders(p)])
        if key in self.near and key not in self.said_near:
            phrase = self.say(*(near or self.near_bank[key]))
            if phrase:
                self.said_near[key] = True
            return phrase
        return ""

    def by_value(self, key: str, options: dict) -> str:
        """A phrase chosen by the value of an enum or boolean fact (which has no surface)."""
        if key in self.said:
            return ""
        if not self.has(key):
            return self.line(key)  # the almost-mention, if any
        phrase = self.say(*options[self.facts[key].value])
        if phrase:
            self.said[key] = True
        return phrase

    def capture(self, key: str, text: str) -> str:
        """Make a piece of rendered text a fact of its own (a headline or title)."""
        if text:
            self.facts[key] = Fact(text, text)
            self.absent.pop(key, None)
            self.said[key] = True
        return text

    def rendered(self, key: str) -> bool:
        return key in self.said


def prose(parts: list[str], lang: str) -> str:
    parts = [p.strip() for p in parts if p and p.strip()]
    return ("" if lang == "zh" else " ").join(parts)


def lines(parts: list[str]) -> str:
    return "\n".join(p for p in parts if p and p.strip())


def bullets(parts: list[str], marker: str) -> list[str]:
    return [f"{marker}{p}" for p in parts if p and p.strip()]
