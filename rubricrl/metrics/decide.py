"""Decisions on a paired difference's confidence interval: pass, fail or inconclusive, never on its mean.

Every gate asks one of two questions of d = candidate - reference (a row of `rubricrl.metrics.paired`):

- non-inferiority, "is the candidate not worse by more than the margin?": pass when the interval's lower bound
  is >= -margin, fail when its upper bound is < -margin;
- superiority, "is the candidate better by more than the margin?": pass when the lower bound is > margin, fail
  when the upper bound is <= margin.

Each bound of the interval is a one-sided 97.5% bound (the score interval of `rubricrl.metrics.paired`), so a
candidate whose true difference sits exactly at the margin passes at most 2.5% of the time
(tests/metrics/test_gate_error_rate.py). An interval that straddles the margin is *inconclusive*: the data cannot
tell, and an inconclusive gate never promotes. Also inconclusive, whatever the interval says:

- fewer than MIN_N paired items, or no interval, or a degenerate one (zero width);
- an *underpowered* non-inferiority pass: power is computed against the margin, as the chance that a model
  truly equal to the reference passes at this n, from the row's spread `sd` and the variance the score test
  assumes at the margin; below POWER the suite is too small to decide and a pass is refused. The MDE is the
  distance above -margin a true difference needs for an 80% pass (underpowered means MDE > margin).

A comparison where both models score at the metric's floor (or ceiling) on every task is *uninformative* (no
model can show a drop, or a gain, there) and counts as inconclusive. Each line states n, the MDE against the
margin and the power, so a reader sees what the comparison could have shown.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np

from scipy import stats

from rubricrl.metrics.paired import describe

Test = Literal["noninferiority", "superiority"]
Outcome = Literal["pass", "fail", "inconclusive", "uninformative"]
BLOCKING = ("fail", "inconclusive", "uninformative")  # only "pass" lets a candidate through
MIN_N = 8  # fewer paired items than this decide nothing
POWER = 0.8  # a non-inferiority pass needs this chance that an equal model passes


@dataclass(frozen=True)
class Decision:
    outcome: Outcome
    test: Test
    margin: float
    diff: float | None
    ci: list[float] | None
    n: int
    mde: float | None  # against the margin: the true difference above the margin's bound an 80% pass needs
    line: str  # e.g. "pass: +0.052 [+0.010, +0.094], p=0.012; n=50, MDE 0.041; non-inferiority, lower bound >= -0.05"

    power: float | None = None  # non-inferiority: the chance an equal model passes at this n

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


def against_margin(row: dict, margin: float, width: float | None,
                   confidence: float = 0.95) -> tuple[float | None, float | None]:
    """(MDE against the margin, power of an equal model to pass) for a row with n and sd (module doc).

    The variance is the score test's at the margin for an equal model: in units of the metric's range `width`,
    (1 - m)(s^2 + m) with m = margin / width and s = sd / width (an equal model with no spread still varies
    under H0 as a rate m would); unbounded (width None), the observed spread."""
    n, sd = int(row.get("n") or 0), row.get("sd")
    if n < 2 or sd is None:
        return None, None
    if width:
        m, s = min(margin / width, 1.0), sd / width
        sigma = width * float(np.sqrt(max((1 - m) * (s * s + m), 0.0)))
    else:
        sigma = float(sd)
    if sigma == 0:
        return None, None
    crit = float(stats.t.ppf((1 + confidence) / 2, n - 1))
    root_n = float(np.sqrt(n))
    return (crit + float(stats.norm.ppf(POWER))) * sigma / root_n, float(stats.norm.cdf(margin * root_n / sigma - crit))


def required_n(margin: float, width: float | None, sd: float = 0.0, power: float = POWER,
               max_n: int = 1_000_000) -> int | None:
    """The fewest paired items (at least MIN_N) at which a model equal to its reference passes non-inferiority at
    `margin` with probability `power` (against_margin), for a per-item spread `sd`; sd 0 (identical answers) is the
    best case a suite can have. None when no n up to max_n does (or nothing varies: unbounded with sd 0)."""
    def ok(n: int) -> bool:
        p = against_margin({"n": n, "sd": sd}, margin, width)[1]
        return p is not None and p >= power

    if margin <= 0 or not ok(max_n):
        return None
    lo, hi = MIN_N, max_n  # power rises with n: bisect for the first n that reaches it
    if ok(lo):
        return lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


def decide(row: dict, test: Test, margin: float, *, floor: float | None = 0.0,
           ceiling: float | None = 1.0, min_n: int = MIN_N) -> Decision:
    """The outcome of one paired comparison row ({"a", "b", "diff", "ci", "n", "sd", ...}; module doc)."""
    if margin < 0:
        raise ValueError(f"margin must be >= 0, got {margin}")
    ci, n = row.get("ci"), int(row.get("n") or 0)
    width = ceiling - floor if floor is not None and ceiling is not None else None
    mde, power = against_margin(row, margin, width)
    if test != "noninferiority":
        power = None
    why = ""
    if at_bound(row, floor, ceiling):
        outcome = "uninformative"
        why = f"both score {row['a']:g} (the metric's {'floor' if row['a'] == floor else 'ceiling'})"
    elif n < min_n:
        outcome, why = "inconclusive", f"n={n} is below the minimum of {min_n} paired items"
    elif ci is None:
        outcome, why = "inconclusive", "no interval (nothing varies, or fewer than 2 paired items)"
    elif ci[1] - ci[0] <= 0:
        outcome, why = "inconclusive", "a degenerate interval (zero width)"
    else:
        lo, hi = ci
        if test == "noninferiority":
            outcome = "pass" if lo >= -margin else "fail" if hi < -margin else "inconclusive"
            if outcome == "pass" and (power is None or power < POWER):
                outcome = "inconclusive"
                why = (f"underpowered: an equal model passes with probability "
                       f"{'n/a' if power is None else f'{power:.2f}'} < {POWER:.2f} at n={n}")
        else:
            outcome = "pass" if lo > margin else "fail" if hi <= margin else "inconclusive"
    stats_text = f"n={n}, MDE {mde:.3f}" if mde is not None else f"n={n}, MDE n/a"
    if power is not None:
        stats_text += f", power {power:.2f}"
    line = f"{outcome}: {describe(row)}; {stats_text}; {rule(test, margin)}" + (f" ({why})" if why else "")
    return Decision(outcome, test, margin, row.get("diff"), ci, n, mde, line, power)


def combine(outcomes: list[str]) -> Outcome:
    """Several comparisons of one gate: fail if any fails, else inconclusive if any cannot tell, else pass."""
    if "fail" in outcomes:
        return "fail"
    if any(o in ("inconclusive", "uninformative") for o in outcomes) or not outcomes:
        return "inconclusive"
    return "pass"
