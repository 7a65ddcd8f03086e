"""The rubric spec: a YAML file of weighted criteria and capped penalties.

total = sum(weight * score for criteria) - sum(penalty amounts). Rule criteria and penalties
name a function in the registry (rubricrl.rubric.rules); judge criteria name a judge.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from rubricrl.errors import ConfigError
from rubricrl.yamlfile import read_mapping, validation_error


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Example(Strict):
    label: Literal["good", "bad"]
    answer: str
    why: str


class Criterion(Strict):
    id: str
    kind: Literal["rule", "judge"]
    description: str
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
    fn: str
    per: float = Field(gt=0)  # amount per unit (character, invented value, ...)
    cap: float = Field(gt=0)  # the most this penalty can take off
    params: dict = Field(default_factory=dict)
    source: str = "manual"


class JudgeConfig(Strict):
    type: Literal["grounded", "openai"]
    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None  # name of the environment variable holding the key
    samples: int = Field(3, ge=1)  # median of k; stops early when the first two agree
    adaptive_samples: bool = False  # one sample once the judge proved consistent (audited); see OpenAIJudge
    warmup_verdicts: int = Field(5, ge=1)  # agreeing verdicts in a row before single samples
    audit_every: int = Field(10, ge=2)  # every n-th verdict still takes all samples
    temperature: float = 0.0
    timeout_s: float = Field(60.0, gt=0)
    max_retries: int = Field(4, ge=0)
    backoff_s: float = Field(0.5, ge=0)
    concurrency: int = Field(4, ge=1)
    max_tokens: int = Field(256, ge=16)
    response_format: Literal["auto", "json_schema", "json_object", "none"] = "auto"
    cache_dir: str | None = ".cache/judge"

    @model_validator(mode="after")
    def _check(self):
        if self.type == "openai" and not (self.base_url and self.model):
            raise ValueError("an openai judge needs base_url and model")
        return self


class Rubric(Strict):
    name: str
    version: int = 1
    description: str = ""
    criteria: list[Criterion]
    penalties: list[Penalty] = Field(default_factory=list)
    judges: dict[str, JudgeConfig] = Field(default_factory=lambda: {"grounded": JudgeConfig(type="grounded")})

    @model_validator(mode="after")
    def _check(self):
        ids = [c.id for c in self.criteria] + [p.id for p in self.penalties]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"duplicate criterion/penalty id(s): {', '.join(dupes)}")
        for c in self.criteria:
            if c.kind == "judge" and c.judge not in self.judges:
                raise ValueError(f"criteria.{c.id}.judge: unknown judge '{c.judge}' (defined: {', '.join(self.judges)})")
        return self

    @property
    def max_total(self) -> float:
        return sum(c.weight * c.max for c in self.criteria)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.model_dump(mode="json", exclude_defaults=False), sort_keys=False, allow_unicode=True)


SHIPPED = Path(__file__).resolve().parent.parent / "rubrics"  # rubrics inside the package: found from anywhere


def shipped_rubrics() -> list[str]:
    return sorted(p.stem for p in SHIPPED.glob("*.yaml"))


def rubric_path(ref: str | Path) -> Path:
    """A rubric reference is a YAML path, or the bare name of a shipped rubric ('json_extraction')."""
    ref = str(ref)
    if "/" in ref or "\\" in ref or ref.endswith((".yaml", ".yml")):
        return Path(ref)
    if ref not in shipped_rubrics():
        raise ConfigError(f"rubric '{ref}': not a file path and not a shipped rubric "
                          f"(shipped: {', '.join(shipped_rubrics())}; a path needs a .yaml suffix or a folder)")
    return SHIPPED / f"{ref}.yaml"


def load_rubric(ref: str | Path) -> Rubric:
    path = rubric_path(ref)
    data, root = read_mapping(path, "rubric")
    try:
        rubric = Rubric.model_validate(data)
    except ValidationError as err:
        raise validation_error(err, data, root, path) from None
    from rubricrl.rubric.rules import check_registry  # late: rules import the spec

    problems = check_registry(rubric)
    if problems:
        raise ConfigError("\n".join(f"{path}: {p}" for p in problems))
    return rubric
