"""Decisions on a paired difference's confidence interval: pass, fail or inconclusive, never on its mean.

Every gate asks one of two questions of d = candidate - reference (a row of `rubricrl.metrics.paired`):

- non-inferiority, "is the candidate not worse by more than the margin?": pass when the interval's lower bound
  is >= -margin, fail when its upper bound is < -margin;
- superiority, "is the candidate better by more than the margin?": pass when the lower bound is > margin, fail
  when the upper bound is <= margin.

An interval that straddles the margin is *inconclusive*: the data cannot tell, and an inconclusive gate never
promotes. A comparison where both models score at the metric's floor (or ceiling) on every task is
*uninformative* (no model can show a drop, or a gain, there) and counts as inconclusive. Each line states n and
the minimum detectable difference at that n (80% power), so a reader sees what the comparison could have shown.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

from rubricrl.metrics.paired import describe

Test = Literal["noninferiority", "superiority"]
Outcome = Literal["pass", "fail", "inconclusive", "uninformative"]
BLOCKING = ("fail", "inconclusive", "uninformative")  # only "pass" lets a candidate through


@dataclass(frozen=True)
class Decision:
    outcome: Outcome
    test: Test
    margin: float
    diff: float | None
    ci: list[float] | None
    n: int
    mde: float | None
    line: str  # e.g. "pass: +0.052 [+0.010, +0.094], p=0.012; n=50, MDE 0.041; non-inferiority, lower bound >= -0.05"

    @property
    def passed(self) -> bool:
        return self.outcome == "pass"

    def to_dict(self) -> dict:
        return asdict(self)


def rule(test: Test, margin: float) -> str:
    return (f"non-inferiority: lower bound >= -{margin:g}" if test == "noninferiority"
            else f"superiority: lower bound > +{margin:g}")


def at_bound(row: dict, floor: float | None, ceiling: float | None) -> bool:
    """Both models at the metric's floor (or both at its ceiling): the comparison cannot move."""
    a, b = row.get("a"), row.get("b")
    if a is None or b is None:
        return False
    return any(x is not None and abs(a - x) < 1e-12 and abs(b - x) < 1e-12 for x in (floor, ceiling))


def decide(row: dict, test: Test, margin: float, *, floor: float | None = 0.0,
           ceiling: float | None = 1.0) -> Decision:
    """The outcome of one paired comparison row ({"a", "b", "diff", "ci", "n", "mde", ...})."""
    if margin < 0:
        raise ValueError(f"margin must be >= 0, got {margin}")
    ci, n, mde = row.get("ci"), int(row.get("n") or 0), row.get("mde")
    if at_bound(row, floor, ceiling):
        outcome = "uninformative"
        why = f"both score {row['a']:g} (the metric's {'floor' if row['a'] == floor else 'ceiling'})"
    elif ci is None:
        outcome, why = "inconclusive", "no interval (fewer than 2 paired items)"
    else:
        lo, hi = ci
        if test == "noninferiority":
            outcome = "pass" if lo >= -margin else "fail" if hi < -margin else "inconclusive"
        else:
            outcome = "pass" if lo > margin else "fail" if hi <= margin else "inconclusive"
        why = ""
    mde_text = f"MDE {mde:.3f}" if mde is not None else "MDE n/a"
    line = f"{outcome}: {describe(row)}; n={n}, {mde_text}; {rule(test, margin)}" + (f" ({why})" if why else "")
    return Decision(outcome, test, margin, row.get("diff"), ci, n, mde, line)


def combine(outcomes: list[str]) -> Outcome:
    """Several comparisons of one gate: fail if any fails, else inconclusive if any cannot tell, else pass."""
    if "fail" in outcomes:
        return "fail"
    if any(o in ("inconclusive", "uninformative") for o in outcomes) or not outcomes:
        return "inconclusive"
    return "pass"
