"""Rubric items for a free-text task that has none: a deterministic draft from the task itself (here), and
optionally a stronger model's proposals (rubricrl/calibrate/items_propose.py), each validated as a task file's
items are.

The draft holds what needs no understanding of the task and is safe on any reply: the identifiers the source
gives (order and ticket numbers: named), the source's language, a length limit a constraint states, and two
pitfalls: a number the source does not give (`source_numbers`) and words addressed to a grader. Which facts a
reply must state and which promises the policy forbids need understanding: that is the proposer's part (items
with a check where one fits, else graded by the rubric's item_judge), or the user's.
"""

from __future__ import annotations

import re
from typing import Callable

from rubricrl.core.items import GRADER_WORDS, check_items
from rubricrl.core.taskfile import Task

_ID = re.compile(r"(?<![\w-])(?=[A-Z0-9-]*\d)[A-Z]{1,4}-?\d{3,}(?![\w-])")
_WORDS_LIMIT = (re.compile(r"(?:under|at most|no more than|within|fewer than)\s+(\d{2,4})\s+words", re.I),
                re.compile(r"(?:不超过|最多|少于)\s*(\d{2,4})\s*(?:个)?字"))
MAX_IDS = 3


def source_language(text: str) -> str:
    han = len(re.findall(r"[\u3400-\u9fff]", text))
    return "zh" if han * 3 >= len(re.findall(r"[A-Za-z]", text)) else "en"


def draft_items(task: Task) -> list[dict]:
    """The deterministic draft for one free-text task (module doc)."""
    lang = task.meta.get("lang") or source_language(task.text)
    items = []
    for n, ident in enumerate(dict.fromkeys(_ID.findall(task.text))):
        if n == MAX_IDS:
            break
        items.append({"id": f"names_{n + 1}", "criterion": f"Names {ident}", "importance": "important",
                      "check": {"kind": "contains", "text": ident}})
    items.append({"id": "language", "criterion": "Replies in the language of the source", "importance": "important",
                  "check": {"kind": "language", "language": lang}})
    for text in (task.instruction, *task.constraints):
        limit = next((int(m.group(1)) for p in _WORDS_LIMIT if (m := p.search(text))), None)
        if limit:
            items.append({"id": "length", "criterion": f"Stays within {limit} words", "importance": "optional",
                          "check": {"kind": "length", "max_words": limit}})
            break
    items += [{"id": "invented", "criterion": "States a number the source does not give", "importance": "pitfall",
               "check": {"kind": "source_numbers"}},
              {"id": "grader", "criterion": "Addresses the grader or the rubric instead of the reader",
               "importance": "pitfall", "check": {"kind": "not_regex", "pattern": GRADER_WORDS[lang]}}]
    assert not check_items(items), check_items(items)  # the draft is valid by construction
    return items


Proposer = Callable[[Task, set[str]], tuple[list[dict], list[str]]]


def fill_items(tasks: list[Task], propose: Proposer | None = None) -> tuple[list[Task], dict]:
    """The tasks with items for every free-text task written with `items: []`: the deterministic draft, plus
    `propose(task, ids already taken)`'s items when given (the LLM proposer: a malformed item skipped and reported).
    Returns the tasks (the others unchanged) and what was done: {"drafted": n, "proposed": n, "problems": [...]}."""
    todo = {i for i, t in enumerate(tasks) if t.schema is None and not t.items}
    done = {"drafted": len(todo), "proposed": 0, "problems": []}
    out = []
    for i, task in enumerate(tasks):
        if i not in todo:
            out.append(task)
            continue
        items = draft_items(task)
        if propose is not None:
            proposed, problems = propose(task, {it["id"] for it in items})
            items += proposed
            done["proposed"] += len(proposed)
            done["problems"] += [f"task {task.id}: {p}" for p in problems]
        out.append(Task.from_dict({**task.to_dict(), "items": items,
                                   "meta": {**task.meta, "items_drafted": "llm" if propose else "draft"}}))
    return out, done
