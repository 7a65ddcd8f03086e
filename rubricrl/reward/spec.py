"""The rubric spec: a YAML file of weighted criteria and capped penalties.

total = sum(weight * score for criteria) - sum(penalty amounts). Rule criteria and penalties
name a function in the registry (rubricrl.reward.rules); judge criteria name a judge. Each criterion and penalty
scores the task kinds in its `tasks` (extraction, free_text; extraction when left out): a task is scored by those
for its kind, so one rubric can hold both and one batch can mix them.
"""

from __future__ import annotations

from typing import Literal

import yaml
from pydantic import Field, model_validator

from rubricrl.config import JudgeConfig
from rubricrl.core.yamlfile import Strict


class Example(Strict):
    label: Literal["good", "bad"]
    answer: str
    why: str


TaskKind = Literal["extraction", "free_text"]


class Criterion(Strict):
    id: str
    kind: Literal["rule", "judge"]
    description: str
    tasks: list[TaskKind] = Field(default_factory=lambda: ["extraction"], min_length=1)
    range: tuple[float, float] = (0.0, 3.0)
    weight: float = Field(1.0, ge=0.0)  # 0 logs a criterion without optimising it
    fn: str | None = None  # rule: registry name
    judge: str | None = None  # judge: name of a judge in the rubric's judges or params
    params: dict = Field(default_factory=dict)
    scale: dict[int, str] = Field(default_factory=dict)  # judge: meaning of each score
    examples: list[Example] = Field(default_factory=list)
    source: str = "manual"  # where the criterion came from (manual, schema, llm, ...)

    @model_validator(mode="after")
    def _check(self):
        lo, hi = self.range
        if hi <= lo:
            raise ValueError(f"range: max ({hi}) must exceed min ({lo})")
        if self.kind == "rule" and not self.fn:
            raise ValueError("fn: a rule criterion must name its function")
        if self.kind == "judge" and not self.judge:
            raise ValueError("judge: a judge criterion must name its judge")
        return self

    @property
    def max(self) -> float:
        return self.range[1]


class Penalty(Strict):
    id: str
    description: str
    tasks: list[TaskKind] = Field(default_factory=lambda: ["extraction"], min_length=1)
    fn: str
    per: float = Field(gt=0)  # amount per unit (character, invented value, ...)
    # The most this penalty can take off; null: no cap (missed_values: a cap made every null past it cheap).
    cap: float | None = Field(gt=0)
    params: dict = Field(default_factory=dict)
    source: str = "manual"


class Rubric(Strict):
    name: str
    version: int = 1
    description: str = ""
    criteria: list[Criterion]
    penalties: list[Penalty] = Field(default_factory=list)
    judges: dict[str, JudgeConfig] = Field(default_factory=lambda: {"grounded": JudgeConfig(type="grounded")})
    # The judge (one of `judges`) that grades a free-text task's items that have no deterministic check; None:
    # such items are left ungraded (the task_items rule says so). It must be able to grade items (openai).
    item_judge: str | None = None

    @model_validator(mode="after")
    def _check(self):
        ids = [c.id for c in self.criteria] + [p.id for p in self.penalties]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"duplicate criterion/penalty id(s): {', '.join(dupes)}")
        if self.item_judge is not None and self.item_judge not in self.judges:
            raise ValueError(f"item_judge: unknown judge '{self.item_judge}' (defined: {', '.join(self.judges)})")
        for c in self.criteria:
            if c.kind == "judge" and c.judge not in self.judges:
                raise ValueError(f"criteria.{c.id}.judge: unknown judge '{c.judge}' (defined: {', '.join(self.judges)})")
            if c.kind == "judge" and self.judges[c.judge].type == "embedding":
                raise ValueError(f"criteria.{c.id}.judge: '{c.judge}' is an embedding judge, which grades rubric "
                                 f"items only (name it in item_judge)")
        return self

    @property
    def kinds(self) -> list[str]:
        """The task kinds this rubric scores."""
        return [k for k in ("extraction", "free_text") if any(k in c.tasks for c in self.criteria)]

    def max_total_for(self, kind: str) -> float:
        return sum(c.weight * c.max for c in self.criteria if kind in c.tasks)

    @property
    def max_total(self) -> float:
        """The highest total a task can score (of the kinds scored, the largest)."""
        return max((self.max_total_for(k) for k in self.kinds), default=0.0)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.model_dump(mode="json", exclude_defaults=False), sort_keys=False, allow_unicode=True)
