"""Stratified slices: every slice the pipeline takes (eval's test tasks per part, distillation's and export's
verification tasks, the hack monitor's and calibration's validation tasks) draws round-robin across strata
(part, domain, language), so a short slice sees every held-out domain instead of the first ones in file order."""

from __future__ import annotations

from typing import Callable, Hashable, Sequence, TypeVar

from rubricrl.core.taskfile import Task

T = TypeVar("T")


def stratum(task: Task) -> tuple:
    """A task's stratum: its test part, domain and language (absent keys count as one stratum)."""
    m = task.meta or {}
    return (m.get("part"), m.get("domain"), m.get("lang"))


def stratified(items: Sequence[T], n: int | None, key: Callable[[T], Hashable] = stratum) -> list[T]:
    """n items taken one stratum at a time in turn (strata in order of first appearance, each in file order),
    returned in file order; n None or >= len(items): every item. Deterministic: no randomness."""
    if n is None or n >= len(items):
        return list(items)
    groups: dict[Hashable, list[int]] = {}
    for i, item in enumerate(items):
        groups.setdefault(key(item), []).append(i)
    queues, chosen = [list(g) for g in groups.values()], []
    while len(chosen) < n:
        for q in queues:
            if q and len(chosen) < n:
                chosen.append(q.pop(0))
    return [items[i] for i in sorted(chosen)]
