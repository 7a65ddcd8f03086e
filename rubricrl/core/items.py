"""Per-task rubric items (Rubrics-as-Rewards style): what a free-text task's reply must do, each item graded on its
own.

A free-text task (no JSON schema) carries `items`, a list of objects:

    {"id": "states_refund", "criterion": "States the refund of 45.00 EUR", "importance": "essential",
     "check": {"kind": "value", "value": "45.00"}}

- `id`: unique within the task ([A-Za-z0-9_.-], up to 64 characters);
- `criterion`: what a good reply does (for a pitfall: the mistake to avoid, e.g. "Promises a refund beyond the
  policy");
- `importance`: essential / important / optional (weighted credit, weights in the rubric YAML) or pitfall (a
  penalty when the reply makes the mistake);
- `check` (optional): a deterministic check of the reply; items without one go to the judge. For a pitfall the
  check says whether the reply *avoids* the mistake (e.g. not_contains), so every check reads "the reply is right".

Check kinds and their arguments (every other key is an error):
- `contains` / `not_contains`: `text` (a string or a list: any one of them counts), compared after
  normalisation (NFKC, case, width, punctuation and whitespace), never cutting a word or number in two;
- `value` / `not_value`: `value` (a number, or a string: an amount, a date YYYY-MM-DD, a time HH:MM) that the reply
  must (must not) state as the source does: read with the grounding code, so "45", "45.00" and "EUR 45" all state
  45, and "March 5, 2024" states 2024-03-05;
- `regex` / `not_regex`: `pattern` (a regular expression, matched under a time limit; a match that runs out of time
  fails the check);
- `states` / `not_states`: one of `text` (a string or a list) and `value` (as for `value`), and optionally `near`
  (a list: one of these words must stand in the same clause: "a refund of 45.00", not a bare 45.00), `ignore` (a
  list: a clause holding one of these is not read: "the shipping is not refunded" says nothing of the item's
  refund) and `polarity`: `any` (the default), `affirmed`, `offered` or `negated`. The reply is read by clause
  (rubricrl/reward/prose.py): a fact is *stated* only by a clause of a prose sentence (a real sentence, not a bag
  of tokens); `affirmed` asks for a clause that does not negate it and no clause anywhere that does (a reply that
  offers the refund and refuses it does not offer it); `offered`, an affirmed one whose sentence commits the shop
  (a modal or an offer verb: "we will", "you can choose", "we are adding", 会, 可以; or "we refund"): "we are
  writing about a refund" offers none; `negated`, a prose clause that negates or refuses it.
  `not_states` passes when no clause, prose or not, holds it with that polarity (`any`: at all);
- `coherent`: `language` ("en" or "zh"), optionally `min_share` (0.75): at least that share of the reply's words
  stand in prose sentences of that language. A gate: a reply that fails it earns no credit from any item
  (pitfalls still cost);
- `length`: at least one of `min_chars`, `max_chars`, `min_words`, `max_words`, `max_paragraphs` (a CJK character
  counts as a word);
- `source_numbers`: no arguments: every number the reply states (amounts, dates' days and years, counts, order
  numbers) is one the task's source text states (the check of a pitfall such as "invents an amount or a date");
- `language`: `language` ("en" or "zh"): the reply's letters are mostly in that script;
- `ifeval`: `instruction_id` (an IFEval instruction id, e.g. "detectable_format:number_bullet_lists") and `kwargs`
  (its arguments), checked by the `if-verifiable` package's IFEval checkers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

IMPORTANCES = ("essential", "important", "optional", "pitfall")
# Words a reply has no reason to use: talking to whoever grades it instead of to its reader (a not_regex check).
GRADER_WORDS = {"en": r"(?i)\b(rubric|grader|grading|full marks|score this|evaluator)\b",
                "zh": r"评分|满分|评分标准|打分"}
_ID = re.compile(r"[A-Za-z0-9_.\-]{1,64}")
_LANGUAGES = ("en", "zh")
_LENGTH_KEYS = ("min_chars", "max_chars", "min_words", "max_words", "max_paragraphs")
# kind -> (required keys, optional keys)
CHECK_KINDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "contains": (("text",), ()),
    "not_contains": (("text",), ()),
    "value": (("value",), ()),
    "not_value": (("value",), ()),
    "regex": (("pattern",), ()),
    "not_regex": (("pattern",), ()),
    "length": ((), _LENGTH_KEYS),
    "source_numbers": ((), ("allow",)),  # allow: numbers a reply may work out (a delay, the days of a pro-rata)
    "language": (("language",), ()),
    "ifeval": (("instruction_id",), ("kwargs",)),
    "states": ((), ("text", "value", "near", "ignore", "polarity")),
    "not_states": ((), ("text", "value", "near", "ignore", "polarity")),
    "coherent": (("language",), ("min_share",)),
}
POLARITIES = ("any", "affirmed", "offered", "negated")


@dataclass(frozen=True)
class Item:
    id: str
    criterion: str
    importance: str
    check: dict | None = None  # {"kind": ..., its arguments}

    @property
    def pitfall(self) -> bool:
        return self.importance == "pitfall"

    def to_dict(self) -> dict:
        row: dict[str, Any] = {"id": self.id, "criterion": self.criterion, "importance": self.importance}
        if self.check is not None:
            row["check"] = self.check
        return row

    @classmethod
    def from_dict(cls, row: dict) -> "Item":
        return cls(id=row["id"], criterion=row["criterion"], importance=row["importance"], check=row.get("check"))


def check_items(items: Any) -> list[str]:
    """Problems of a task's `items`, each as a key path suffix ('.<item id>.check.kind: ...' or ': ...')."""
    if not isinstance(items, list) or not items:
        return [": must be a non-empty list of rubric items"]
    problems, seen = [], set()
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            problems.append(f"[{i}]: must be an object, got {type(item).__name__}")
            continue
        iid = item.get("id")
        name = f".{iid}" if isinstance(iid, str) and _ID.fullmatch(iid) else f"[{i}]"
        if not isinstance(iid, str) or not _ID.fullmatch(iid):
            problems.append(f"{name}.id: must be 1-64 characters of A-Z a-z 0-9 _ . -")
        elif iid in seen:
            problems.append(f"{name}.id: duplicate item id")
        else:
            seen.add(iid)
        for key in sorted(set(item) - {"id", "criterion", "importance", "check"}):
            problems.append(f"{name}: {str(key)[:80]}: unknown key (allowed: check, criterion, id, importance)")
        if not isinstance(item.get("criterion"), str) or not item["criterion"].strip():
            problems.append(f"{name}.criterion: must be a non-empty string")
        if item.get("importance") not in IMPORTANCES:
            problems.append(f"{name}.importance: must be one of {', '.join(IMPORTANCES)}, got {item.get('importance')!r}"[:300])
        if item.get("check") is not None:
            problems += [f"{name}.check{p}" for p in check_problems(item["check"])]
    return problems


def check_problems(check: Any) -> list[str]:
    """Problems of one item's `check`."""
    if not isinstance(check, dict):
        return [f": must be an object, got {type(check).__name__}"]
    kind = check.get("kind")
    if not isinstance(kind, str) or kind not in CHECK_KINDS:
        return [f".kind: must be one of {', '.join(CHECK_KINDS)}, got {str(kind)[:80]!r}"]
    required, optional = CHECK_KINDS[kind]
    problems = [f".{k}: missing (a {kind} check needs it)" for k in required if k not in check]
    problems += [f".{str(k)[:80]}: unknown key for a {kind} check (allowed: {', '.join(('kind',) + required + optional)})"
                 for k in sorted(set(check) - {"kind", *required, *optional}, key=str)]
    if problems:
        return problems
    if kind in ("contains", "not_contains"):
        problems += _text_problems(check["text"])
    elif kind in ("value", "not_value"):
        problems += _value_problems(check["value"])
    elif kind in ("states", "not_states"):
        given = [k for k in ("text", "value") if k in check]
        if len(given) != 1:
            return [f": a {kind} check needs exactly one of text, value"]
        problems += _text_problems(check["text"]) if given == ["text"] else _value_problems(check["value"])
        for key in ("near", "ignore"):
            if key in check and (not isinstance(check[key], list) or _text_problems(check[key])):
                problems.append(f".{key}: must be a non-empty list of non-empty strings")
        if check.get("polarity", "any") not in POLARITIES:
            problems.append(f".polarity: must be one of {', '.join(POLARITIES)}")
    elif kind == "coherent":
        if check["language"] not in _LANGUAGES:
            problems.append(f".language: must be one of {', '.join(_LANGUAGES)}")
        share = check.get("min_share", 1)
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
            problems.append(".min_share: must be a number in (0, 1]")
    elif kind in ("regex", "not_regex"):
        problems += _pattern_problems(check["pattern"])
    elif kind == "length":
        given = [k for k in _LENGTH_KEYS if k in check]
        if not given:
            problems.append(f": a length check needs at least one of {', '.join(_LENGTH_KEYS)}")
        for k in given:
            if isinstance(check[k], bool) or not isinstance(check[k], int) or check[k] < 0:
                problems.append(f".{k}: must be a non-negative integer")
        for lo, hi in (("min_chars", "max_chars"), ("min_words", "max_words")):
            if not problems and lo in check and hi in check and check[lo] > check[hi]:
                problems.append(f".{lo}: {check[lo]} exceeds {hi} {check[hi]}")
    elif kind == "source_numbers":
        allow = check.get("allow", [])
        if not isinstance(allow, list) or not all(
                isinstance(x, (int, float)) and not isinstance(x, bool) for x in allow):
            problems.append(".allow: must be a list of numbers")
    elif kind == "language":
        if check["language"] not in _LANGUAGES:
            problems.append(f".language: must be one of {', '.join(_LANGUAGES)}")
    elif kind == "ifeval":
        problems += _ifeval_problems(check["instruction_id"], check.get("kwargs", {}))
    return problems


def _text_problems(text: Any) -> list[str]:
    texts = text if isinstance(text, list) else [text]
    if not texts or not all(isinstance(t, str) and t.strip() for t in texts):
        return [".text: must be a non-empty string or a non-empty list of them"]
    return []


def _value_problems(v: Any) -> list[str]:
    if isinstance(v, bool) or not isinstance(v, (int, float, str)) or (isinstance(v, str) and not v.strip()):
        return [".value: must be a number or a non-empty string"]
    return []


def _pattern_problems(pattern: Any) -> list[str]:
    import regex

    if not isinstance(pattern, str) or not pattern:
        return [".pattern: must be a non-empty string"]
    try:
        regex.compile(pattern)
    except (regex.error, RecursionError, ValueError, OverflowError) as err:
        return [f".pattern: not a valid regular expression: {str(err)[:120]}"]
    return []


def _ifeval_problems(instruction_id: Any, kwargs: Any) -> list[str]:
    """The checker is built with the item's arguments and run once, so that what would fail while scoring (an
    unknown argument, a bad type, a checker needing NLTK data that is not installed) fails at load time."""
    from if_verifiable.ifeval.instructions_registry import INSTRUCTION_DICT

    if not isinstance(instruction_id, str) or instruction_id not in INSTRUCTION_DICT:
        return [f".instruction_id: not an IFEval instruction id: {str(instruction_id)[:80]!r}"]
    if not isinstance(kwargs, dict):
        return [".kwargs: must be an object"]
    checker = INSTRUCTION_DICT[instruction_id](instruction_id)
    # The checkers draw an argument left out (or None) at random: every one must be given.
    expected = set(checker.get_instruction_args_keys() or ())
    given = {k for k, v in kwargs.items() if v is not None}
    if given != expected:
        return [f".kwargs: {instruction_id} needs exactly {sorted(expected)}, got {sorted(given)}"[:300]]
    try:
        checker.build_description(**kwargs)
        checker.check_following("A reply.")
    except Exception as exc:  # any failure here is a data error: say which instruction and why
        return [f".kwargs: rejected by {instruction_id}: {str(exc)[:160]}"]
    return []
