"""The deterministic, source-grounded faithfulness judge (the CPU default).

Per declared field in the answer: with a reference, credit is the normalised match against the
gold value (a null is right only when the gold is null); without one, a value is right when the
source states it (grounding.Source.supports with the field's rule: only the unit conversions and
date/time formats the task asks for that field, and no copying of whole sentences), and a null earns
half credit (absence cannot be verified without a reference).

A value that breaks its field's JSON Schema (a number written "1.5 stars", "about 2999", {"value": 3}) earns no
credit, with a reference or without: the true metric counts it wrong, so the right number in the wrong type must
cost what a wrong value costs, not the field_types share alone (a null's price is set above it). What the true
metric forgives is judged as before: a plain decimal string for a number ("25" for 25), and with a reference a
string equal to the gold one but for case, width and whitespace (an enum's "Red" for "red"; the field_types rule
still charges the broken schema).

A schema field the answer leaves out is judged as a null, as the true metric counts it: leaving a field out
says no more than a null does, so it must never earn more (the required_fields rule prices the left-out key on
top when the schema requires it). Only where a reference leaves that field out too is it not judged, and an
answer with no schema field at all has nothing to judge.
"""

from __future__ import annotations

import re
import unicodedata

from rubricrl.core.taskfile import pattern_budget
from rubricrl.reward.grounding import STRICT, rules_for, source_for, values_match
from rubricrl.reward.judges.base import JudgeRequest, Verdict
from rubricrl.reward.rules import field_validators, scale

_PLAIN_DECIMAL = re.compile(r"-?[0-9]+(?:\.[0-9]+)?", re.ASCII)  # the strict metric's number in a string
_MISSING = object()


class GroundedJudge:
    name = "grounded"

    def judge_batch(self, requests: list[JudgeRequest]) -> list[Verdict]:
        return [self.judge(r) for r in requests]

    def judge(self, req: JudgeRequest) -> Verdict:
        lo, hi = req.criterion.range
        obj, task = req.parsed, req.task
        if obj is None:
            return Verdict(lo, "no JSON object to judge")
        if not any(k in obj for k in task.properties):
            return Verdict(lo, "no schema field in the answer to judge")
        source = source_for(task.text)
        ref = task.reference
        # A left-out field is judged as a null (an omission must never be a cheaper miss than a null), unless
        # the reference leaves it out as well.
        fields = [k for k in task.properties if k in obj or ref is None or k in ref]
        rules = rules_for(task) if ref is None or any(k not in ref for k in fields) else {}
        validators = field_validators(task)
        with pattern_budget():  # one time budget for every pattern match of this answer, as field_types has
            golds = {k: ref.get(k, _MISSING) if ref is not None else _MISSING for k in fields}
            broken = {k: p for k in fields if (p := _schema_problem(validators.get(k), obj.get(k), golds[k]))
                      # a gold value that breaks the schema itself: the schema is off, not the answer
                      and not (golds[k] is not _MISSING and _schema_problem(validators.get(k), golds[k]))}
        credits, notes = [], []
        for name in fields:
            pred = obj.get(name)
            left_out = "" if name in obj else " (left out: judged as a null)"
            if name in broken:
                credit = 0.0
                notes.append(f"{name}: {_short(pred)} breaks the field's schema ({broken[name][:60]})")
            elif ref is not None and name in ref:
                credit = values_match(pred, ref[name])
                if credit < 1.0:
                    notes.append(_describe(name, pred, ref[name]) + left_out)
            elif pred is None:
                credit = 0.5
                notes.append(f"{name}: null cannot be verified without a reference{left_out}")
            else:
                rule = rules.get(name, STRICT)
                items = pred if isinstance(pred, list) else [pred]
                supported = [source.supports(i, rule) for i in items]
                credit = sum(supported) / len(items) if items else 1.0
                if credit < 1.0:
                    bad = next(i for i, ok in zip(items, supported) if not ok)
                    notes.append(f"{name}: {_short(bad)} {source.why_not(bad, rule)}")
            credits.append(credit)
        fraction = sum(credits) / len(credits)
        head = f"{sum(c == 1.0 for c in credits)}/{len(fields)} fields faithful"
        reason = head if not notes else head + "; " + "; ".join(notes[:5])
        return Verdict(round(scale(lo, hi, fraction), 4), reason)


def _schema_problem(validator, value, gold=_MISSING) -> str | None:
    """Why a non-null value breaks its field's schema and the true metric counts it wrong (None if it does not break
    the schema, the true metric forgives it, or there is no schema to break)."""
    if value is None or validator is None:
        return None
    problem = validator.first_error(value)
    if problem is None:
        return None
    if gold is not _MISSING and isinstance(gold, str) and isinstance(value, str):
        return None if _strict_text(value) == _strict_text(gold) else problem
    if isinstance(value, str) and _PLAIN_DECIMAL.fullmatch(value.strip()):
        number = float(value) if "." in value else int(value)
        if (gold is _MISSING or _is_number(gold)) and validator.is_valid(number):
            return None  # the number itself: values_match (or the source) judges it
    return problem


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _strict_text(s: str) -> str:
    """A string as the strict metric compares it: NFKC, casefold, whitespace runs as one space, stripped."""
    return " ".join(unicodedata.normalize("NFKC", s).casefold().split())


def _describe(name: str, pred, gold) -> str:
    if gold is None:
        return f"{name}: invented {_short(pred)} (the source does not give it)"
    if pred is None:
        return f"{name}: null although the source gives {_short(gold)}"
    return f"{name}: got {_short(pred)}, source says {_short(gold)}"


def _short(value, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
