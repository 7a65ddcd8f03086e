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
