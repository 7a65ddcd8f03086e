"""A strict per-field scorer: the "true metric", kept independent of the reward.

Nothing here imports the reward side (rubricrl.reward: grounding, rules, judges; rubricrl.calibrate), nor any
other module of rubricrl.metrics: there is no unit conversion, no fuzzy matching and no lenient parsing, so a
policy cannot raise this metric by exploiting the reward's tolerances.

Parsing a response (`parse_answer`), with the standard `json` module only:

1. Strip surrounding whitespace. If the whole text is JSON, it is the answer when it is an object
   and "not parsed" otherwise (a list or a string at the root is no answer).
2. Else, if the text is one markdown code fence (```json ... ``` or ``` ... ```, any info word),
   the same rule applies to the text inside the fence.
3. Else scan for an object: at each `{` (at most MAX_SCAN_STARTS of them), try
   `json.JSONDecoder().raw_decode`; the first object decoded is the answer and any text after it
   is ignored. A failed attempt skips every `{` before the position where decoding failed (those
   are inside the failed candidate), so a truncated object never yields one of its nested objects.
4. The constants NaN, Infinity and -Infinity are not JSON: an attempt that meets one, or a number
   too large for a float (1e400), makes the whole response "not parsed".

Equality of an answer value with the gold value (`values_equal(pred, gold)`):

- None equals only None; a key missing from the answer counts as None.
- A bool equals only the identical bool (True != 1, False != 0, True != "true").
- A gold number (int or float, not bool) equals a predicted number when
  `math.isclose(pred, gold, rel_tol=1e-9, abs_tol=1e-9)`, and a predicted string only when the
  whole string, after stripping surrounding whitespace, is a plain decimal literal made of ASCII
  characters `-?[0-9]+(\\.[0-9]+)?` with that value ("25" and " 25.0 " equal 25; "$25", "25 kg",
  "about 25", "1,299", "1e3", "+25", "２５" do not).
- A gold string equals only a string, compared after normalisation: Unicode NFKC, casefold,
  every run of whitespace collapsed to one space, surrounding whitespace stripped; then exact
  equality. Nothing else is removed or parsed: "$25" != "25", "AirBeat" != "AirBeat Pro", and a
  gold string that looks like a number is still a string ("1299.0" != "1299.00", 1299 != "1299.00"),
  because the task's constraint asked for that exact format.
- A gold list equals a list of the same length whose items can be paired one-to-one with the
  gold items by `values_equal` (a multiset comparison: order ignored, duplicates counted).
- A gold object equals an object with exactly the same keys whose values are all equal.

Counting (`strict_counts`) walks the task schema's properties; keys of the answer that are not
properties are ignored. An unparsed response gets no field right and counts neither as an
abstention (null_for_present) nor as an invention: it is counted by `parsed` alone.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from rubricrl.core.taskfile import Task

MAX_SCAN_STARTS = 64  # `{` positions tried when the answer is embedded in other text
REL_TOL = 1e-9
ABS_TOL = 1e-9

_FENCE = re.compile(r"\A```[^\n`]*\n(.*?)\n?[ \t]*```\Z", re.DOTALL)
_DECIMAL = re.compile(r"-?[0-9]+(?:\.[0-9]+)?", re.ASCII)
_SPACE = re.compile(r"\s+")


class _NonFinite(ValueError):
    """Raised while decoding when the text uses NaN, Infinity or -Infinity."""


def _reject_constant(name: str):
    raise _NonFinite(f"non-finite JSON constant {name}")


def _finite_float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):  # 1e400 overflows to inf
        raise _NonFinite(f"number {literal} is out of range")
    return value


_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)


# --------------------------------------------------------------------------- parsing


def _whole(text: str) -> tuple[bool, Any]:
    """(True, value) when all of `text` is one JSON value; raises _NonFinite on NaN/Infinity."""
    try:
        return True, _DECODER.decode(text)
    except _NonFinite:
        raise
    except (ValueError, RecursionError):
        return False, None


def parse_answer(response: str) -> dict | None:
    """The answer object of a response, or None when it is not parsed (see the module docstring)."""
    if not isinstance(response, str):
        return None
    text = response.strip()
    try:
        ok, value = _whole(text)
        if ok:
            return value if isinstance(value, dict) else None
        fence = _FENCE.match(text)
        if fence:
            ok, value = _whole(fence.group(1).strip())
            if ok:
                return value if isinstance(value, dict) else None
        return _scan(text)
    except _NonFinite:
        return None


def _scan(text: str) -> dict | None:
    start, tries = text.find("{"), 0
    while start != -1 and tries < MAX_SCAN_STARTS:
        tries += 1
        try:
            value, _ = _DECODER.raw_decode(text, start)
        except json.JSONDecodeError as err:
            # Everything up to err.pos decoded as part of this candidate: skip its inner braces.
            start = text.find("{", max(err.pos, start + 1))
            continue
        except RecursionError:
            return None
        return value  # raw_decode at a "{" only ever yields a dict
    return None


# --------------------------------------------------------------------------- equality


def normalize_string(s: str) -> str:
    """NFKC, casefold, whitespace runs collapsed to one space, stripped."""
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", s).casefold()).strip()


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _close(a: int | float, b: int | float) -> bool:
    try:
        return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)
    except OverflowError:  # an int too large for a float
        return a == b


def _decimal_value(s: str) -> int | float | None:
    s = s.strip()
    if not _DECIMAL.fullmatch(s):
        return None
    return int(s) if "." not in s else float(s)


def values_equal(pred: Any, gold: Any) -> bool:
    """Whether an answer value equals the gold value under the strict rules (module docstring)."""
    if gold is None:
        return pred is None
    if isinstance(gold, bool):
        return isinstance(pred, bool) and pred is gold
    if _is_number(gold):
        if _is_number(pred):
            return _close(pred, gold)
        if isinstance(pred, str):
            value = _decimal_value(pred)
            return value is not None and _close(value, gold)
        return False
    if isinstance(gold, str):
        return isinstance(pred, str) and normalize_string(pred) == normalize_string(gold)
    if isinstance(gold, list):
        return isinstance(pred, list) and len(pred) == len(gold) and _multiset_equal(pred, gold)
    if isinstance(gold, dict):
        return (isinstance(pred, dict) and pred.keys() == gold.keys()
                and all(values_equal(pred[k], gold[k]) for k in gold))
    return False


def _multiset_equal(pred: list, gold: list) -> bool:
    """A perfect one-to-one pairing of equal items exists (bipartite matching; lists are short)."""
    n = len(gold)
    if n == 0:
        return True
    edges = [[j for j in range(n) if values_equal(pred[j], g)] for g in gold]
    if any(not e for e in edges):
        return False
    owner: list[int | None] = [None] * n  # pred index -> gold index it is paired with

    def augment(i: int, seen: list[bool]) -> bool:
        for j in edges[i]:
            if not seen[j]:
                seen[j] = True
                if owner[j] is None or augment(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    return all(augment(i, [False] * n) for i in range(n))


# --------------------------------------------------------------------------- counting


@dataclass(frozen=True)
class StrictCounts:
    fields: int  # schema properties
    right: int  # properties whose answer equals the gold value
    present: int  # properties with a non-null gold value
    present_right: int
    null_for_present: int  # present properties answered null or left out (parsed answers only)
    absent: int  # properties whose gold value is null
    invented: int  # absent properties answered with a non-null value (parsed answers only)
    parsed: bool

    @property
    def exact(self) -> bool:
        return self.parsed and self.right == self.fields


def strict_counts(task: Task, response: str) -> StrictCounts:
    """Counts of one response to one task; ValueError when the task has no reference."""
    if task.reference is None:
        raise ValueError(f"task '{task.id}' has no reference answer, so it cannot be scored strictly")
    answer = parse_answer(response)
    parsed = answer is not None
    right = present = present_right = null_for_present = absent = invented = 0
    for name in task.properties:
        gold = task.reference.get(name)
        if gold is None:
            absent += 1
        else:
            present += 1
        if not parsed:
            continue
        pred = answer.get(name)
        ok = values_equal(pred, gold)
        right += ok
        if gold is None:
            invented += pred is not None
        else:
            present_right += ok
            null_for_present += pred is None
    return StrictCounts(fields=len(task.properties), right=right, present=present,
                        present_right=present_right, null_for_present=null_for_present,
                        absent=absent, invented=invented, parsed=parsed)


CountFn = Callable[[StrictCounts], float]

METRICS: Mapping[str, tuple[CountFn, CountFn]] = MappingProxyType({
    "field_accuracy": (lambda c: c.right, lambda c: c.fields),
    "present_accuracy": (lambda c: c.present_right, lambda c: c.present),
    "exact_object_rate": (lambda c: int(c.exact), lambda c: 1),
    "null_for_present_rate": (lambda c: c.null_for_present, lambda c: c.present),
    "invented_rate": (lambda c: c.invented, lambda c: c.absent),
    "parsed_rate": (lambda c: int(c.parsed), lambda c: 1),
})
"""Metric name -> (per-task numerator, per-task denominator); a metric is sum(num) / sum(den)."""


def per_task(counts: Iterable[StrictCounts], metric: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-task numerators and denominators of `metric` (float arrays), e.g. for paired tests."""
    if metric not in METRICS:
        raise ValueError(f"unknown metric '{metric}' (known: {', '.join(METRICS)})")
    num_fn, den_fn = METRICS[metric]
    counts = list(counts)
    num = np.array([num_fn(c) for c in counts], dtype=float)
    den = np.array([den_fn(c) for c in counts], dtype=float)
    return num, den


def summarize(counts: Iterable[StrictCounts]) -> dict:
    """Micro rates over tasks (every METRICS entry, None when its denominator is 0) and n."""
    counts = list(counts)
    out: dict[str, Any] = {}
    for name in METRICS:
        num, den = per_task(counts, name)
        total = den.sum()
        out[name] = float(num.sum() / total) if total > 0 else None
    out["n"] = len(counts)
    return out
