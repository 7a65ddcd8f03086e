"""The deterministic, source-grounded faithfulness judge (the CPU default).

Per declared field in the answer: with a reference, credit is the normalised match against the
gold value (a null is right only when the gold is null); without one, a value is right when the
source states it (grounding.Source.supports with the field's rule: only the unit conversions and
date/time formats the task asks for that field, and no copying of whole sentences), and a null earns
half credit (absence cannot be verified without a reference).

A schema field the answer leaves out is judged as a null, as the true metric counts it: leaving a field out
says no more than a null does, so it must never earn more (the required_fields rule prices the left-out key on
top when the schema requires it). Only where a reference leaves that field out too is it not judged, and an
answer with no schema field at all has nothing to judge.
"""

from __future__ import annotations

from rubricrl.reward.grounding import STRICT, rules_for, source_for, values_match
from rubricrl.reward.judges.base import JudgeRequest, Verdict
from rubricrl.reward.rules import scale


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
        credits, notes = [], []
        for name in fields:
            pred = obj.get(name)
            left_out = "" if name in obj else " (left out: judged as a null)"
            if ref is not None and name in ref:
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


def _describe(name: str, pred, gold) -> str:
    if gold is None:
        return f"{name}: invented {_short(pred)} (the source does not give it)"
    if pred is None:
        return f"{name}: null although the source gives {_short(gold)}"
    return f"{name}: got {_short(pred)}, source says {_short(gold)}"


def _short(value, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
