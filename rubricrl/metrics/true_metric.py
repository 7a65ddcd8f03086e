"""The true metric of any task: the strict per-field metric for extraction (rubricrl.metrics.strict), the checklist
for free text (rubricrl.metrics.checklist), both as StrictCounts so that reports, gates and monitors read them
alike. Shares no code with the reward."""

from __future__ import annotations

from typing import Sequence

from rubricrl.core.taskfile import FREE_TEXT, Task
from rubricrl.metrics.checklist import checklist_counts
from rubricrl.metrics.strict import StrictCounts, strict_counts


def scorable(task: Task) -> bool:
    """Whether the true metric can score the task: a reference (extraction) or a checklist (free text)."""
    if task.kind == FREE_TEXT:
        return isinstance(task.meta.get("checklist"), dict)
    return task.reference is not None


def true_counts(task: Task, response: str, checklist_judge=None) -> StrictCounts:
    """Counts of one response; ValueError naming the task when it cannot be scored (see `scorable`).
    `checklist_judge`: the free-text checklist's judge panel (rubricrl.metrics.checklist_judge.ChecklistJudge, built
    from scoring.checklist_judge), which grades its fact and guard entries; None: the checklist's procedure alone."""
    if task.kind == FREE_TEXT:
        return checklist_counts(task, response, checklist_judge)
    return strict_counts(task, response)


def true_counts_each(tasks: Sequence[Task], responses: Sequence[str], checklist_judge=None) -> list[StrictCounts]:
    """true_counts of each (task, response); with a checklist judge (its prefetch(pairs), then check(task, reply)
    per reply) the free-text replies are graded first, `concurrency` at a time (one call each)."""
    tasks, responses = list(tasks), list(responses)
    if checklist_judge is not None:
        checklist_judge.prefetch([(t, r) for t, r in zip(tasks, responses) if t.kind == FREE_TEXT])
    return [true_counts(t, r, checklist_judge) for t, r in zip(tasks, responses)]


def free_text_columns(kinds) -> str:
    """How the strict columns of a report read for free-text tasks (empty when `kinds` has none): the checklist's
    counts under extraction's names (rubricrl.metrics.checklist.checklist_counts)."""
    if FREE_TEXT not in set(kinds):
        return ""
    return ("For free-text tasks the same columns are the independent checklist (`rubricrl.metrics.checklist`, "
            "written apart from the rubric items and read from the reply's claims sentence by sentence): field "
            "accuracy is the share of checklist entries passed (facts claimed exactly, owed remedies offered and "
            "refused ones said no to, language, length and prose), null for present a fact not stated, invented a "
            "broken guard (an owed remedy refused, a forbidden one promised, a forbidden or invented number), exact "
            "objects a reply that passes all of them; valid JSON and extra text do not apply to them.")
