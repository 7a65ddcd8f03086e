"""The scoring engine: one rubric, its judges, and (task, response) pairs in; explained scores out."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Mapping

from rubricrl.reward.judges import Judge, JudgeRequest, build_judge
from rubricrl.reward.parse import parse_response
from rubricrl.reward.rules import CRITERIA, PENALTIES, TaskContext
from rubricrl.reward.spec import Rubric
from rubricrl.config import JudgeConfig
from rubricrl.core.taskfile import Task


@dataclass
class ComponentScore:
    id: str
    kind: str  # rule, judge or penalty
    score: float  # for a penalty: the amount taken off (>= 0)
    max: float  # for a penalty: its cap
    weight: float  # a penalty's weight is -1, so total = sum(weight * score)
    reason: str
    samples: list[float] | None = None  # judge criteria: every sampled score (consistency)


@dataclass
class ScoreResult:
    total: float
    max_total: float
    components: list[ComponentScore]
    judge_calls: int = 0

    def component(self, cid: str) -> ComponentScore:
        return next(c for c in self.components if c.id == cid)

    def to_dict(self) -> dict:
        out: dict = {"total": self.total, "max_total": self.max_total}
        for c in self.components:
            out[c.id] = {k: v for k, v in asdict(c).items() if k != "id" and v is not None}
        return out


class RubricScorer:
    """Scores responses with a rubric. Rule parts run inline; judge criteria are batched per judge."""

    def __init__(self, rubric: Rubric, judges: Mapping[str, Judge] | None = None,
                 judge_override: JudgeConfig | None = None, policy_model: str | None = None):
        """`judge_override` (from params) replaces every judge the rubric names."""
        self.rubric = rubric
        needed = {c.judge for c in rubric.criteria if c.kind == "judge"}
        self.judges: dict[str, Judge] = dict(judges or {})
        for name in sorted(needed - set(self.judges)):
            self.judges[name] = build_judge(judge_override or rubric.judges[name], policy_model=policy_model)
        self._contexts: dict[str, TaskContext] = {}

    def context(self, task: Task) -> TaskContext:
        ctx = self._contexts.get(task.id)
        if ctx is None or not (ctx.task is task or ctx.task == task):
            ctx = TaskContext.build(task)
            self._contexts[task.id] = ctx
        return ctx

    def score(self, task: Task, response: str) -> ScoreResult:
        return self.score_batch([(task, response)])[0]

    def score_batch(self, pairs: list[tuple[Task, str]]) -> list[ScoreResult]:
        rubric = self.rubric
        parsed = [parse_response(r) for _, r in pairs]
        contexts = [self.context(t) for t, _ in pairs]
        # Judge criteria first, one batch per criterion, so remote judges can run concurrently.
        verdicts = {}
        for crit in rubric.criteria:
            if crit.kind == "judge":
                reqs = [JudgeRequest(t, r, p.obj, crit) for (t, r), p in zip(pairs, parsed)]
                verdicts[crit.id] = self.judges[crit.judge].judge_batch(reqs)
        results = []
        for i, (ctx, p) in enumerate(zip(contexts, parsed)):
            comps, calls = [], 0
            for crit in rubric.criteria:
                samples = None
                if crit.kind == "rule":
                    score, reason = CRITERIA[crit.fn](ctx, p, crit)
                else:
                    v = verdicts[crit.id][i]
                    score, reason, calls, samples = v.score, v.reason, calls + v.calls, v.samples or None
                comps.append(ComponentScore(crit.id, crit.kind, float(score), crit.max, crit.weight, reason, samples))
            for pen in rubric.penalties:
                units, reason = PENALTIES[pen.fn](ctx, p, pen)
                amount = min(pen.cap, pen.per * units)
                comps.append(ComponentScore(pen.id, "penalty", float(amount), pen.cap, -1.0, reason))
            total = sum(c.weight * c.score for c in comps)
            results.append(ScoreResult(round(total, 6), rubric.max_total, comps, calls))
        return results


def build_scorer(scoring, rubric_path: str | None = None, policy_model: str | None = None) -> RubricScorer:
    """A scorer from the params' scoring section (a ScoringParams); `rubric_path` overrides its rubric."""
    from rubricrl.reward.load import load_rubric

    rubric = load_rubric(rubric_path or scoring.rubric)
    return RubricScorer(rubric, judge_override=scoring.judge_config(), policy_model=policy_model)
