"""Gold metrics that do not depend on the rubric: field-level precision/recall/F1 against the reference."""

from __future__ import annotations

from dataclasses import dataclass

from rubricrl.grounding import values_match
from rubricrl.rubric.parse import parse_response
from rubricrl.taskfile import Task


@dataclass(frozen=True)
class FieldCounts:
    tp: float
    fp: float
    fn: float
    null_ok: int  # gold-null fields answered null (or left out)
    null_total: int

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


def field_counts(task: Task, response: str) -> FieldCounts:
    """Counts over the schema's fields: a non-null answer is a true positive to the extent it matches gold.

    A value for a gold-null field is a false positive; a gold value answered wrongly is both a false
    positive and a false negative; an unparseable response misses every gold value.
    """
    if task.reference is None:
        raise ValueError(f"task {task.id}: field F1 needs a reference answer")
    obj = parse_response(response).obj or {}
    tp = fp = fn = 0.0
    null_ok = null_total = 0
    for name in task.properties:
        gold, pred = task.reference.get(name), obj.get(name)
        if gold is None:
            null_total += 1
            if pred is None:
                null_ok += 1
            else:
                fp += 1
            continue
        if pred is None:
            fn += 1
            continue
        credit = values_match(pred, gold)
        tp += credit
        fp += 1 - credit
        fn += 1 - credit
    return FieldCounts(tp, fp, fn, null_ok, null_total)


def field_f1(task: Task, response: str) -> float:
    return field_counts(task, response).f1
