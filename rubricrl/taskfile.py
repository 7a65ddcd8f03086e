"""The public task format (JSONL, one extraction task per line) and its validation.

Keys: id, instruction, text, schema (a JSON Schema object), optional constraints (list of
strings), optional reference (gold answer object) and optional meta (free-form object, e.g.
domain/language/split part). Every problem is reported as `file:line: key: what`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import jsonschema
from jsonschema.validators import validator_for

from rubricrl.errors import TaskFileError

REQUIRED_KEYS = ("id", "instruction", "text", "schema")
OPTIONAL_KEYS = ("constraints", "reference", "meta")
ALLOWED_KEYS = set(REQUIRED_KEYS) | set(OPTIONAL_KEYS)


@dataclass(frozen=True)
class Task:
    id: str
    instruction: str
    text: str
    schema: dict
    constraints: tuple[str, ...] = ()
    reference: dict | None = None
    meta: dict = field(default_factory=dict)

    @property
    def properties(self) -> dict:
        return self.schema.get("properties", {})

    @property
    def required(self) -> list[str]:
        return list(self.schema.get("required", []))

    def to_dict(self) -> dict:
        row: dict[str, Any] = {
            "id": self.id,
            "instruction": self.instruction,
            "text": self.text,
            "schema": self.schema,
            "constraints": list(self.constraints),
        }
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
            schema=row["schema"],
            constraints=tuple(row.get("constraints") or ()),
            reference=row.get("reference"),
            meta=dict(row.get("meta") or {}),
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
        problems.append(f"{where}: {key}: unknown key (allowed: {', '.join(sorted(ALLOWED_KEYS))})")
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
    if "schema" in row:
        schema_problems = check_schema(row["schema"])
        problems += [f"{where}: schema{p}" for p in schema_problems]
        schema_ok = not schema_problems
    ref = row.get("reference")
    if ref is not None:
        if not isinstance(ref, dict):
            problems.append(f"{where}: reference: must be an object or null")
        elif schema_ok:
            validator = validator_for(row["schema"])(row["schema"])
            for err in sorted(validator.iter_errors(ref), key=lambda e: list(e.absolute_path)):
                path = "".join(f".{p}" if isinstance(p, str) else f"[{p}]" for p in err.absolute_path)
                problems.append(
                    f"{where}: reference{path}: does not validate against its schema: {err.message}"
                )
    return problems


def check_schema(schema: Any) -> list[str]:
    """Problems of a task schema, each as a key path suffix ('.properties.x: ...' or ': ...')."""
    if not isinstance(schema, dict):
        return [f": must be a JSON Schema object, got {type(schema).__name__}"]
    cls = validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as err:
        path = "".join(f".{p}" if isinstance(p, str) else f"[{p}]" for p in err.absolute_path)
        return [f"{path}: not a valid JSON Schema: {err.message}"]
    problems = []
    if schema.get("type") != "object":
        problems.append('.type: must be "object" (extraction answers are JSON objects)')
    props = schema.get("properties")
    if not isinstance(props, dict) or not props:
        problems.append(".properties: must be a non-empty object")
        props = {}
    for name in schema.get("required", []):
        if name not in props:
            problems.append(f".required: '{name}' is not in properties")
    return problems


def parse_task_lines(lines: Iterable[str], path: str) -> tuple[list[Task], list[str]]:
    tasks, problems, seen = [], [], {}
    for lineno, line in enumerate(lines, start=1):
        where = f"{path}:{lineno}"
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            problems.append(f"{where}: invalid JSON: {err.msg} (column {err.colno})")
            continue
        row_problems = check_task_row(row, where)
        if isinstance(row, dict) and isinstance(row.get("id"), str):
            if row["id"] in seen:
                row_problems.append(f"{where}: id: duplicate id '{row['id']}' (first at line {seen[row['id']]})")
            else:
                seen[row["id"]] = lineno
        problems += row_problems
        if not row_problems:
            tasks.append(Task.from_dict(row))
    if not tasks and not problems:
        problems.append(f"{path}: no tasks found (the file is empty)")
    return tasks, problems


def _read_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise TaskFileError([f"{path}: file not found"]) from None
    except UnicodeDecodeError as err:
        raise TaskFileError([f"{path}: not UTF-8 text ({err.reason} at byte {err.start})"]) from None


def load_tasks(path: str | Path) -> list[Task]:
    """Read and validate a task file; raise TaskFileError listing every problem."""
    path = Path(path)
    tasks, problems = parse_task_lines(_read_lines(path), str(path))
    if problems:
        raise TaskFileError(problems)
    return tasks


def load_responses(path: str | Path, task_ids: set[str]) -> list[dict]:
    """Read a responses file: each line has `id` (a known task id) and `response` (a string)."""
    path = Path(path)
    rows, problems = [], []
    for lineno, line in enumerate(_read_lines(path), start=1):
        where = f"{path}:{lineno}"
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            problems.append(f"{where}: invalid JSON: {err.msg} (column {err.colno})")
            continue
        if not isinstance(row, dict):
            problems.append(f"{where}: a response line must be a JSON object")
            continue
        if not isinstance(row.get("id"), str):
            problems.append(f"{where}: id: missing or not a string")
        elif row["id"] not in task_ids:
            problems.append(f"{where}: id: unknown task id '{row['id']}'")
        if not isinstance(row.get("response"), str):
            problems.append(f"{where}: response: missing or not a string")
        rows.append(row)
    if problems:
        raise TaskFileError(problems)
    return rows
