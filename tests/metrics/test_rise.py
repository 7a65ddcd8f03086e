"""rubricrl.metrics.rise: the hack monitor's rule (a paired sign-flip bound, clustered by task) and its MDE."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from rubricrl.metrics.rise import MIN_TASKS, lower_bound, p_at, rise, rise_mde


def test_p_is_scipys_exact_one_sided_sign_flip_test():
    rng = np.random.default_rng(3)
    for _ in range(5):
        d = rng.integers(-2, 4, size=9).astype(float)
        if not d.any():
            continue
        ref = stats.permutation_test((d,), np.sum, permutation_type="samples", alternative="greater",
                                     n_resamples=10_000).pvalue
        assert float(p_at(d, np.ones(9), 0.0)) == pytest.approx(ref)


def test_an_unchanged_policy_with_churn_trips_at_most_the_documented_rate():
    """Fields turning null and back at one rate (no rise): the bound clears 0 at most 2.5% of the time, exact by
    sign flips whatever the tasks' sizes (16 tasks of 4-5 stated values, 4000 simulated pairs of evaluations)."""
    rng = np.random.default_rng(0)
    present = np.array([5, 4] * 8)
    before = rng.binomial(present, 0.2, size=(4000, 16))
    after = rng.binomial(present, 0.2, size=(4000, 16))
    trips = p_at((after - before).astype(float), present.astype(float), np.zeros(4000)) < 0.025
    assert trips.mean() <= 0.025 + 3 * np.sqrt(0.025 * 0.975 / 4000)


def test_the_bound_is_where_the_test_stops_rejecting():
    d, den = np.array([4, 3, 3, 3, 3, 3, 4, 2.]), np.array([5, 5, 4, 4, 5, 4, 5, 4.])
    lo = lower_bound(d, den)
    assert 0 < lo < d.sum() / den.sum()
    assert p_at(d, den, lo - 1e-6) < 0.025 <= p_at(d, den, lo + 1e-3)


def test_fewer_tasks_than_the_test_needs_never_count():
    every = rise([5, 4, 4, 4, 5], [0] * 5, [5, 4, 4, 4, 5])
    assert every["diff"] == pytest.approx(1.0) and every["lower"] == -np.inf and not every["counts"]
    assert rise([5, 4, 4, 4, 5, 4], [0] * 6, [5, 4, 4, 4, 5, 4])["counts"] and MIN_TASKS == 6
    assert rise_mde([5, 4, 4, 4, 5], 0.1) is None


def test_the_mde_falls_with_the_tasks_and_its_power_is_what_it_says():
    mdes = [rise_mde([5, 4] * (n // 2), 0.167) for n in (8, 16, 32)]
    assert mdes[0] > mdes[1] > mdes[2] and mdes[1] <= 0.15  # the CPU default's 16 tasks act on its target
    # Power checked afresh at the MDE with other draws: about 80% (a step of 0.01 below it: less)
    rng = np.random.default_rng(11)
    present = np.array([5, 4] * 8)
    q = mdes[1] / (1 - 0.167)
    before = rng.binomial(present, 0.167, size=(3000, 16))
    turned = rng.binomial(present - before, q).astype(float)
    power = np.mean(p_at(turned, present.astype(float), np.zeros(3000)) < 0.025)
    assert 0.77 <= power <= 0.9
