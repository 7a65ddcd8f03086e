"""The scoring engine: one rubric, its judges, and (task, response) pairs in; explained scores out."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Mapping

from rubricrl.reward.judges import Judge, JudgeRequest, build_judge
from rubricrl.reward.judges.base import ItemRequest
from rubricrl.reward.parse import parse_response
from rubricrl.reward.rules import CRITERIA, PENALTIES, TaskContext, check_registry
from rubricrl.reward.spec import Rubric
from rubricrl.config import JudgeConfig
from rubricrl.core.errors import ConfigError
from rubricrl.core.taskfile import Task


@dataclass
class ComponentScore:
    id: str
    kind: str  # rule, judge or penalty
    score: float  # for a penalty: the amount taken off (>= 0)
    max: float | None  # for a penalty: its cap (None: uncapped)
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
            # max stays when None (an uncapped penalty); samples only when the judge sampled
            out[c.id] = {k: v for k, v in asdict(c).items() if k != "id" and (v is not None or k == "max")}
        return out


class RubricScorer:
    """Scores responses with a rubric. Rule parts run inline; judge criteria are batched per judge. A task is scored
    by the criteria and penalties for its kind (extraction or free text), so a batch may mix the two; its result's
    max_total is its kind's."""

    def __init__(self, rubric: Rubric, judges: Mapping[str, Judge] | None = None,
                 judge_override: JudgeConfig | None = None, policy_model: str | None = None):
        """`judge_override` (from params) replaces every judge the rubric names."""
        self.rubric = rubric
        problems = check_registry(rubric)
        if problems:
            raise ConfigError(f"rubric {rubric.name}: " + "; ".join(problems))
        needed = {c.judge for c in rubric.criteria if c.kind == "judge"} | ({rubric.item_judge} - {None})
        self.judges: dict[str, Judge] = dict(judges or {})
        for name in sorted(needed - set(self.judges)):
            self.judges[name] = build_judge(judge_override or rubric.judges[name], policy_model=policy_model)
        if rubric.item_judge and not hasattr(self.judges[rubric.item_judge], "grade_items"):
            raise ConfigError(f"rubric {rubric.name}: item_judge: the {self.judges[rubric.item_judge].name} judge "
                              "cannot grade rubric items (an openai judge can)")
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
        # Judge criteria first, one batch per criterion (of the tasks of its kinds), so remote judges can run
        # concurrently.
        verdicts: dict[str, dict[int, object]] = {}
        for crit in rubric.criteria:
            if crit.kind == "judge":
                at = [i for i, (t, _) in enumerate(pairs) if t.kind in crit.tasks]
                reqs = [JudgeRequest(pairs[i][0], pairs[i][1], parsed[i].obj, crit) for i in at]
                verdicts[crit.id] = dict(zip(at, self.judges[crit.judge].judge_batch(reqs) if reqs else []))
        item_calls = self._judge_items(pairs, contexts)
        results = []
        for i, (ctx, p) in enumerate(zip(contexts, parsed)):
            comps, calls, kind = [], item_calls.get(i, 0), ctx.task.kind
            if kind not in rubric.kinds:
                raise ConfigError(f"rubric {rubric.name} has no criterion for {kind} tasks (task {ctx.task.id}); "
                                  f"it scores {', '.join(rubric.kinds) or 'none'}")
            for crit in rubric.criteria:
                if kind not in crit.tasks:
                    continue
                samples = None
                if crit.kind == "rule":
                    score, reason = CRITERIA[crit.fn](ctx, p, crit)
                else:
                    v = verdicts[crit.id][i]
                    score, reason, calls, samples = v.score, v.reason, calls + v.calls, v.samples or None
                comps.append(ComponentScore(crit.id, crit.kind, float(score), crit.max, crit.weight, reason, samples))
            for pen in rubric.penalties:
                if kind not in pen.tasks:
                    continue
                units, reason = PENALTIES[pen.fn](ctx, p, pen)
                amount = pen.per * units if pen.cap is None else min(pen.cap, pen.per * units)
                comps.append(ComponentScore(pen.id, "penalty", float(amount), pen.cap, -1.0, reason))
            total = sum(c.weight * c.score for c in comps)
            results.append(ScoreResult(round(total, 6), rubric.max_total_for(kind), comps, calls))
        return results

    def _judge_items(self, pairs: list[tuple[Task, str]], contexts: list[TaskContext]) -> dict[int, int]:
        """The rubric's item judge grades the free-text tasks' items that have no check, in batches of its
        item_batch; the verdicts go to each task's context for the task_items rule. Returns judge calls per pair."""
        name = self.rubric.item_judge
        if not name:
            return {}
        judge = self.judges[name]
        batch = judge.config.item_batch
        requests, where = [], []
        for i, (task, response) in enumerate(pairs):
            unchecked = [item for item in task.items if item.check is None]
            for k in range(0, len(unchecked), batch):
                requests.append(ItemRequest(task, response, tuple(unchecked[k:k + batch])))
                where.append(i)
        calls: dict[int, int] = {}
        for i, grades in zip(where, judge.grade_items(requests) if requests else []):
            judged = contexts[i].items_judged.setdefault(pairs[i][1], {})
            judged.update({k: (grades.met[k], grades.reasons[k]) for k in grades.met})
            calls[i] = calls.get(i, 0) + grades.calls
        return calls


def build_scorer(scoring, rubric_path: str | None = None, policy_model: str | None = None) -> RubricScorer:
    """A scorer from the params' scoring section (a ScoringParams); `rubric_path` overrides its rubric."""
    from rubricrl.reward.load import load_rubric

    rubric = load_rubric(rubric_path or scoring.rubric)
    return RubricScorer(rubric, judge_override=scoring.judge_config(), policy_model=policy_model)
