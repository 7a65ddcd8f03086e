"""The true metric of any task: the strict per-field metric for extraction (rubricrl.metrics.strict), the checklist
for free text (rubricrl.metrics.checklist), both as StrictCounts so that reports, gates and monitors read them
alike. Shares no code with the reward."""

from __future__ import annotations

from rubricrl.core.taskfile import FREE_TEXT, Task
from rubricrl.metrics.checklist import checklist_counts
from rubricrl.metrics.strict import StrictCounts, strict_counts


def scorable(task: Task) -> bool:
    """Whether the true metric can score the task: a reference (extraction) or a checklist (free text)."""
    if task.kind == FREE_TEXT:
        return isinstance(task.meta.get("checklist"), dict)
    return task.reference is not None


def true_counts(task: Task, response: str) -> StrictCounts:
    """Counts of one response; ValueError naming the task when it cannot be scored (see `scorable`)."""
    if task.kind == FREE_TEXT:
        return checklist_counts(task, response)
    return strict_counts(task, response)


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
