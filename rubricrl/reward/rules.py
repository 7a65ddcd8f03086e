"""Rule criteria and penalties: small deterministic functions, registered by name.

A criterion function returns (score, reason) within its criterion's range; a penalty function
returns (units, reason) and the engine charges min(cap, per * units) (per * units when cap is null).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable

from rubricrl.reward.grounding import Source, field_rules, source_for, values_match
from rubricrl.reward.parse import ParsedResponse, Shape
from rubricrl.reward.spec import Criterion, Penalty, Rubric
from rubricrl.core.taskfile import EXTRACTION, FREE_TEXT, SchemaValidator, Task, pattern_budget
from rubricrl.reward.items import ItemVerdict, check_item, declared_numbers

CRITERIA: dict[str, Callable] = {}
PENALTIES: dict[str, Callable] = {}
KINDS: dict[str, tuple[str, ...]] = {}  # function name -> the task kinds it can score


def criterion(name: str, kinds: tuple[str, ...] = (EXTRACTION,)):
    def register(fn):
        CRITERIA[name], KINDS[name] = fn, kinds
        return fn
    return register


def penalty(name: str, kinds: tuple[str, ...] = (EXTRACTION,)):
    def register(fn):
        PENALTIES[name], KINDS[name] = fn, kinds
        return fn
    return register


@dataclass
class TaskContext:
    """Per-task state built once and reused for every response to that task."""

    task: Task
    source: Source
    validators: dict = field(default_factory=dict)  # property name -> taskfile.SchemaValidator
    groundable: dict = field(default_factory=dict)  # property name -> can its value be found in text?
    decimals: dict = field(default_factory=dict)  # number field -> decimals its constraint asks for
    # property name -> grounding.FieldRule: the unit factors (rule.factors), copy limit and date/time
    # formats the constraints allow that field; what "supported" means without a reference
    grounding: dict = field(default_factory=dict)
    items_seen: dict = field(default_factory=dict)  # ("items", reply) -> its item verdicts (free-text tasks)
    items_judged: dict = field(default_factory=dict)  # reply -> {item id: (met, reason)} from the item judge

    @classmethod
    def build(cls, task: Task) -> "TaskContext":
        ctx = cls(task=task, source=source_for(task.text))
        if task.kind == FREE_TEXT:
            return ctx
        ctx.grounding = field_rules(task.constraints, task.properties)
        ctx.validators = dict(field_validators(task))
        for name, sub in task.properties.items():
            ctx.groundable[name] = _is_groundable(sub if isinstance(sub, dict) else {})
        ctx.decimals = constraint_decimals(task)
        return ctx


def field_validators(task: Task) -> dict[str, SchemaValidator]:
    """Property name -> its validator (references resolve against the whole task schema), built once per schema:
    the field_types rule and the faithfulness judge both check every answer's fields (do not mutate the result)."""
    try:
        key = json.dumps(task.schema, ensure_ascii=False)  # key order kept: it is the fields' order
    except (TypeError, ValueError):
        return _field_validators(task.schema)
    return _validators_cached(key)


@lru_cache(maxsize=1024)
def _validators_cached(schema_json: str) -> dict[str, SchemaValidator]:
    return _field_validators(json.loads(schema_json))


def _field_validators(schema: dict) -> dict[str, SchemaValidator]:
    root = SchemaValidator(schema)
    props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    return {name: root.at(sub if isinstance(sub, (dict, bool)) else {}) for name, sub in props.items()}


_DECIMALS = re.compile(r"\b(one|two|three|[1-4])\s+decimals?|([一两二三1-4])\s*位小数", re.IGNORECASE)
_PLACES = {"one": 1, "two": 2, "three": 3, "一": 1, "两": 2, "二": 2, "三": 3}
_STRINGY = re.compile(r"string|字符串", re.IGNORECASE)


def constraint_decimals(task: Task) -> dict[str, int]:
    """Number fields a constraint names with a decimal count ("Give price with two decimals").

    A constraint that asks for a string ("1299.00") is left to the field's schema pattern.
    """
    out = {}
    for c in task.constraints:
        m = _DECIMALS.search(c)
        if not m or _STRINGY.search(c):
            continue
        word = (m.group(1) or m.group(2)).lower()
        places = int(word) if word.isdigit() else _PLACES[word]
        for name, sub in task.properties.items():
            types = sub.get("type") if isinstance(sub, dict) else None
            types = types if isinstance(types, list) else [types]
            if re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", c) and "number" in types:
                out[name] = places
    return out


def _is_groundable(sub: dict) -> bool:
    """Enums and booleans are classifications, not spans of the text: only a reference checks them."""
    if "enum" in sub or "const" in sub:
        return False
    types = sub.get("type")
    types = types if isinstance(types, list) else [types]
    return not (set(types) - {None, "null"}) <= {"boolean"}


def scale(lo: float, hi: float, fraction: float) -> float:
    return lo + (hi - lo) * max(0.0, min(1.0, fraction))


@criterion("json_format")
def json_format(ctx: TaskContext, parsed: ParsedResponse, crit: Criterion):
    reasons = {
        Shape.CLEAN: "the response is one JSON object",
        Shape.EMBEDDED: "a JSON object is present but wrapped in other text or a code fence",
        Shape.BROKEN: "JSON-like but does not parse to an object (truncated or wrong root type)",
        Shape.NO_JSON: "no JSON object in the response",
    }
    lo, hi = crit.range
    shape = parsed.shape
    if crit.params.get("lenient") and shape == Shape.EMBEDDED:
        shape = Shape.CLEAN  # the naive "does some JSON parse" check: a hole the calibration probes expose
    reason = reasons[parsed.shape] + (f" ({parsed.error})" if parsed.error and parsed.obj is None else "")
    return scale(lo, hi, int(shape) / 3), reason


@criterion("required_fields")
def required_fields(ctx: TaskContext, parsed: ParsedResponse, crit: Criterion):
    lo, hi = crit.range
    if parsed.obj is None:
        return lo, "no JSON object, so no required field"
    required = ctx.task.required
    missing = [k for k in required if k not in parsed.obj]
    if not missing:
        return hi, f"all {len(required)} required fields present"
    # Partial credit per missing field: all-or-nothing gave zero reward for hundreds of steps.
    per_missing = float(crit.params.get("per_missing", 1.0))
    return max(lo, hi - per_missing * len(missing)), f"missing {len(missing)}/{len(required)}: {', '.join(missing)}"


@criterion("field_types")
def field_types(ctx: TaskContext, parsed: ParsedResponse, crit: Criterion):
    lo, hi = crit.range
    if parsed.obj is None:
        return lo, "no JSON object to check"
    checked = [k for k in ctx.validators if k in parsed.obj]
    if not checked:
        return lo, "none of the schema's fields is present"
    with pattern_budget():  # one time budget for every pattern match of this answer
        errors = {k: ctx.validators[k].first_error(parsed.obj[k]) for k in checked}
    bad = [k for k in checked if errors[k] is not None]
    if not bad:
        return hi, f"all {len(checked)} fields match the schema"
    details = "; ".join(f"{k}: {errors[k][:80]}" for k in bad[:4])
    return scale(lo, hi, 1 - len(bad) / len(checked)), f"{len(bad)}/{len(checked)} fields fail the schema: {details}"


def invented_fields(ctx: TaskContext, obj: dict) -> list[str]:
    """Declared fields holding a non-null value the source does not support (once per field, as the true metric
    counts a list field: a list with three invented items is one wrong field, and a null for a stated list must
    stay dearer than it; README: rubric economics)."""
    ref = ctx.task.reference
    out = []
    for name, value in obj.items():
        if value is None or name not in ctx.validators:
            continue
        gold = ref.get(name) if ref is not None else None
        if ref is not None and name in ref and gold is None:
            out.append(name)  # the source lacks it, so any value is made up
            continue
        if not ctx.groundable[name]:
            continue
        rule = ctx.grounding.get(name)  # only the conversions/formats the task asks for this field
        items = value if isinstance(value, list) else [value]
        for item in items:
            if item is None or ctx.source.supports(item, rule):
                continue
            if ref is not None and gold is not None and _matches_gold_item(item, gold):
                continue  # a conversion the task asked for (units, formats)
            out.append(name)
            break
    return out


def _matches_gold_item(item, gold) -> bool:
    golds = gold if isinstance(gold, list) else [gold]
    return any(values_match(item, g) == 1.0 for g in golds)


@penalty("extra_text")
def extra_text(ctx: TaskContext, parsed: ParsedResponse, pen: Penalty):
    n = parsed.extra_chars
    if n == 0:
        return 0, "no text outside the JSON"
    return n, f"{n} characters outside the JSON object"


def _per_field(parsed: ParsedResponse, fields: Callable[[dict], list[str]], none: str, some: str):
    """(units, reason) of a per-field penalty: one unit per field `fields` finds in the answer object."""
    if parsed.obj is None:
        return 0, "no JSON object"
    found = fields(parsed.obj)
    if not found:
        return 0, none
    return len(found), f"{len(found)} {some}: {', '.join(found[:6])}"


@penalty("invented_values")
def invented_values(ctx: TaskContext, parsed: ParsedResponse, pen: Penalty):
    return _per_field(parsed, lambda obj: invented_fields(ctx, obj), "no invented values",
                      "value(s) not supported by the source")


def missed_fields(ctx: TaskContext, obj: dict) -> list[str]:
    """Declared fields answered null (or left out) although the reference gives a value.

    Only a reference can tell a null for a stated value from a right null: without one the list is
    empty and the judge's half credit for an unverifiable null is the only price.
    """
    ref = ctx.task.reference
    if ref is None:
        return []
    return [name for name in ctx.validators if ref.get(name) is not None and obj.get(name) is None]


@penalty("missed_values")
def missed_values(ctx: TaskContext, parsed: ParsedResponse, pen: Penalty):
    """The price of abstaining: per null where the source states the value, `per` + params.type_share / N (N: the
    schema's fields), more than the dearest wrong value: one of the wrong type (field_types' share, type_share / N)
    that the text does not support (invented_values). Uncapped (cap: null), every null costs that, however many;
    a left-out field costs what its null costs (README: rubric economics). An answer with no JSON object states
    nothing, so it misses every value the source gives: breaking the JSON is never a cheaper miss than nulls
    (measured: with uncapped nulls and a free broken answer, a truncated sample outscored partly right ones)."""
    found = missed_fields(ctx, parsed.obj if parsed.obj is not None else {})
    if not found:
        return 0, "no null for a value the source gives"
    each = pen.per + float(pen.params.get("type_share", 0.0)) / max(1, len(ctx.validators))
    # Units such that per x units charges `each` per null.
    return len(found) * each / pen.per, (f"{len(found)} null(s) although the source gives the value, "
                                         f"{each:.3g} each: {', '.join(found[:6])}")


PLACEHOLDERS = frozenset({"", "n/a", "na", "none", "null", "unknown", "not mentioned", "not specified",
                          "未提及", "无", "不详", "未知", "-", "—"})


@penalty("placeholder_values")
def placeholder_values(ctx: TaskContext, parsed: ParsedResponse, pen: Penalty):
    """The null policy: a placeholder string where null was asked for."""
    if parsed.obj is None:
        return 0, "no JSON object"
    found = [k for k, v in parsed.obj.items()
             if k in ctx.validators and isinstance(v, str) and v.strip().casefold() in PLACEHOLDERS]
    if not found:
        return 0, "no placeholder values"
    return len(found), f"placeholder instead of null: {', '.join(found[:6])}"


# A key and the number it holds, in the answer's JSON text. Every string matches whole (possessive),
# and the scan covers only the answer (valid JSON), so it never restarts inside a string: linear.
_RAW_NUMBER = re.compile(r'"((?:[^"\\]|\\.)*+)"(?:\s*:\s*(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?))?')


@penalty("decimal_places")
def decimal_places(ctx: TaskContext, parsed: ParsedResponse, pen: Penalty):
    """A number field whose constraint asks for n decimals must be written so: only the raw text shows it."""
    wanted = ctx.decimals
    if parsed.obj is None or not wanted or parsed.span is None:
        return 0, "no decimal constraint applies"
    bad = []
    for m in _RAW_NUMBER.finditer(parsed.raw, *parsed.span):
        key, raw = m.groups()
        if raw is not None and key in wanted:
            decimals = len(raw.split(".")[1]) if "." in raw else 0
            if decimals != wanted[key]:
                bad.append(f"{key}={raw}")
    if not bad:
        return 0, "numbers have the decimals the constraints ask for"
    return len(bad), f"wrong number of decimals: {', '.join(bad[:6])}"


def kinds_of(fn: str) -> tuple[str, ...]:
    """The task kinds a rule function scores (one put in CRITERIA or PENALTIES by hand: extraction)."""
    return KINDS.get(fn, (EXTRACTION,))


def _non_negative(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0


def check_registry(rubric: Rubric) -> list[str]:
    problems = []
    for c in rubric.criteria:
        if c.kind == "rule" and c.fn not in CRITERIA:
            problems.append(f"criteria.{c.id}.fn: unknown rule '{c.fn}' (known: {', '.join(sorted(CRITERIA))})")
        elif c.kind == "rule" and set(c.tasks) - set(kinds_of(c.fn)):
            problems.append(f"criteria.{c.id}.tasks: {c.fn} scores {', '.join(kinds_of(c.fn))} tasks only")
        elif c.kind == "judge" and "free_text" in c.tasks:
            problems.append(f"criteria.{c.id}.tasks: a judge criterion grades extraction tasks only; a free-text "
                            "task's items are graded by the task_items rule and the item_pitfalls penalty")
    for p in rubric.penalties:
        if p.fn not in PENALTIES:
            problems.append(f"penalties.{p.id}.fn: unknown penalty '{p.fn}' (known: {', '.join(sorted(PENALTIES))})")
        elif set(p.tasks) - set(kinds_of(p.fn)):
            problems.append(f"penalties.{p.id}.tasks: {p.fn} scores {', '.join(kinds_of(p.fn))} tasks only")
        elif p.fn == "missed_values" and not _non_negative(p.params.get("type_share", 0.0)):
            problems.append(f"penalties.{p.id}.params.type_share: {p.params['type_share']!r} is not a number >= 0")
    return problems


# --- free-text tasks: their own rubric items ------------------------------------------------------

DEFAULT_ITEM_WEIGHTS = {"essential": 1.0, "important": 0.6, "optional": 0.3}
GATE_KINDS = ("coherent",)  # an item of these kinds that fails zeroes the reply's item credit


def item_verdicts(ctx: TaskContext, parsed: ParsedResponse) -> list[ItemVerdict]:
    """Every item of the task checked against the reply, once per (task, reply) and shared by the criterion and
    the pitfall penalty."""
    key = ("items", parsed.raw)
    judged = ctx.items_judged.pop(parsed.raw, {})
    if ctx.items_seen.get(key) is None or judged:
        if len(ctx.items_seen) > 64:
            ctx.items_seen.clear()
        verdicts, declared = [], declared_numbers(ctx.task.items)
        for item in ctx.task.items:
            v = check_item(item, parsed.raw, ctx.task.text, declared)
            if v.passed is None and item.id in judged:
                met, reason = judged[item.id]
                v = ItemVerdict(item.id, item.importance, met, f"judge: {reason}")  # met None: the judge abstained
            verdicts.append(v)
        ctx.items_seen[key] = verdicts
    return ctx.items_seen[key]


def _listed(verdicts: list[ItemVerdict], limit: int = 4) -> str:
    shown = "; ".join(f"{v.id} ({v.reason})" for v in verdicts[:limit])
    return shown + (f"; and {len(verdicts) - limit} more" if len(verdicts) > limit else "")


@criterion("task_items", kinds=(FREE_TEXT,))
def task_items(ctx: TaskContext, parsed: ParsedResponse, crit: Criterion):
    """Weighted share of the task's checked essential / important / optional items the reply meets (RaR's explicit
    aggregation); the weights per importance come from the criterion's params (`weights`). A failed gate item (a
    `coherent` check: the reply is not prose) leaves no credit at all."""
    lo, hi = crit.range
    weights = {**DEFAULT_ITEM_WEIGHTS, **crit.params.get("weights", {})}
    verdicts = item_verdicts(ctx, parsed)
    graded = [v for v in verdicts if v.importance != "pitfall" and v.passed is not None]
    ungraded = [v for v in verdicts if v.passed is None]
    note = ""
    if ungraded:
        why = ("the item judge did not grade them" if any(v.reason.startswith("judge: ") for v in ungraded)
               else "the rubric has no item_judge")
        note = f"{len(ungraded)} item(s) without a check left ungraded ({why})"
    total = sum(weights[v.importance] for v in graded)
    if not graded or total <= 0:
        return lo, "no item graded" + (f": {note}" if note else "")
    gates = {i.id for i in ctx.task.items if i.check is not None and i.check["kind"] in GATE_KINDS}
    shut = [v for v in graded if v.id in gates and v.passed is False]
    if shut:  # an incoherent reply earns nothing from the facts its tokens happen to hold
        return lo, f"no item credit: {_listed(shut)}"
    met = sum(weights[v.importance] for v in graded if v.passed)
    missed = [v for v in graded if not v.passed]
    counts = ", ".join(f"{sum(v.passed for v in graded if v.importance == k)}/{n} {k}"
                       for k in ("essential", "important", "optional")
                       if (n := sum(v.importance == k for v in graded)))
    reason = f"met {counts}" + (f"; missed: {_listed(missed)}" if missed else "") + (f"; {note}" if note else "")
    return scale(lo, hi, met / total), reason


@penalty("item_pitfalls", kinds=(FREE_TEXT,))
def item_pitfalls(ctx: TaskContext, parsed: ParsedResponse, pen: Penalty):
    """One unit per checked pitfall item the reply falls into, and one per missed item whose miss costs one too
    (ItemVerdict.costs): an offer it owes named only in a void one (hedged, conditional on what the policy does
    not ask, counterfactual, a quotation of the policy, retracted: rubricrl.reward.prose), which misleads the
    customer and must cost more than saying nothing of it; padding: a length limit broken by more than a fifth,
    or a sentence said again word for word (the `coherent` item passes, and costs). Each of the two costs one unit
    however many items it touches."""
    verdicts = item_verdicts(ctx, parsed)
    fallen = [v for v in verdicts if v.importance == "pitfall" and v.passed is False]
    # one unit per kind of costly miss (a void offer, padding), however many items it misses
    fallen += list({"offer" if v.costs.endswith(" offer") else "padded": v for v in verdicts if v.costs}.values())
    return len(fallen), (f"fell into {len(fallen)}: {_listed(fallen)}" if fallen else "no pitfall")
