"""What every judge takes and returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from rubricrl.core.items import Item
from rubricrl.reward.spec import Criterion
from rubricrl.core.taskfile import Task


@dataclass(frozen=True)
class JudgeRequest:
    task: Task
    response: str  # the raw model output under judgement
    parsed: dict | None  # the JSON object extracted from it, None when there is none
    criterion: Criterion


@dataclass
class Verdict:
    score: float
    reason: str
    samples: list[float] = field(default_factory=list)  # every sampled score, in order
    calls: int = 0  # judge model calls made for this verdict (cache hits cost none)


@dataclass(frozen=True)
class ItemRequest:
    """Rubric items of a free-text task (at most the judge's item_batch) to grade on one reply."""

    task: Task
    response: str
    items: tuple[Item, ...]


@dataclass
class ItemGrades:
    met: dict[str, bool | None]  # item id -> does the reply meet it (for a pitfall: avoid the mistake); None: ungraded
    reasons: dict[str, str]
    calls: int = 0
    samples: int = 0  # samples taken (majority of them per item)


class Judge(Protocol):
    name: str

    def judge_batch(self, requests: list[JudgeRequest]) -> list[Verdict]:
        """One verdict per request, in order. Raise JudgeError rather than return a silent 0."""
        ...
