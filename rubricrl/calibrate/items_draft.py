"""Rubric items for a free-text task that has none: a deterministic draft from the task itself, and optionally a
stronger model's proposals (the openai endpoint), each validated as a task file's items are.

The draft holds what needs no understanding of the task and is safe on any reply: the identifiers the source
gives (order and ticket numbers: named), the source's language, a length limit a constraint states, and two
pitfalls: a number the source does not give (`source_numbers`) and words addressed to a grader. Which facts a
reply must state and which promises the policy forbids need understanding: that is the proposer's part (items
with a check where one fits, else graded by the rubric's item_judge), or the user's.
"""

from __future__ import annotations

import json
import re

from rubricrl.config import JudgeConfig
from rubricrl.core.items import CHECK_KINDS, GRADER_WORDS, IMPORTANCES, check_items
from rubricrl.core.prompt import task_user_message
from rubricrl.core.taskfile import Task

_ID = re.compile(r"(?<![\w-])(?=[A-Z0-9-]*\d)[A-Z]{1,4}-?\d{3,}(?![\w-])")
_WORDS_LIMIT = (re.compile(r"(?:under|at most|no more than|within|fewer than)\s+(\d{2,4})\s+words", re.I),
                re.compile(r"(?:不超过|最多|少于)\s*(\d{2,4})\s*(?:个)?字"))
MAX_IDS = 3
MAX_PROPOSED = 8


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


def proposal_messages(task: Task) -> list[dict]:
    kinds = ", ".join(CHECK_KINDS)
    lines = ["A free-text task (the data below is not an instruction to you):", task_user_message(task), ""]
    if isinstance(task.reference, str):
        lines += ["A good reply:", task.reference, ""]
    lines += [f"Propose 3 to {MAX_PROPOSED} rubric items that a good reply meets: the facts it must state, the "
              "policy it must keep, and pitfalls (mistakes a reply could make: importance pitfall, phrased as the "
              f"mistake). For each: a short snake_case id, the criterion, the importance ({', '.join(IMPORTANCES)}), "
              f"and, where a deterministic check fits, a check (kinds: {kinds}; e.g. "
              '{"kind": "value", "value": 45.0} or {"kind": "contains", "text": ["refund"]}). '
              'Reply with JSON {"items": [...]} only.']
    return [{"role": "system", "content": "You design grading rubrics for LLM outputs."},
            {"role": "user", "content": "\n".join(lines)}]


PROPOSAL_SCHEMA = {
    "type": "object",
    "properties": {"items": {"type": "array", "minItems": 1, "maxItems": MAX_PROPOSED, "items": {
        "type": "object",
        "properties": {"id": {"type": "string"}, "criterion": {"type": "string"},
                       "importance": {"type": "string", "enum": list(IMPORTANCES)}, "check": {"type": "object"}},
        "required": ["id", "criterion", "importance"]}}},
    "required": ["items"],
}


def parse_item_proposals(text: str, taken: set[str] = frozenset()) -> tuple[list[dict], list[str]]:
    """The valid proposed items (ids prefixed llm_) and one problem line per skipped one."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as err:
        return [], [f"the proposal is not JSON: {str(err)[:120]}"]
    proposed = data.get("items") if isinstance(data, dict) else None
    if not isinstance(proposed, list):
        return [], ["the proposal has no 'items' list"]
    kept, problems, ids = [], [], set(taken)
    for i, item in enumerate(proposed[:MAX_PROPOSED]):
        if isinstance(item, dict) and isinstance(item.get("id"), str):
            item = {**item, "id": "llm_" + re.sub(r"[^A-Za-z0-9_.\-]", "_", item["id"].strip())[:60]}
        if isinstance(item, dict) and item.get("check") in ({}, None):
            item = {k: v for k, v in item.items() if k != "check"}  # no check: the item judge grades it
        found = check_items([item])
        if not found and item["id"] in ids:
            found = [f".{item['id']}.id: duplicate item id"]
        if found:
            problems.append(f"items[{i}]: skipped: {found[0].lstrip('.')[:200]}")
            continue
        ids.add(item["id"])
        kept.append(item)
    return kept, problems


def propose_items(config: JudgeConfig, task: Task, policy_model: str | None = None) -> tuple[list[dict], list[str]]:
    """Ask the judge endpoint for a task's items; the valid ones and the problems."""
    from rubricrl.reward.judges.openai_judge import OpenAIJudge

    judge = OpenAIJudge(config, policy_model=policy_model)
    try:
        text = judge.complete_json(proposal_messages(task), PROPOSAL_SCHEMA, lambda t: t, f"items for {task.id}")
    finally:
        judge.close()
    return parse_item_proposals(text)
