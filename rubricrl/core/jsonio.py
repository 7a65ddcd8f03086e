"""Strict JSON, read the same way everywhere: task files, responses files and model answers.

Strict means JSON that every consumer downstream can hold: no NaN or Infinity, no number beyond
the double range (1e400, a 400-digit integer: they end as inf or crash float()), no lone surrogate
(it cannot be written back as UTF-8), and at most MAX_DEPTH levels of nesting (grounding and schema
validation recurse on it). Every failure is one exception, JSONError, which readers turn into a
`file:line` problem and the scorer into "invalid JSON". Cost is linear in the text.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any, Iterator

from rubricrl.core.errors import RubricRLError

MAX_DEPTH = 64  # extraction answers and task rows nest a handful of levels
MAX_LINE_CHARS = 10_000_000  # one JSONL line (a task, a response); longer is reported, not parsed

_WS = re.compile(r"[ \t\n\r]*")
# Only a run of 200+ digits or a 3-digit exponent can leave the double range (199 digits and an
# exponent below 100 stay under 1e299): texts without one decode with the fast C number parsers.
# (Separate searches: a regex alternation scans twice as slowly.)
_LONG_DIGITS = re.compile(r"[0-9]{200}")
_BIG_EXPONENT = re.compile(r"[eE][-+]?[0-9]{3}")
_SURROGATE_CHAR = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_FLOAT_MAX = sys.float_info.max


class JSONError(RubricRLError, ValueError):
    """Not strict JSON. `pos`: where (for the message); `resume`: where a search for the next JSON
    value may go on (None: nowhere, the rest of the text is too deep to decode)."""

    def __init__(self, msg: str, pos: int, resume: int | None):
        self.msg, self.pos, self.resume = msg, pos, resume
        super().__init__(f"{msg} (column {pos + 1})")


class StrictDecoder:
    """Decodes strict JSON values at any offset of one text (the number parsers are chosen once)."""

    def __init__(self, text: str):
        self.text = text
        self._problem: str | None = None
        big = _LONG_DIGITS.search(text) or _BIG_EXPONENT.search(text)
        hooks = {"parse_int": self._int, "parse_float": self._float} if big else {}
        self._decoder = json.JSONDecoder(parse_constant=self._constant, **hooks)
        self._surrogates = bool(_SURROGATE_CHAR.search(text) or ("\\u" in text and _SURROGATE_ESCAPE.search(text)))

    # The hooks record the first problem instead of raising: an exception from inside the C
    # scanner has no position, so a search could not resume after the value.
    def _flag(self, problem: str) -> None:
        self._problem = self._problem or problem

    def _constant(self, name: str) -> None:
        self._flag(f"{name} is not a JSON number")

    def _int(self, s: str) -> int:
        if len(s) > 320 or abs(value := int(s)) > _FLOAT_MAX:  # 320 chars: far beyond 1.8e308
            self._flag(f"number {s[:20]}... ({len(s)} digits) is out of range")
            return 0
        return value

    def _float(self, s: str) -> float:
        value = float(s)
        if value in (float("inf"), float("-inf")):
            self._flag(f"number {s[:40]} is out of range")
        return value

    def decode_at(self, start: int) -> tuple[Any, int]:
        """The JSON value that starts at text[start] and the index after it; JSONError if none."""
        text, self._problem = self.text, None
        try:
            value, end = self._decoder.raw_decode(text, start)
        except json.JSONDecodeError as err:
            raise JSONError(err.msg, err.pos, max(err.pos, start + 1)) from None
        except RecursionError:
            raise JSONError(f"nested deeper than {MAX_DEPTH} levels", start, None) from None
        problem = self._problem
        if problem is None and text.count("{", start, end) + text.count("[", start, end) > MAX_DEPTH:
            problem = f"nested deeper than {MAX_DEPTH} levels" if _too_deep(value) else None
        if problem is None and self._surrogates and not _encodable(value):
            problem = "a lone surrogate (\\ud800-\\udfff) is not Unicode text"
        if problem is not None:
            raise JSONError(problem, start, end)
        return value, end

    def whole(self) -> Any:
        """The one value the whole text holds (whitespace around it allowed)."""
        text = self.text
        value, end = self.decode_at(_WS.match(text).end())
        end = _WS.match(text, end).end()
        if end != len(text):
            raise JSONError("Extra data", end, end)
        return value


def loads_strict(text: str) -> Any:
    """json.loads for strict JSON (see the module doc); raises JSONError and nothing else."""
    return StrictDecoder(text).whole()


def _too_deep(value) -> bool:
    level = [value]
    for _ in range(MAX_DEPTH):
        level = [c for v in level for c in (v.values() if isinstance(v, dict) else v if isinstance(v, list) else ())
                 if isinstance(c, (dict, list))]
        if not level:
            return False
    return True


def _encodable(value) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# --- JSONL: the one reader of every file the project reads back ------------------------------------------------

def jsonl_lines(path) -> list[str]:
    """The file's lines, split on '\\n' only ('\\r\\n' too): U+2028, U+2029, U+0085 and the like are legal inside
    JSON strings (a model answer may hold them, and they are written raw), and str.splitlines() would cut a line
    there. TaskFileError naming the file (and the line of a UTF-8 error) when it cannot be read."""
    from pathlib import Path

    from rubricrl.core.errors import TaskFileError

    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise TaskFileError([f"{path}: file not found"]) from None
    except OSError as err:
        raise TaskFileError([f"{path}: cannot read ({err.strerror or err})"]) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise TaskFileError([f"{path}:{line}: not UTF-8 text ({err.reason} at byte {err.start})"]) from None
    if text.endswith("\n"):
        text = text[:-1]  # the last line's end, not an empty line after it
    return [line[:-1] if line.endswith("\r") else line for line in text.split("\n")] if text else []


def parse_jsonl_line(line: str, where: str) -> tuple[Any, str | None]:
    """(the line's JSON value, None), (None, problem), or (None, None) for a blank line; `where` is 'file:line'."""
    if len(line) > MAX_LINE_CHARS:
        return None, f"{where}: line is {len(line):,} characters long (limit {MAX_LINE_CHARS:,})"
    if not line.strip():
        return None, None
    try:
        return loads_strict(line), None
    except JSONError as err:
        return None, f"{where}: invalid JSON: {err}"


def scan_lines(lines, path) -> Iterator[tuple[str, Any, str | None]]:
    """(where 'file:line', value, problem) for every non-blank line: the value when the line is strict JSON,
    else None and the problem. The one loop every JSONL reader of the project runs."""
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        value, problem = parse_jsonl_line(line, where)
        yield where, value, problem


def scan_jsonl(path) -> Iterator[tuple[str, Any, str | None]]:
    """scan_lines over a file's lines (jsonl_lines: split on '\\n' only)."""
    return scan_lines(jsonl_lines(path), path)


def read_jsonl(path) -> list:
    """Every row of a JSONL file the project wrote or reads back (eval rows, teacher answers, suite rows): strict
    JSON per line, blank lines skipped; TaskFileError listing every bad line as file:line."""
    from rubricrl.core.errors import TaskFileError

    rows, problems = [], []
    for _, value, problem in scan_jsonl(path):
        if problem:
            problems.append(problem)
        else:
            rows.append(value)
    if problems:
        raise TaskFileError(problems)
    return rows
