"""Which non-inferiority decisions a profile can reach, before it spends the time (issue 36 part 1).

A non-inferiority gate passes only when a model equal to its reference would pass with power POWER at the gate's
n (rubricrl.metrics.decide); at a smaller n every outcome is inconclusive or a fail, so no promotion can follow.
For each such gate of a configuration this gives its n, its margin, the spread it assumes, the power an equal model
has there, the n it needs (decide.required_n: the n from which that power stays at POWER) and whether it can pass
(its power reaches POWER, decide's own test). The spread is the last run's (`sd` of the row in metrics/<stage>.json,
with the row's `binary`: exact power for binary answers) where one is recorded, else identical answers (sd 0): the
best case, so "unreachable" then holds for any model. An unbounded metric (perplexity, nats) without a last run has
no spread to go on and says so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from rubricrl.general.run import BOUNDS, GENERATION, active_suites
from rubricrl.general import perplexity
from rubricrl.metrics.decide import POWER, against_margin, required_n


@dataclass(frozen=True)
class Reach:
    gate: str  # e.g. "general ifeval (grpo vs base)"
    n: int
    margin: float
    sd: float | None
    prior: str  # where sd comes from: "last run" or "identical answers"
    power: float | None  # of an equal model at this n
    needs: int | None  # the n at which it reaches POWER (None: no n does, or unknown)

    @property
    def reachable(self) -> bool | None:  # what decide refuses: an equal model's power below POWER at this n
        return None if self.sd is None else self.power is not None and self.power >= POWER

    def line(self) -> str:
        head = f"{self.gate}: n={self.n}, margin {self.margin:g}"
        if self.sd is None:
            return f"{head}, no spread known (an unbounded metric, no last run): unknown until a run"
        verdict = "can pass" if self.reachable else "cannot pass"
        needs = "no n does" if self.needs is None else f"needs n >= {self.needs}"
        return (f"{head}, sd {self.sd:.3f} ({self.prior}): an equal model passes with power "
                f"{'n/a' if self.power is None else f'{self.power:.2f}'}, {needs}: {verdict}")


def _last_sd(metrics_dir: Path, stage: str, match: dict) -> tuple[float | None, bool]:
    """The last run's spread for the row matching `match`, and whether its answers were binary."""
    try:
        rows = json.loads((metrics_dir / f"{stage}.json").read_text(encoding="utf-8")).get("paired") or []
    except (OSError, ValueError, AttributeError):
        return None, False
    for r in rows:
        if isinstance(r, dict) and all(r.get(k) == v for k, v in match.items()) and r.get("sd") is not None:
            return float(r["sd"]), bool(r.get("binary"))
    return None, False


def _reach(gate: str, n: int, margin: float, width: float | None, sd: float | None, from_run: bool,
           binary: bool = False) -> Reach:
    prior = "last run" if from_run else "identical answers"
    if sd is None and width is not None:
        sd = 0.0
    if sd is None:
        return Reach(gate, n, margin, None, prior, None, None)
    power = against_margin({"n": n, "sd": sd, "binary": binary}, margin, width)[1]
    return Reach(gate, n, margin, sd, prior, power, required_n(margin, width, sd, binary=binary))


def _suite_n(suite: str, size: int | None) -> int:
    module = GENERATION.get(suite, perplexity)
    return len(module.load(size))


def plan(params, metrics_dir: str | Path = "metrics") -> list[Reach]:
    """Every non-inferiority gate of `params` (RubricRL params): the general gate per suite and registered policy, the
    student's own gate against its teacher (distill.margin) and the registry's student gate (student_margin)."""
    metrics_dir = Path(metrics_dir)
    out = []
    g = params.general
    # every registered policy is promoted through its general gate (general.gated only decides what retrains)
    for model in dict.fromkeys([*(m for m in params.registry.candidates if m in ("sft", "grpo")), *g.gated]):
        for suite in active_suites(g):
            sd, binary = _last_sd(metrics_dir, "general", {"model": model, "suite": suite})
            low, high = BOUNDS[suite]
            out.append(_reach(f"general {suite} ({model} vs base)", _suite_n(suite, getattr(g.sizes, suite)),
                              g.tolerance[suite], None if low is None else high - low, sd, sd is not None, binary))
    if "student" in params.registry.candidates:
        d = params.distill
        out.append(_reach("distill student vs teacher (field accuracy)", d.eval_tasks, d.margin, 1.0, None, False))
        out.append(_reach("registry student vs champion (field accuracy)", d.eval_tasks,
                          params.registry.student_margin, 1.0, None, False))
    return out


ASSUMED_PRESENT = (5, 4)  # stated values per task without data: the generator's tasks average ~4.5
ASSUMED_NULL_RATE = 0.15  # null-for-present before GRPO without a last run (the SFT model's, issue 36: 0.167)


def monitor_reach(params, root: str | Path = ".") -> str | None:
    """What GRPO's hack monitor can see (rubricrl.metrics.rise): the null-for-present rise it detects with 80% power
    on its n_tasks validation tasks (their stated values from data/val.jsonl, else assumed), against the rise it is
    sized for (grpo.monitor.target_rise). None when the monitor is off."""
    from rubricrl.core.errors import RubricRLError
    from rubricrl.core.slices import stratified
    from rubricrl.core.taskfile import load_tasks
    from rubricrl.metrics.rise import rise_mde, watch_line
    from rubricrl.metrics.true_metric import true_counts

    m = params.grpo.monitor
    if not m.enabled:
        return None
    val = Path(root) / "data" / "val.jsonl"
    try:
        tasks = stratified([t for t in load_tasks(val) if t.reference is not None], m.n_tasks)
        present = [true_counts(t, json.dumps(t.reference) if isinstance(t.reference, dict) else t.reference).present
                   for t in tasks]
        where = f"{len(tasks)} tasks of {val}"
    except (OSError, ValueError, RubricRLError):  # no data yet (a fresh checkout), or none readable: the plan goes on
        present = [ASSUMED_PRESENT[i % 2] for i in range(m.n_tasks)]
        where = f"{m.n_tasks} tasks of ~4.5 stated values (assumed: no {val})"
    mde = rise_mde(present, ASSUMED_NULL_RATE, m.null_tolerance)
    return f"hack monitor ({where}, from a null rate of {ASSUMED_NULL_RATE:g}): " + watch_line(
        mde, m.target_rise, len(present))


def summary(params, metrics_dir: str | Path = "metrics") -> str:
    """The plan as text: how many decisions can pass, one line per gate, and what to change where one cannot
    (`rubricrl config validate` prints it; so does a pipeline run before its first stage)."""
    reach = plan(params, metrics_dir)
    blocked = [r for r in reach if r.reachable is False]
    lines = [f"non-inferiority decisions ({sum(r.reachable is True for r in reach)} of {len(reach)} can pass; the "
             f"spread is the last run's where metrics/ holds one, else identical answers):",
             *(f"  {r.line()}" for r in reach)]
    if blocked:
        lines.append(f"{len(blocked)} cannot pass at these sizes: each ends inconclusive or failed, so the gate it "
                     f"belongs to promotes nothing; raise the size to the n shown or widen the margin")
    if (monitor := monitor_reach(params, Path(metrics_dir).parent)) is not None:
        lines.append(monitor)
    if params.grpo.multi_objective_aggregation == "normalize_then_sum":
        lines.append(AGGREGATION_WARNING)
    return "\n".join(lines)


# Measured (docs/benchmarks.md, GRPO learning curve): GDPO at 1e-5 raised null-for-present +0.204 [+0.021, +0.349].
AGGREGATION_WARNING = (
    "grpo.multi_objective_aggregation: normalize_then_sum (GDPO) scales each criterion to unit spread within its "
    "group before weighing it, which erases the rubric's prices (a null's premium over a wrong answer is the size of "
    "missed_values): measured on the CPU default, it raised nulls for stated values by 0.20; sum_then_normalize keeps "
    "them")
