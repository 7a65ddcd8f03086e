"""Decisions on a paired difference's confidence interval: pass, fail or inconclusive, never on its mean.

Every gate asks one of two questions of d = candidate - reference (a row of `rubricrl.metrics.paired`):

- non-inferiority, "is the candidate not worse by more than the margin?": pass when the interval's lower bound
  is >= -margin, fail when its upper bound is < -margin;
- superiority, "is the candidate better by more than the margin?": pass when the lower bound is > margin, fail
  when the upper bound is <= margin.

Each bound of the interval is a one-sided 97.5% bound (the score interval of `rubricrl.metrics.paired`), so a
candidate whose true difference sits exactly at the margin passes at most 2.5% of the time: exactly so for paired
binary answers at n up to 100 and margins 0-0.2, enumerated, and within Monte Carlo error for rates and unequal
denominators (tests/metrics/test_gate_error_rate.py). An interval that straddles the margin is *inconclusive*: the
data cannot tell, and an inconclusive gate never promotes. Also inconclusive, whatever the interval says:

- fewer than MIN_N paired items, or no interval, or a degenerate one (zero width);
- an *underpowered* non-inferiority pass: power is the chance that a model truly equal to the reference passes
  at this n, under the gate's own pass condition (the lower score bound >= -margin) with the row's spread `sd`;
  below POWER the suite is too small to decide and a pass is refused. It is the score bound's own chance, not a
  normal approximation of it, under two models of the per-item differences:
  - paired binary answers (IFEval, QA, HumanEval): each difference is -1, 0 or +1 in units of the range, a share
    sd^2 of the tasks change, half each way; the chance is enumerated exactly over how many tasks change and how
    many of those go up;
  - a continuous difference (a rate over several fields): its mean is normal with the observed spread, its second
    moment as observed.
  A row whose answers are binary (`binary`, from paired_difference) gets the first; any other the lower of the two.
  Each matches the share of simulated equal models that pass (tests/metrics/test_gate_error_rate.py), so a
  reported power is exact for binary answers and exact or cautious otherwise. Identical answers (sd 0) pass or fail
  outright: within 0.10 from n=43, within 0.05 from 84 (`required_n`). Unbounded metrics (perplexity: a t interval)
  use the noncentral t of normal differences. The MDE is the distance above -margin (above +margin, superiority) a
  true difference needs for an 80% pass under the same models, the binary one with the extra changes all one way
  (underpowered means MDE > margin).

A comparison where both models score at the metric's floor (or ceiling) on every task is *uninformative* (no
model can show a drop, or a gain, there) and counts as inconclusive. Each line states n, the MDE against the
margin and the power, so a reader sees what the comparison could have shown.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Literal

import numpy as np

from scipy import stats

from rubricrl.metrics.paired import describe, score_clears

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


TAIL = 1e-12  # outcomes of a suite rarer than this are left out of the enumeration
EXACT_UP_TO = 4096  # required_n scans every n up to here (power is a sawtooth in n); beyond, it bisects


def _thresholds(n: int, bound: float, changed: np.ndarray) -> np.ndarray:
    """For each count D of n tasks whose difference is +-1 (the rest 0): the fewest +1s whose lower score bound
    clears `bound` (D + 1: none does). More +1s at the same D raise the mean at the same second moment, and the
    bound with it, so a bisection over the count finds it."""
    below, above = np.full(changed.shape, -1), changed + 1
    while (open_ := above - below > 1).any():
        mid = (below + above) // 2
        mean = (2 * np.minimum(mid, changed) - changed) / n
        ok = open_ & score_clears(mean, changed / n, mean, 1.0, n, bound)
        above, below = np.where(ok, mid, above), np.where(open_ & ~ok, mid, below)
    return above


@lru_cache(maxsize=1024)
def _all_thresholds(n: int, bound: float) -> np.ndarray:
    return _thresholds(n, bound, np.arange(n + 1))


def pass_probability(n: int, sd: float, bound: float, delta: float = 0.0) -> float:
    """The exact chance that the lower score bound of n paired binary answers clears `bound` (both in units of the
    metric's range), when a share sd^2 of the tasks change, half up and half down (a difference with spread sd and
    mean 0), plus a share |delta| changed one way (true difference delta). Enumerated over how many tasks change
    (D) and how many of those go up (module doc)."""
    p = min(sd * sd, 1.0) / 2
    up, down = p + max(delta, 0.0), p + max(-delta, 0.0)
    q = up + down
    if q > 1:  # more change than there are tasks: the largest difference the spread allows
        up, down, q = up / q, down / q, 1.0
    if q == 0:
        return float(score_clears(0.0, 0.0, 0.0, 1.0, n, bound))
    lo, hi = int(stats.binom.ppf(TAIL, n, q)), int(stats.binom.isf(TAIL, n, q))
    changed = np.arange(lo, hi + 1)
    need = _all_thresholds(n, bound)[lo:hi + 1] if n <= EXACT_UP_TO else _thresholds(n, bound, changed)
    return float(np.sum(stats.binom.pmf(changed, n, q) * stats.binom.sf(need - 1, changed, up / q)))


def _t_power(n: int, sd: float, bound: float, delta: float = 0.0, confidence: float = 0.95) -> float:
    """Unbounded: the t interval's lower bound clears `bound` when the per-item differences are normal with mean
    delta and spread sd: a noncentral t with n - 1 degrees of freedom."""
    crit = float(stats.t.ppf((1 + confidence) / 2, n - 1))
    return float(stats.nct.sf(crit, n - 1, (delta - bound) * np.sqrt(n) / sd))


def _normal_thresholds(ns: np.ndarray, sd: float, bound: float) -> np.ndarray:
    """For each n: the smallest mean whose lower score bound clears `bound` when the per-item second moment is
    sd^2 + mean^2 (a continuous difference, its spread as observed); inf where even a mean of 1 does not."""
    ns = np.asarray(ns, dtype=float)

    def clears(mean):
        return score_clears(mean, sd * sd + mean * mean, mean, 1.0, ns, bound)

    lo, hi = np.full(ns.shape, float(bound)), np.ones(ns.shape)
    for _ in range(50):
        mid = (lo + hi) / 2
        ok = clears(mid)
        lo, hi = np.where(ok, lo, mid), np.where(ok, mid, hi)
    return np.where(clears(np.ones(ns.shape)), hi, np.inf)


@lru_cache(maxsize=8192)
def _normal_threshold(n: int, sd: float, bound: float) -> float:
    return float(_normal_thresholds(np.array([n]), sd, bound)[0])


def normal_probability(n: int, sd: float, bound: float, delta: float = 0.0) -> float:
    """The chance that the lower score bound clears `bound` (units of the metric's range) when the mean of n
    per-item differences is normal, mean delta and spread sd / sqrt(n), and their second moment is as observed."""
    x = _normal_threshold(n, sd, bound)
    return float(delta >= x) if sd == 0 else float(stats.norm.sf((x - delta) * np.sqrt(n) / sd))


def _chance(n: int, sd: float, bound: float, width: float | None, binary: bool, delta: float = 0.0) -> float:
    """The chance the gate's lower bound clears `bound` at a true difference delta (in the metric's units): bounded,
    the binary-answer enumeration, or where the answers are not known to be binary the lower of it and the normal
    model; unbounded, the noncentral t."""
    if width:
        s, b, d = sd / width, bound / width, delta / width
        exact = pass_probability(n, s, b, d)
        return exact if binary else min(exact, normal_probability(n, s, b, d))
    return _t_power(n, sd, bound, delta)


@lru_cache(maxsize=8192)
def _power(n: int, sd: float, bound: float, width: float | None, binary: bool) -> float:
    return _chance(n, sd, bound, width, binary)


@lru_cache(maxsize=4096)
def _against(n: int, sd: float, bound: float, width: float | None, binary: bool) -> tuple[float | None, float]:
    # the largest true difference the model allows: every unchanged task changed upwards (bounded); unbounded, the
    # noncentrality reaches any power long before 40 spreads
    lo, hi = min(bound, 0.0), width * (1.0 - min((sd / width) ** 2, 1.0)) if width else bound + 40 * sd
    if hi <= lo or _chance(n, sd, bound, width, binary, hi) < POWER:
        return None, _power(n, sd, bound, width, binary)
    for _ in range(40):  # the chance rises with the true difference: bisect for the 80% one
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if _chance(n, sd, bound, width, binary, mid) >= POWER else (mid, hi)
    return hi - bound, _power(n, sd, bound, width, binary)


def against_margin(row: dict, margin: float, width: float | None,
                   test: Test = "noninferiority") -> tuple[float | None, float | None]:
    """(MDE against the margin, power: the chance an equal model passes) for a row with n and sd (module doc).

    The pass condition is the gate's own (the lower score bound clears -margin, or +margin for superiority),
    evaluated exactly over the outcomes of n paired binary answers with the row's spread (bounded metrics, `width`
    the range; the lower of that and the normal model unless the row says its answers are `binary`), or as a
    noncentral t for normal differences (unbounded, width None). None where n < 2 or sd is unknown; unbounded with
    sd 0 (nothing varies) has neither; an MDE is None where no true difference reaches 80%."""
    n, sd = int(row.get("n") or 0), row.get("sd")
    if n < 2 or sd is None or (not width and not sd):
        return None, None
    return _against(n, float(sd), -margin if test == "noninferiority" else margin, width or None,
                    bool(row.get("binary")))


def required_n(margin: float, width: float | None, sd: float = 0.0, power: float = POWER,
               max_n: int = 1_000_000, binary: bool = False) -> int | None:
    """The fewest paired items (at least MIN_N) from which a model equal to its reference passes non-inferiority at
    `margin` with probability `power` (against_margin), for a per-item spread `sd`; sd 0 (identical answers) is the
    best case a suite can have; `binary` as a row's (against_margin). Binary answers make power a sawtooth in n, so this is the first n from which it
    stays at or above `power` through 2n (every n is evaluated up to EXACT_UP_TO; beyond, power is taken as rising
    and bisected). None when no n up to max_n does (or nothing varies: unbounded with sd 0)."""
    if margin <= 0 or (not width and not sd):
        return None

    def ok(n: int) -> bool:
        return _power(n, float(sd), -margin, width or None, binary) >= power

    def misses(ns: np.ndarray) -> list[int]:  # the n whose power falls short
        if not width or binary:
            return [int(n) for n in ns if not ok(int(n))]
        s, b = sd / width, -margin / width
        x = _normal_thresholds(ns, s, b)  # the normal model, vectorised over n, bounds the chance from above
        normal = (x <= 0).astype(float) if s == 0 else stats.norm.sf(x * np.sqrt(ns) / s)
        return [int(n) for n, p in zip(ns, normal) if p < power or pass_probability(int(n), s, b) < power]

    short, horizon, done = [], 64, MIN_N - 1
    while horizon <= EXACT_UP_TO:
        short += misses(np.arange(done + 1, horizon + 1))
        done = horizon
        first = short[-1] + 1 if short else MIN_N
        if 2 * first <= horizon:
            return first
        horizon *= 2
    lo, hi = max(short[-1] if short else 0, EXACT_UP_TO // 2), max_n  # never below an n that fell short
    if not ok(hi):
        return None
    while hi - lo > 1:  # large n: power rises with n (the sawtooth has flattened out)
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
    mde, power = against_margin(row, margin, width, test)
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
