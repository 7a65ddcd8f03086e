"""The LLM proposer of rubric items for a free-text task (the openai endpoint): the facts a reply must state, the
policy it must keep and its pitfalls, each item validated as a task file's (a malformed one skipped and reported).
`rubricrl rubric items --llm` adds its items to the deterministic draft (rubricrl/calibrate/items_draft.py)."""

from __future__ import annotations

import json
import re

from rubricrl.config import JudgeConfig
from rubricrl.core.items import CHECK_KINDS, IMPORTANCES, check_items
from rubricrl.core.prompt import task_user_message
from rubricrl.core.taskfile import Task

MAX_PROPOSED = 8


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
        return propose_with(judge, task)
    finally:
        judge.close()


def propose_with(judge, task: Task, taken: set[str] = frozenset()) -> tuple[list[dict], list[str]]:
    """One call of an open OpenAIJudge for a task's items (ids in `taken` count as duplicates)."""
    text = judge.complete_json(proposal_messages(task), PROPOSAL_SCHEMA, lambda t: t, f"items for {task.id}")
    return parse_item_proposals(text, taken)
