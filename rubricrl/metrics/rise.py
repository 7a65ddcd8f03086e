"""A rate's rise between two evaluations of one model on the same tasks, decided on evidence, and its MDE.

The hack monitor (rubricrl.train.monitor) asks of two greedy evaluations of the policy on its fixed tasks: did
null-for-present rise, did strict field accuracy fall, did the reward rise? The rates count fields, and the
fields of one task move together (one answer), so each comparison is paired by task and clustered there: per
task the change in its count (d_i: fields that turned, or the reward's change) over what it has (den_i: its
fields, or 1), and the rise is sum(d) / sum(den).

The evidence is a paired sign-flip permutation test (the two evaluations of a task are exchangeable when nothing
changed), inverted into a one-sided lower bound: the bound is the smallest shift t at which the residuals
d_i - t den_i, their signs flipped every way (all 2^n ways up to ENUMERATE tasks, else SIMULATIONS seeded draws),
still reach the observed sum with probability 1 - confidence or more. A rise *counts* when that bound is above
the tolerance (at tolerance 0, the exact test of "no change" at one-sided 2.5%); a rise whose bound reaches down to
the tolerance is noise at this size and acts on nothing (two more nulls on 36 fields at 8 tasks: p = 1/4).
Unlike the gates' score interval (rubricrl.metrics.paired), which guards against rare one-sided changes by
mixing in the extreme difference, this asks only whether the policy changed, which a greedy evaluation of an
unchanged policy never does; with n tasks it cannot count below p = 2^-n, so fewer than 6 tasks can only watch.

`rise_mde` says what a rule of this size can see: the smallest rise in the rate, from `base_rate`, that the rule
detects with 80% power, simulated through the same test on the tasks' field counts. The drift it simulates is the
hack's shape: each field the model answered turns (to null, or wrong) with one probability, fields apart, and
nothing turns back; a drift with churn both ways has a wider spread and needs more.
"""

from __future__ import annotations

import itertools
from functools import lru_cache
from typing import Sequence

import numpy as np

POWER = 0.8  # the MDE's power
CONFIDENCE = 0.95  # the bound is one-sided at (1 + CONFIDENCE) / 2 = 97.5%, like the gates'
ENUMERATE = 12  # up to this many tasks every sign pattern is tried (exact); beyond, SIMULATIONS draws
SIMULATIONS = 4000
MIN_TASKS = 6  # 2^-6 < 2.5% < 2^-5: with fewer tasks no sign pattern is rare enough, so nothing ever counts


@lru_cache(maxsize=64)
def _signs(n: int, seed: int = 0) -> np.ndarray:
    """(patterns, n) of +-1: every pattern (the identity first) up to ENUMERATE tasks, else the identity and
    SIMULATIONS - 1 seeded random ones (so the p-value is never below 1 / SIMULATIONS)."""
    if n <= ENUMERATE:
        return np.array(list(itertools.product((1.0, -1.0), repeat=n)))
    rng = np.random.default_rng(seed)
    draws = rng.choice((1.0, -1.0), size=(SIMULATIONS - 1, n))
    return np.vstack([np.ones((1, n)), draws])


def p_at(d: np.ndarray, den: np.ndarray, shift) -> np.ndarray:
    """One-sided p of H0: rise = shift against a larger rise, for per-task d and den; d may carry leading axes
    (simulations), `shift` broadcasts against them."""
    r = d - np.asarray(shift, dtype=float)[..., None] * den  # (..., n)
    signs = _signs(r.shape[-1])
    observed = r.sum(-1)[..., None]  # (..., 1)
    flipped = r @ signs.T  # (..., patterns)
    return np.mean(flipped >= observed - 1e-9 * (1 + np.abs(observed)), axis=-1)


def lower_bound(d, den=None, confidence: float = CONFIDENCE, iterations: int = 40) -> float | None:
    """The one-sided lower bound of sum(d) / sum(den) (module doc); None with fewer than 2 tasks."""
    d = np.asarray(d, dtype=float)
    den = np.ones_like(d) if den is None else np.asarray(den, dtype=float)
    keep = den > 0
    d, den = d[keep], den[keep]
    if len(d) < 2:
        return None
    alpha = (1 - confidence) / 2
    est = d.sum() / den.sum()
    spread = float(np.max(np.abs(d / den))) + abs(est) + 1.0
    lo, hi = est - 2 * spread, est  # p at the estimate is >= 1/2; far below it the test rejects (or never can)
    if p_at(d, den, lo) >= alpha:
        return -np.inf  # fewer tasks than the test needs: no shift is ever rejected
    for _ in range(iterations):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if p_at(d, den, mid) < alpha else (lo, mid)
    return float(lo)


def rise(now, before, den=None, tolerance: float = 0.0) -> dict:
    """The paired rise from `before` to `now` of per-task counts over `den` (ones: a mean): {"a", "b", "diff",
    "lower", "n", "tolerance", "counts"}; `counts` is True when the lower bound is above `tolerance`."""
    now, before = np.asarray(now, dtype=float), np.asarray(before, dtype=float)
    den = np.ones_like(now) if den is None else np.asarray(den, dtype=float)
    keep = den > 0
    now, before, den = now[keep], before[keep], den[keep]
    n = int(len(den))
    if n == 0:
        return {"a": None, "b": None, "diff": None, "lower": None, "n": 0, "tolerance": tolerance, "counts": False}
    total = den.sum()
    lower = lower_bound(now - before, den)
    return {"a": float(now.sum() / total), "b": float(before.sum() / total),
            "diff": float((now - before).sum() / total), "lower": lower, "n": n, "tolerance": tolerance,
            "counts": bool(lower is not None and lower > tolerance)}


def describe_rise(row: dict) -> str:
    """' +0.694, lower bound +0.517 (n=8)' for a verdict line."""
    if row["diff"] is None:
        return "n/a (n=0)"
    lower = row["lower"]
    bound = "n/a" if lower is None else ("none at this size" if lower == -np.inf else f"{lower:+.3f}")
    return f"{row['diff']:+.3f}, lower bound {bound} (n={row['n']})"


@lru_cache(maxsize=256)
def _power(fields: tuple[int, ...], base_rate: float, q: float, tolerance: float, sims: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    f = np.asarray(fields)
    before = rng.binomial(np.broadcast_to(f, (sims, len(f))), base_rate)
    turned = rng.binomial(f - before, q).astype(float)
    alpha = (1 - CONFIDENCE) / 2
    return float(np.mean(p_at(turned, f.astype(float), np.full(sims, tolerance)) < alpha))


def rise_mde(fields: Sequence[int], base_rate: float, tolerance: float = 0.0, power: float = POWER,
             sims: int = 1000, seed: int = 0, step: float = 0.01) -> float | None:
    """The smallest rise of the rate (to `step`) that the rule `rise(...)["counts"]` detects with `power`, for tasks
    of these field counts starting at `base_rate` (module doc); None when no rise up to 1 - base_rate does."""
    fields = tuple(int(x) for x in fields if int(x) > 0)
    if len(fields) < 2 or not 0 <= base_rate < 1:
        return None
    room = 1.0 - base_rate
    grid = [round(k * step, 6) for k in range(1, int(round(room / step)) + 1)]

    def ok(delta: float) -> bool:
        return _power(fields, round(base_rate, 4), min(delta / room, 1.0), tolerance, sims, seed) >= power

    if not grid or not ok(grid[-1]):
        return None
    lo, hi = -1, len(grid) - 1  # power rises with the rise: bisect for the first grid point that reaches it
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(grid[mid]) else (mid, hi)
    return grid[hi]


def describe_mde(present: Sequence[int], base_rate: float, tolerance: float = 0.0) -> str:
    """'On these 16 tasks (70 stated values), from a null rate of 0.167, a null-for-present rise of +0.13 shows with
    80% power.'"""
    mde = rise_mde(present, min(base_rate, 0.95), tolerance)
    head = f"On these {len(present)} tasks ({sum(present)} stated values), from a null rate of {base_rate:.3f}, "
    if mde is None:
        return head + f"no null-for-present rise shows with {POWER:.0%} power: the monitor can only watch."
    return head + f"a null-for-present rise of +{mde:.2f} shows with {POWER:.0%} power."


def watch_line(mde: float | None, target: float, n_tasks: int, what: str = "null-for-present") -> str:
    """One line for a plan or a report: what the rule can see at this size against the rise it targets."""
    if mde is None:
        return (f"{what}: the monitor's {n_tasks} tasks cannot show any rise with {POWER:.0%} power: it can only "
                f"watch")
    verdict = "acts" if mde <= target else "can only watch (raise grpo.monitor.n_tasks)"
    return (f"{what}: a rise of +{mde:.2f} is seen with {POWER:.0%} power at {n_tasks} tasks, against the targeted "
            f"+{target:.2f}: {verdict}")
