"""The rubric as reward functions TRL's GRPOTrainer calls directly.

`RubricReward` returns one float per completion (the rubric total). `component_funcs()` gives one
function per criterion and penalty plus their weights, so TRL logs each as `rewards/<id>/mean` and
its weighted sum equals the total; they share one scoring pass per batch.
"""

from __future__ import annotations

import json
from typing import Callable, Mapping

from rubricrl.reward.scoring import RubricScorer, ScoreResult
from rubricrl.reward.spec import Criterion
from rubricrl.core.taskfile import Task


def completion_text(completion) -> str:
    """TRL passes plain strings, or for chat data a list of messages: take the assistant's text."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion:
        last = completion[-1]
        if isinstance(last, dict):
            return str(last.get("content") or "")
    raise TypeError(f"cannot read a completion of type {type(completion).__name__}")


class RubricReward:
    """Callable as `reward(prompts, completions, **columns) -> list[float]`.

    Each sample must name its task: a `task_id` column (looked up in `tasks`) or a `task` column
    holding the task as a dict or JSON string.
    """

    __name__ = "rubric"

    def __init__(self, scorer: RubricScorer, tasks: Mapping[str, Task] | None = None):
        self.scorer = scorer
        self.tasks = dict(tasks or {})
        self.last_results: list[ScoreResult] = []
        self._last_key: tuple | None = None

    def _task(self, i: int, columns: dict) -> Task:
        if "task" in columns and columns["task"] is not None:
            raw = columns["task"][i]
            return Task.from_dict(json.loads(raw) if isinstance(raw, str) else raw)
        ids = columns.get("task_id")
        if ids is None:
            raise KeyError("the reward needs a 'task_id' or 'task' column in the training data")
        try:
            return self.tasks[ids[i]]
        except KeyError:
            raise KeyError(f"unknown task id '{ids[i]}' passed to the reward") from None

    def score(self, completions: list, **columns) -> list[ScoreResult]:
        texts = [completion_text(c) for c in completions]
        names = columns.get("task_id") or columns.get("task") or []
        key = (tuple(map(str, names)), tuple(texts))
        if key == self._last_key:
            return self.last_results  # the per-component functions share one scoring pass
        pairs = [(self._task(i, columns), t) for i, t in enumerate(texts)]
        self.last_results = self.scorer.score_batch(pairs)
        self._last_key = key
        return self.last_results

    def __call__(self, prompts=None, completions=None, **columns) -> list[float]:
        return [r.total for r in self.score(completions, **columns)]

    def component_funcs(self) -> tuple[list[Callable], list[float]]:
        funcs, weights = [], []
        for comp in self.scorer.rubric.criteria + self.scorer.rubric.penalties:
            funcs.append(self._component_func(comp.id))
            weights.append(comp.weight if isinstance(comp, Criterion) else -1.0)
        return funcs, weights

    def _component_func(self, cid: str) -> Callable:
        def component(prompts=None, completions=None, **columns) -> list[float | None]:
            # None where the criterion is not for the task's kind (a mixed batch): TRL leaves it out of the sum.
            return [next((c.score for c in r.components if c.id == cid), None)
                    for r in self.score(completions, **columns)]

        component.__name__ = cid
        return component
