"""The one prompt template: a task becomes chat messages the same way in SFT, GRPO, eval and judge.

An extraction task shows its schema; a free-text task shows its instruction, constraints and text, never its rubric
items (they grade the reply; shown, they would be a checklist to recite)."""

from __future__ import annotations

import json

from rubricrl.core.schema_text import render
from rubricrl.core.taskfile import Task

# Every stage is compute-bound on prompt tokens, so the prompt says each thing once and the schema comes in
# the compact notation of rubricrl.core.schema_text (~100 tokens instead of ~200 as JSON).
SYSTEM_PROMPT = (
    "You extract structured data from text. Answer with one JSON object that follows the given "
    "schema, and nothing else: no explanation, no code fence."
)
FREE_TEXT_SYSTEM_PROMPT = (
    "You write the reply the instruction asks for, from the facts in the given text and nothing else. Answer "
    "with the reply itself: no preamble, no notes."
)


def task_user_message(task: Task) -> str:
    lines = [task.instruction.strip(), ""]
    if task.constraints:
        lines.append("Constraints:")
        lines += [f"- {c}" for c in task.constraints]
        lines.append("")
    if task.schema is not None:
        lines.append("Schema:")
        lines.append(render(task.schema))
        lines.append("")
    lines.append("Text:")
    lines.append(task.text.strip())
    return "\n".join(lines)


def task_messages(task: Task) -> list[dict]:
    return [
        {"role": "system", "content": SYSTEM_PROMPT if task.schema is not None else FREE_TEXT_SYSTEM_PROMPT},
        {"role": "user", "content": task_user_message(task)},
    ]


def gold_completion(task: Task) -> str:
    """The answer text SFT trains on: the reference as compact JSON (extraction) or the gold reply (free text)."""
    if task.reference is None:
        raise ValueError(f"task {task.id}: no reference answer")
    if isinstance(task.reference, str):
        return task.reference
    return json.dumps(task.reference, ensure_ascii=False)
