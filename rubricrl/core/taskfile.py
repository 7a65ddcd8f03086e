"""The public task format (JSONL, one task per line) and its validation.

Two kinds of task share the format. Keys: id, instruction, text, then either
  * schema (a JSON Schema object): an extraction task, answered with a JSON object; optional reference (the gold
    answer object); or
  * items (its own rubric items, rubricrl.core.items): a free-text task, answered in prose; optional reference (a
    gold reply, a string);
and optional constraints (list of strings) and meta (free-form object, e.g. domain/language/split part). Every
problem is reported as `file:line: key: what` (`file:line: items.<item id>.check.kind: what`).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

import jsonschema
import referencing
import referencing.exceptions
import referencing.jsonschema
import regex
from jsonschema.exceptions import ValidationError
from jsonschema.validators import extend, validator_for

from rubricrl.core.errors import TaskFileError
from rubricrl.core.items import Item, check_items
from rubricrl.core.jsonio import jsonl_lines, scan_jsonl, scan_lines

REQUIRED_KEYS = ("id", "instruction", "text")
OPTIONAL_KEYS = ("schema", "items", "constraints", "reference", "meta")
EXTRACTION, FREE_TEXT = "extraction", "free_text"
ALLOWED_KEYS = set(REQUIRED_KEYS) | set(OPTIONAL_KEYS)


@dataclass(frozen=True)
class Task:
    id: str
    instruction: str
    text: str
    schema: dict | None  # None: a free-text task, graded by its items
    constraints: tuple[str, ...] = ()
    reference: dict | str | None = None  # the gold answer object (extraction) or gold reply (free text)
    meta: dict = field(default_factory=dict)
    items: tuple[Item, ...] = ()

    @property
    def kind(self) -> str:
        return EXTRACTION if self.schema is not None else FREE_TEXT

    @property
    def properties(self) -> dict:
        return self.schema.get("properties", {}) if self.schema is not None else {}

    @property
    def required(self) -> list[str]:
        return list(self.schema.get("required", [])) if self.schema is not None else []

    def to_dict(self) -> dict:
        row: dict[str, Any] = {"id": self.id, "instruction": self.instruction, "text": self.text}
        if self.schema is not None:
            row["schema"] = self.schema
        else:
            row["items"] = [i.to_dict() for i in self.items]
        row["constraints"] = list(self.constraints)
        if self.reference is not None:
            row["reference"] = self.reference
        if self.meta:
            row["meta"] = self.meta
        return row

    @classmethod
    def from_dict(cls, row: dict) -> "Task":
        return cls(
            id=row["id"],
            instruction=row["instruction"],
            text=row["text"],
            schema=row.get("schema"),
            constraints=tuple(row.get("constraints") or ()),
            reference=row.get("reference"),
            meta=dict(row.get("meta") or {}),
            items=tuple(Item.from_dict(i) for i in row.get("items") or ()),
        )


def check_task_row(row: Any, where: str) -> list[str]:
    """All problems of one parsed line; `where` is 'file:line'."""
    if not isinstance(row, dict):
        return [f"{where}: a task must be a JSON object, got {type(row).__name__}"]
    problems = []
    for key in REQUIRED_KEYS:
        if key not in row:
            problems.append(f"{where}: {key}: missing required key")
    for key in sorted(set(row) - ALLOWED_KEYS):
        problems.append(f"{where}: {_clip(key, 80)}: unknown key (allowed: {', '.join(sorted(ALLOWED_KEYS))})")
    for key in ("id", "instruction", "text"):
        if key in row and (not isinstance(row[key], str) or not row[key].strip()):
            problems.append(f"{where}: {key}: must be a non-empty string")
    constraints = row.get("constraints")
    if constraints is not None and (
        not isinstance(constraints, list) or not all(isinstance(c, str) for c in constraints)
    ):
        problems.append(f"{where}: constraints: must be a list of strings")
    if "meta" in row and not isinstance(row["meta"], dict):
        problems.append(f"{where}: meta: must be an object")
    schema_ok = False
    if "schema" in row and "items" in row:
        problems.append(f"{where}: items: a task has a schema (extraction) or items (free text), not both")
    elif "schema" not in row and "items" not in row:
        problems.append(f"{where}: schema: missing (an extraction task needs its schema, a free-text task its items)")
    if "schema" in row:
        schema_problems = check_schema(row["schema"])
        problems += [f"{where}: schema{p}" for p in schema_problems]
        schema_ok = not schema_problems
    if "items" in row and row["items"] != []:  # [] : a free-text task whose items the data stage drafts
        problems += [f"{where}: items{p}" for p in check_items(row["items"])]
    meta = row.get("meta") if isinstance(row.get("meta"), dict) else {}
    if "items" in row and "lang" in meta and meta["lang"] not in REPLY_LANGUAGES:
        problems.append(f"{where}: meta.lang: a free-text task's language is one of {', '.join(REPLY_LANGUAGES)} "
                        f"(the drafts, corruptions and checklist know these), got {_clip(repr(meta['lang']), 80)}")
    if "checklist" in meta:
        problems += [f"{where}: meta.checklist{p}" for p in check_checklist(meta["checklist"])]
    ref = row.get("reference")
    if ref is not None and "schema" not in row:
        if not isinstance(ref, str) or not ref.strip():
            problems.append(f"{where}: reference: a free-text task's reference is its gold reply, a non-empty string")
    elif ref is not None:
        if not isinstance(ref, dict):
            problems.append(f"{where}: reference: must be an object or null")
        elif schema_ok:
            for path, message in SchemaValidator(row["schema"]).errors(ref):
                problems.append(f"{where}: reference{path}: does not validate against its schema: {message}")
    return problems


REPLY_LANGUAGES = ("en", "zh")
_CHECKLIST_KEYS = ("lang", "facts", "owed", "refused", "forbidden_numbers", "allowed_numbers", "refund_allowed",
                   "min_words", "max_words")
# What a free-text checklist names (rubricrl/metrics/claims.py reads them): the remedies a policy grants or refuses,
# and the nouns an amount attaches to.
CHECKLIST_REMEDIES = ("refund", "replacement", "voucher", "return")
CHECKLIST_NOUNS = ("refund", "voucher", "shipping", "days")


def check_checklist(sheet: Any) -> list[str]:
    """Problems of a free-text task's `meta.checklist`, the true metric's held-out checklist (its format and meaning:
    rubricrl/metrics/checklist.py), each as a key path suffix."""
    if not isinstance(sheet, dict):
        return [f": must be an object, got {type(sheet).__name__}"]
    problems = [f": {_clip(str(k), 80)}: unknown key (allowed: {', '.join(_CHECKLIST_KEYS)})"
                for k in sorted(set(sheet) - set(_CHECKLIST_KEYS), key=str)]
    if "lang" in sheet and sheet["lang"] not in REPLY_LANGUAGES:
        problems.append(f".lang: must be one of {', '.join(REPLY_LANGUAGES)}, got {_clip(repr(sheet['lang']), 80)}")
    facts = sheet.get("facts", [])
    if not isinstance(facts, list):
        return problems + [".facts: must be a list of facts"]
    for i, fact in enumerate(facts):
        kinds = [k for k in ("number", "text", "any_text") if isinstance(fact, dict) and k in fact]
        if not isinstance(fact, dict) or not isinstance(fact.get("what"), str) or len(kinds) != 1:
            problems.append(f".facts[{i}]: must be an object with `what` (a string) and one of number, text, any_text")
        elif kinds == ["number"] and not _is_number(fact["number"]):
            problems.append(f".facts[{i}].number: must be a number")
        elif kinds == ["text"] and (not isinstance(fact["text"], str) or not fact["text"].strip()):
            problems.append(f".facts[{i}].text: must be a non-empty string")
        elif kinds == ["any_text"] and (not isinstance(fact["any_text"], list) or not fact["any_text"] or not all(
                isinstance(t, str) and t.strip() for t in fact["any_text"])):
            problems.append(f".facts[{i}].any_text: must be a non-empty list of non-empty strings")
        elif "noun" in fact and (kinds != ["number"] or fact["noun"] not in CHECKLIST_NOUNS):
            problems.append(f".facts[{i}].noun: a number's noun, one of {', '.join(CHECKLIST_NOUNS)}")
    names: dict[str, str] = {}
    for key in ("owed", "refused"):
        named = sheet.get(key, [])
        if not isinstance(named, list):
            problems.append(f".{key}: must be a list of remedies (a name of {', '.join(CHECKLIST_REMEDIES)}, or "
                            "{what: <name>, any_text: [the words that name it]})")
            continue
        for i, remedy in enumerate(named):
            problem = _remedy_problem(remedy)
            if problem:
                problems.append(f".{key}[{i}]{problem}")
                continue
            name = remedy if isinstance(remedy, str) else remedy["what"]
            if name in names:
                problems.append(f".{key}[{i}]: {_clip(name, 80)!r} is named twice (also in {names[name]})")
            names[name] = f"{key}[{i}]"
    for key in ("forbidden_numbers", "allowed_numbers"):
        numbers = sheet.get(key, [])
        if not isinstance(numbers, list) or not all(_is_number(x) for x in numbers):
            problems.append(f".{key}: must be a list of numbers")
    if not isinstance(sheet.get("refund_allowed", True), bool):
        problems.append(".refund_allowed: must be true or false")
    for key, low in (("min_words", 0), ("max_words", 1)):
        words = sheet.get(key, low)
        if isinstance(words, bool) or not isinstance(words, int) or words < low:
            problems.append(f".{key}: must be a {'non-negative' if low == 0 else 'positive'} integer")
    return problems


def _remedy_problem(remedy: Any) -> str | None:
    """What is wrong with one `owed` / `refused` entry: a built-in remedy's name, or an open one
    {what, any_text} (the task's own offer or refusal: a repair, a date change, ...)."""
    if isinstance(remedy, str):
        return None if remedy in CHECKLIST_REMEDIES else (
            f": {_clip(remedy, 80)!r} is no built-in remedy ({', '.join(CHECKLIST_REMEDIES)}); name your own as "
            "{what: <name>, any_text: [the words that name it]}")
    if not isinstance(remedy, dict):
        return f": must be a remedy's name or an object, got {type(remedy).__name__}"
    extra = sorted(set(remedy) - {"what", "any_text"}, key=str)
    if extra:
        return f".{_clip(str(extra[0]), 80)}: unknown key (allowed: what, any_text)"
    if not isinstance(remedy.get("what"), str) or not remedy["what"].strip():
        return ".what: must be a non-empty string (the remedy's name)"
    texts = remedy.get("any_text")
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) and t.strip() for t in texts):
        return ".any_text: must be a non-empty list of non-empty strings (the words that name the remedy)"
    return None


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x == x and abs(x) != float("inf")


def check_schema(schema: Any) -> list[str]:
    """Problems of a task schema, each as a key path suffix ('.properties.x: ...' or ': ...')."""
    if not isinstance(schema, dict):
        return [f": must be a JSON Schema object, got {type(schema).__name__}"]
    cls, problem = _dialect(schema)
    if cls is None:
        return [problem]
    try:
        cls.check_schema(schema, format_checker=_schema_format_checker(cls))
    except jsonschema.SchemaError as err:
        return [f"{_path(err.absolute_path)}: not a valid JSON Schema: {_clip(err.message)}"]
    problems = []
    if schema.get("type") != "object":
        problems.append('.type: must be "object" (extraction answers are JSON objects)')
    props = schema.get("properties")
    if not isinstance(props, dict) or not props:
        problems.append(".properties: must be a non-empty object")
        props = {}
    required = schema.get("required", [])
    for name in required if isinstance(required, list) else ():
        if name not in props:
            problems.append(f".required: {_clip(repr(name), 80)} is not in properties")
    problems += _reference_problems(schema)
    if not problems:  # a reference cycle that consumes nothing never ends: probe each property once
        root = SchemaValidator(schema)
        problems += [f".properties.{name}: {RECURSION}" for name, sub in props.items()
                     if RECURSION in (message for _, message in root.at(sub).errors(None))]
    return problems


# --- task schemas: one validator for references and answers -------------------------------------

# Patterns match with the `regex` module under a time limit: Python's `re` (what jsonschema uses)
# can backtrack for ever ('^(a|aa)+$' against 'aaa...!'). A match that runs out of time counts as
# no match. The budget bounds all the matches of one validation together (an answer's fields). Both bound work, not
# waiting: the budget is this thread's CPU time, and a timeout during a stall is retried (timed_search), so a loaded
# host cannot fail a plain pattern at random (a gold answer lost its full marks that way once in a fresh clone).
PATTERN_TIMEOUT_S = 0.1
PATTERN_BUDGET_S = 0.5
TIMED_OUT = "pattern match exceeded the time limit"
RECURSION = "the schema's references recurse without end"
_DEADLINE: ContextVar[float | None] = ContextVar("pattern_deadline", default=None)
_SUPPORTED = (jsonschema.Draft4Validator, jsonschema.Draft6Validator, jsonschema.Draft7Validator,
              jsonschema.Draft201909Validator, jsonschema.Draft202012Validator)
# References resolve inside the task schema only: an empty registry never retrieves anything
# (jsonschema's default one fetches http(s) references over the network).
_LOCAL_ONLY = referencing.Registry()
_REF_KEYS = ("$ref", "$dynamicRef", "$recursiveRef")
_DATA_KEYS = {"enum", "const", "default", "examples"}  # values, not schemas: a "$ref" in them is data
_BAD_PATTERN = (regex.error, RecursionError, ValueError, OverflowError)  # what compiling a pattern raises


@contextmanager
def pattern_budget(seconds: float = PATTERN_BUDGET_S):
    """Every schema pattern match inside the block shares one time budget (an outer one still holds)."""
    outer = _DEADLINE.get()
    token = _DEADLINE.set(min(time.thread_time() + seconds, outer if outer is not None else float("inf")))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


@lru_cache(maxsize=1024)
def compiled_pattern(pattern: str):
    """A regex (the `regex` module, which can time out), compiled once."""
    return regex.compile(pattern)


def _match(pattern: str, text: str) -> bool | None:
    """Does `pattern` match somewhere in `text`? None: the time limit ran out first."""
    limit, deadline = PATTERN_TIMEOUT_S, _DEADLINE.get()
    if deadline is not None:
        limit = min(limit, deadline - time.thread_time())
    if limit <= 0:
        return None
    return timed_search(compiled_pattern(pattern), text, limit)


STALL_RETRIES = 2


def timed_search(compiled, text: str, limit: float) -> bool | None:
    """compiled.search within `limit` seconds of work. The regex module's timeout is wall-clock time, so a process
    stalled meanwhile (a loaded host, a GC pause elsewhere, descheduling) would fail a plain pattern like a
    catastrophic one, at random; a timeout in which this thread did less than half the limit in CPU time is such a
    stall and the search is tried again (up to STALL_RETRIES times). None: the pattern really ran out of time."""
    for _ in range(STALL_RETRIES + 1):
        cpu = time.thread_time()
        try:
            return compiled.search(text, timeout=limit) is not None
        except TimeoutError:
            if time.thread_time() - cpu >= limit / 2:
                return None  # it was working: a pattern that backtracks for ever
    return None


def _pattern(validator, pattern, instance, schema):
    if not validator.is_type(instance, "string"):
        return
    try:
        found = _match(pattern, instance)
    except _BAD_PATTERN:
        yield ValidationError(f"{pattern!r} is not a valid regular expression")
        return
    if found is None:
        yield ValidationError(f"{TIMED_OUT}: {pattern!r} on {_clip(repr(instance), 80)}")
    elif not found:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _key_matches(pattern: str, key: str) -> bool | None:
    try:
        return _match(pattern, key)
    except _BAD_PATTERN:
        return False


def _pattern_properties(validator, patterns, instance, schema):
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            found = _key_matches(pattern, key)
            if found is None:
                yield ValidationError(f"{TIMED_OUT}: {pattern!r} on property name {_clip(repr(key), 80)}")
            elif found:
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator, allowed, instance, schema):
    """jsonschema's additionalProperties with the time-limited matcher (a timed-out name is extra)."""
    if not validator.is_type(instance, "object"):
        return
    props, patterns = schema.get("properties", {}), list(schema.get("patternProperties", {}))
    extras = [k for k in instance if k not in props and not any(_key_matches(p, k) for p in patterns)]
    if validator.is_type(allowed, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], allowed, path=extra)
    elif not allowed and extras:
        names = ", ".join(repr(e) for e in sorted(extras)[:20]) + (", ..." if len(extras) > 20 else "")
        yield ValidationError(f"Additional properties are not allowed ({names} unexpected)")


def _unique_items(validator, unique, instance, schema):
    """Linear (jsonschema falls back to comparing every pair when items do not sort)."""
    if unique and validator.is_type(instance, "array") and len({_canonical(v) for v in instance}) < len(instance):
        yield ValidationError(f"{_clip(repr(instance))} has non-unique elements")


def _canonical(value):
    """A hashable key equal for values JSON Schema calls equal (1 == 1.0, but true != 1)."""
    if isinstance(value, bool) or value is None:
        return ("literal", value)
    if isinstance(value, dict):
        return ("object", frozenset((k, _canonical(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("array", tuple(_canonical(v) for v in value))
    return ("value", value)


@lru_cache(maxsize=None)
def _extended(cls):
    keywords = {"pattern": _pattern, "patternProperties": _pattern_properties,
                "additionalProperties": _additional_properties, "uniqueItems": _unique_items}
    return extend(cls, keywords)


def _dialect(schema: dict):
    """(validator class, None) for the schema's $schema, or (None, problem)."""
    if "$schema" not in schema:
        return jsonschema.Draft202012Validator, None
    uri = schema["$schema"]
    if not isinstance(uri, str):
        return None, f".$schema: must be a string, got {type(uri).__name__}"
    try:
        cls = validator_for(schema, default=None)
    except ValueError:  # not even a URI
        cls = None
    if cls not in _SUPPORTED:
        return None, f".$schema: unsupported dialect {_clip(repr(uri), 80)} (draft-04 to 2020-12 are)"
    return cls, None


@lru_cache(maxsize=None)
def _schema_format_checker(cls):
    """The dialect's format checker, with "regex" (a schema pattern) checked as _match compiles it."""
    checker = jsonschema.FormatChecker(formats=())
    checker.checkers = dict(cls.FORMAT_CHECKER.checkers)
    checker.checks("regex", raises=_BAD_PATTERN)(
        lambda p: not isinstance(p, str) or bool(compiled_pattern(p)))
    return checker


def _reference_problems(schema: dict) -> list[str]:
    """Every $ref must point into this schema ('#...') and resolve there (nothing is fetched), and
    only the root names a dialect (a subschema's own would bypass the time-limited patterns)."""
    spec = referencing.jsonschema.specification_with(schema.get("$schema", ""),
                                                     default=referencing.jsonschema.DRAFT202012)
    problems: list[str] = []

    def walk(node, path, resolver):
        if isinstance(node, list):
            for i, item in enumerate(node):
                walk(item, f"{path}[{i}]", resolver)
            return
        if not isinstance(node, dict):
            return
        if path and isinstance(node.get("$schema"), str):  # the validator class is chosen once, at the root
            problems.append(f"{path}.$schema: only the root schema may name its dialect")
        if path and isinstance(spec.id_of(node), str):
            resolver = resolver.in_subresource(spec.create_resource(node))
        for key in _REF_KEYS:
            ref = node.get(key)
            if not isinstance(ref, str):
                continue
            if not ref.startswith("#"):
                problems.append(f"{path}.{key}: {_clip(repr(ref), 80)} is not a local reference "
                                "(only '#...' into this schema; remote schemas are never fetched)")
                continue
            try:
                resolver.lookup(ref)
            except referencing.exceptions.Unresolvable:
                problems.append(f"{path}.{key}: cannot resolve {_clip(repr(ref), 80)} in this schema")
        for key, value in node.items():
            if key not in _DATA_KEYS:
                walk(value, f"{path}.{key}", resolver)

    walk(schema, "", _LOCAL_ONLY.resolver_with_root(spec.create_resource(schema)))
    return problems


class SchemaValidator:
    """Validates values against a task schema (one check_schema accepts) or one of its subschemas.

    Patterns match under a time limit, references resolve inside the task schema, and errors never
    escape as exceptions: a reference cycle or an unresolvable reference reads as a violation.
    """

    def __init__(self, schema: dict, subschema: Any = None, _root=None):
        self.root = _root or _extended(_dialect(schema)[0] or jsonschema.Draft202012Validator)(
            schema, registry=_LOCAL_ONLY)
        self.subschema = subschema

    def at(self, subschema: Any) -> "SchemaValidator":
        """The validator of a subschema (a property's), resolving references in the same task schema."""
        return SchemaValidator(self.root.schema, subschema, _root=self.root)

    def errors(self, instance: Any, limit: int = 20) -> list[tuple[str, str]]:
        """(path suffix, message) of the first `limit` violations, ordered by path."""
        out = []
        with pattern_budget():
            try:
                errs = (self.root.iter_errors(instance) if self.subschema is None
                        else self.root.descend(instance, self.subschema))
                for err in errs:
                    out.append((_path(err.absolute_path), _clip(err.message)))
                    if len(out) >= limit:
                        break
            except RecursionError:
                out.append(("", RECURSION))
            except referencing.exceptions.Unresolvable as err:
                out.append(("", _clip(f"unresolvable reference: {err}")))
        return sorted(out, key=lambda e: e[0])

    def first_error(self, instance: Any) -> str | None:
        errs = self.errors(instance, limit=1)
        return errs[0][1] if errs else None

    def is_valid(self, instance: Any) -> bool:
        return not self.errors(instance, limit=1)


def _path(parts) -> str:
    return "".join(f".{p}" if isinstance(p, str) else f"[{p}]" for p in parts)


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --- reading JSONL ---------------------------------------------------------------------------------

def parse_task_lines(lines: Iterable[str], path: str) -> tuple[list[Task], list[str]]:
    tasks, problems, seen = [], [], {}
    for where, row, problem in scan_lines(lines, path):
        if problem:
            problems.append(problem)
            continue
        lineno = int(where.rsplit(":", 1)[1])
        row_problems = check_task_row(row, where)
        if isinstance(row, dict) and isinstance(row.get("id"), str):
            if row["id"] in seen:
                row_problems.append(f"{where}: id: duplicate id {_clip(repr(row['id']), 80)} (first at line {seen[row['id']]})")
            else:
                seen[row["id"]] = lineno
        problems += row_problems
        if not row_problems:
            tasks.append(Task.from_dict(row))
    if not tasks and not problems:
        problems.append(f"{path}: no tasks found (the file is empty)")
    return tasks, problems


def load_tasks(path: str | Path) -> list[Task]:
    """Read and validate a task file; raise TaskFileError listing every problem."""
    path = Path(path)
    tasks, problems = parse_task_lines(jsonl_lines(path), str(path))
    if problems:
        raise TaskFileError(problems)
    return tasks


def load_responses(path: str | Path, task_ids: set[str]) -> list[dict]:
    """Read a responses file: each line has `id` (a known task id) and `response` (a string)."""
    path = Path(path)
    rows, problems = [], []
    for where, row, problem in scan_jsonl(path):
        if problem:
            problems.append(problem)
            continue
        if not isinstance(row, dict):
            problems.append(f"{where}: a response line must be a JSON object")
            continue
        if not isinstance(row.get("id"), str):
            problems.append(f"{where}: id: missing or not a string")
        elif row["id"] not in task_ids:
            problems.append(f"{where}: id: unknown task id {_clip(repr(row['id']), 80)}")
        if not isinstance(row.get("response"), str):
            problems.append(f"{where}: response: missing or not a string")
        rows.append(row)
    if problems:
        raise TaskFileError(problems)
    return rows
