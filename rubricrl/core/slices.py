"""Stratified slices: every slice the pipeline takes (eval's test tasks per part, distillation's and export's
verification tasks, the hack monitor's and calibration's validation tasks) draws round-robin across strata
(part, task kind, domain, language), so a short slice sees every held-out domain, and both kinds of a mixed
data set, instead of the first ones in file order."""

from __future__ import annotations

from typing import Callable, Hashable, Iterator, Sequence, TypeVar

from rubricrl.core.taskfile import Task

T = TypeVar("T")


def stratum(task: Task) -> tuple:
    """A task's stratum: its test part, kind (extraction or free text), domain and language (absent keys count as
    one stratum)."""
    m = task.meta or {}
    return (m.get("part"), task.kind, m.get("domain"), m.get("lang"))


def stratified(items: Sequence[T], n: int | None, key: Callable[[T], Hashable] = stratum) -> list[T]:
    """n items drawn round-robin level by level of the key: across its first element (the test part), within
    each of those across the next (kind, then domain, then language); groups in order of first appearance,
    each in file order. Returned in file order; n None or >= len(items): every item. Deterministic.

    Level by level, so that a part with more domains does not take a short slice to itself: 8 of a test split
    whose in-domain part has 4 domains and whose held-out part has 2 are 4 and 4 (every domain once), not 8 and 0."""
    if n is None or n >= len(items):
        return list(items)
    keys = [key(item) for item in items]
    keys = [k if isinstance(k, tuple) else (k,) for k in keys]
    draw, chosen = _round_robin(list(range(len(items))), keys, 0), []
    while len(chosen) < n:
        chosen.append(next(draw))
    return [items[i] for i in sorted(chosen)]


def _round_robin(indices: list[int], keys: list[tuple], level: int) -> Iterator[int]:
    """The indices, one group of keys[i][level] at a time in turn, each group drawn the same way one level down."""
    if not indices or level >= max(len(keys[i]) for i in indices):
        yield from indices
        return
    groups: dict[Hashable, list[int]] = {}
    for i in indices:
        groups.setdefault(keys[i][level] if level < len(keys[i]) else None, []).append(i)
    draws = [_round_robin(g, keys, level + 1) for g in groups.values()]
    while draws:
        for d in list(draws):
            i = next(d, None)
            if i is None:
                draws.remove(d)
            else:
                yield i
