"""One field of one task: the property name, its JSON Schema, the gold value and the constraint
that goes with the chosen type variant (number vs two-decimal string, kg vs grams, ISO dates...)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from rubricrl.data.domains.base import Conv, Fact, Field
from rubricrl.data.domains.values import UNIT_WORDS

TWO_DECIMALS = r"^\d+\.\d{2}$"
PERCENT = r"^-?\d+(\.\d+)?%$"
ISO_DATE = r"^\d{4}-\d{2}-\d{2}$"
HHMM = r"^([01]\d|2[0-3]):[0-5]\d$"

# (English, Chinese) constraint wordings; {name} is the property, {unit} a unit word.
_SAY = {
    "two_decimals": ('Write {name} as a string with exactly two decimals, without currency symbol or '
                     'thousands separator (e.g. "1299.00").',
                     "{name} 写成保留两位小数的字符串，不带货币符号和千位分隔符（例如 \"1299.00\"）。"),
    "as_written": ("Copy {name} exactly as it is written in the text, with its currency symbol or unit.",
                   "{name} 按原文照抄，保留货币符号或单位。"),
    "in_unit": ("Give {name} in {unit}.", "{name} 以{unit}为单位。"),
    "in_unit_int": ("Give {name} in {unit}, as a whole number.", "{name} 以{unit}为单位，填整数。"),
    "plain_number": ("Give {name} as a plain number, without currency symbol or unit.",
                     "{name} 只填数字，不带货币符号或单位。"),
    "percent_number": ('Give {name} as a number of percent (3.8% -> 3.8).', "{name} 填百分数的数值（3.8% 填 3.8）。"),
    "fraction": ("Give {name} as a fraction, not a percentage (3.8% -> 0.038).",
                 "{name} 写成小数而不是百分数（3.8% 写成 0.038）。"),
    "percent_string": ('Write {name} as a percentage string such as "3.8%".', '{name} 写成带百分号的字符串，如 "3.8%"。'),
    "iso_date": ("Write {name} as YYYY-MM-DD.", "{name} 使用 YYYY-MM-DD 格式。"),
    "hhmm": ("Write {name} in 24-hour HH:MM format.", "{name} 使用 24 小时制 HH:MM 格式。"),
    "date_as_written": ("Copy {name} as the text writes it.", "{name} 按原文的写法填写。"),
    "list": ("List {name} as separate strings, worded as in the text.", "{name} 每项单独一个字符串，用原文的说法。"),
}


@dataclass
class Built:
    name: str
    schema: dict
    gold: object
    constraints: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    derived: bool = False  # the gold is a reformatted value (ISO date, 24h time), not a text span


def build(rng: random.Random, f: Field, fact: Fact, lang: str, present: bool, nullable: bool) -> Built:
    """The property for field `f`; `fact` may be a hidden one (present=False: gold null)."""
    out = _BUILDERS[f.kind](rng, f, fact, lang)
    if not present:
        out.gold = None
    if nullable:
        out.schema = _nullable(out.schema)
    if rng.random() < 0.45:
        out.schema = {**out.schema, "description": f.desc[1 if lang == "zh" else 0]}
    out.constraints = [c.format(name=out.name) for c in out.constraints]
    return out


def _nullable(schema: dict) -> dict:
    schema = dict(schema)
    schema["type"] = [schema["type"], "null"]
    if "enum" in schema:
        schema["enum"] = [*schema["enum"], None]
    return schema


def _say(key: str, lang: str, unit: str = "") -> str:
    return _SAY[key][1 if lang == "zh" else 0].replace("{unit}", unit)


def _number(x: float):
    """Round away float noise; whole numbers become ints (1200.0000000002 -> 1200)."""
    x = round(x, 6)
    return int(x) if x == int(x) else x


def _convs(f: Field, fact: Fact) -> list[Conv]:
    """Conversions that apply to this fact's unit and give an exact value (130 min is no clean hours)."""
    return [c for c in f.conv if c.source in ("", fact.unit)
            and abs(fact.value * c.factor - round(fact.value * c.factor, 4)) < 1e-9]


def _converted(rng, f: Field, fact: Fact, lang: str, conv: Conv) -> Built:
    gold = _number(fact.value * conv.factor)
    integer = conv.integer and isinstance(gold, int)
    unit = conv.unit[1 if lang == "zh" else 0]
    return Built(rng.choice(conv.names), {"type": "integer" if integer else "number"}, gold,
                 [_say("in_unit_int" if integer else "in_unit", lang, unit)], ["unit_conversion"])


def _text(rng, f, fact, lang):
    return Built(rng.choice(f.names), {"type": "string"}, fact.value)


def _list(rng, f, fact, lang):
    schema = {"type": "array", "items": {"type": "string"}}
    if rng.random() < 0.3:
        schema["minItems"] = 1
    # The wording constraint always: without it a paraphrased item would be as right as the gold.
    return Built(rng.choice(f.names), schema, list(fact.value), [_say("list", lang)])


def _int(rng, f, fact, lang):
    schema = {"type": "integer", "minimum": 0} if rng.random() < 0.3 else {"type": "integer"}
    return Built(rng.choice(f.names), schema, int(fact.value))


def _enum(rng, f, fact, lang):
    return Built(rng.choice(f.names), {"type": "string", "enum": list(f.enum)}, fact.value)


def _bool(rng, f, fact, lang):
    return Built(rng.choice(f.names), {"type": "boolean"}, fact.value)


def _money(rng, f, fact, lang):
    variants = ["number", "number", "two_decimals", "two_decimals", "as_written"] + _convs(f, fact)
    v = rng.choice(variants)
    if isinstance(v, Conv):
        return _converted(rng, f, fact, lang, v)
    name = rng.choice(f.names)
    if v == "number":
        if rng.random() < 0.3:
            name = f"{name}_{fact.unit.lower()}"
        return Built(name, {"type": "number"}, _number(fact.value),
                     [_say("plain_number", lang)] if rng.random() < 0.4 else [])
    if v == "two_decimals":
        return Built(name, {"type": "string", "pattern": TWO_DECIMALS}, f"{fact.value:.2f}",
                     [_say("two_decimals", lang)], ["format_constraint"])
    return Built(name, {"type": "string"}, fact.surface, [_say("as_written", lang)])


def _qty(rng, f, fact, lang):
    v = rng.choice(["number", "number", "as_written"] + _convs(f, fact) * 2)
    if isinstance(v, Conv):
        return _converted(rng, f, fact, lang, v)
    name = rng.choice(f.names)
    if v == "as_written":
        return Built(name, {"type": "string"}, fact.surface, [_say("as_written", lang)])
    unit = UNIT_WORDS[fact.unit][1 if lang == "zh" else 0][0]
    return Built(name, {"type": "number"}, _number(fact.value),
                 [_say("in_unit", lang, unit)] if rng.random() < 0.5 else [])


def _percent(rng, f, fact, lang):
    name = rng.choice(f.names)
    v = rng.choice(["number", "number", "fraction", "string"])
    if v == "fraction":
        return Built(name, {"type": "number"}, _number(fact.value / 100), [_say("fraction", lang)],
                     ["unit_conversion"])
    if v == "string":
        return Built(name, {"type": "string", "pattern": PERCENT}, f"{_number(fact.value)}%",
                     [_say("percent_string", lang)], ["format_constraint"])
    return Built(name, {"type": "number"}, _number(fact.value), [_say("percent_number", lang)])


def _rating(rng, f, fact, lang):
    schema = {"type": "number", "minimum": 0, "maximum": int(fact.unit)}
    return Built(rng.choice(f.names), schema, _number(fact.value))


def _date(rng, f, fact, lang):
    name = rng.choice(f.names)
    if rng.random() < 0.65:
        y, m, d = fact.value
        return Built(name, {"type": "string", "pattern": ISO_DATE}, f"{y:04d}-{m:02d}-{d:02d}",
                     [_say("iso_date", lang)], ["format_constraint"], derived=True)
    return Built(name, {"type": "string"}, fact.surface, [_say("date_as_written", lang)])


def _time(rng, f, fact, lang):
    name = rng.choice(f.names)
    if rng.random() < 0.7:
        h, m = fact.value
        return Built(name, {"type": "string", "pattern": HHMM}, f"{h:02d}:{m:02d}",
                     [_say("hhmm", lang)], ["format_constraint"], derived=True)
    return Built(name, {"type": "string"}, fact.surface, [_say("date_as_written", lang)])


_BUILDERS = {"text": _text, "list": _list, "int": _int, "enum": _enum, "bool": _bool, "money": _money,
             "qty": _qty, "percent": _percent, "rating": _rating, "date": _date, "time": _time}
