"""Decisions on intervals: pass, fail, inconclusive and uninformative; the minimum detectable difference."""

import numpy as np
import pytest

from scipy import stats

from rubricrl.metrics.decide import (MIN_N, POWER, against_margin, combine, decide, normal_probability,
                                     pass_probability, required_n)
from rubricrl.metrics.paired import min_detectable, paired_difference, score_interval


def row(lo, hi, a=0.5, b=0.5, n=400, sd=0.1):
    return {"a": a, "b": b, "diff": (lo + hi) / 2, "ci": [lo, hi], "p": 0.5, "n": n, "sd": sd, "mde": 0.1}


@pytest.mark.parametrize("lo, hi, outcome", [(-0.04, 0.06, "pass"), (-0.30, -0.12, "fail"), (-0.15, 0.05, "inconclusive")])
def test_non_inferiority_has_three_outcomes(lo, hi, outcome):
    d = decide(row(lo, hi), "noninferiority", 0.1)
    assert d.outcome == outcome and d.passed == (outcome == "pass")
    assert "n=400, MDE 0.042, power 1.00" in d.line and "lower bound >= -0.1" in d.line


@pytest.mark.parametrize("lo, hi, outcome", [(0.02, 0.10, "pass"), (-0.08, -0.01, "fail"), (-0.01, 0.09, "inconclusive")])
def test_superiority_has_three_outcomes(lo, hi, outcome):
    assert decide(row(lo, hi), "superiority", 0.0).outcome == outcome


def test_an_equal_challenger_that_the_old_mean_rule_promoted_is_inconclusive():
    # The old task gate passed when the mean difference was >= -margin: +0.008 [-0.016, +0.037] with margin 0.
    r = row(-0.016, 0.037, a=0.426, b=0.419, n=20)
    r["diff"] = 0.008
    assert r["diff"] >= -0.0  # the old rule: passed
    assert decide(r, "superiority", 0.0).outcome == "inconclusive"
    assert decide(r, "noninferiority", 0.0).outcome == "inconclusive"


def test_models_at_the_floor_or_ceiling_are_uninformative():
    assert decide(row(0.0, 0.0, a=0.0, b=0.0), "noninferiority", 0.1).outcome == "uninformative"
    assert decide(row(0.0, 0.0, a=1.0, b=1.0), "noninferiority", 0.1).outcome == "uninformative"
    # perplexity has no floor, but equal scores on every item are a degenerate interval: inconclusive
    assert decide(row(0.0, 0.0, a=2.5, b=2.5, sd=0.0), "noninferiority", 0.1, floor=None,
                  ceiling=None).outcome == "inconclusive"
    assert decide(row(-0.01, 0.01, a=2.5, b=2.5), "noninferiority", 0.1, floor=None, ceiling=None).passed
    assert combine(["pass", "uninformative"]) == "inconclusive"
    assert combine(["pass", "inconclusive", "fail"]) == "fail" and combine(["pass", "pass"]) == "pass"


def test_no_interval_is_inconclusive():
    r = {"a": 0.5, "b": 0.0, "diff": 0.5, "ci": None, "p": None, "n": 1, "mde": None}
    assert decide(r, "noninferiority", 0.1).outcome == "inconclusive"


def test_the_minimum_detectable_difference_follows_the_normal_approximation():
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 2, 100).astype(float), rng.integers(0, 2, 100).astype(float)
    d = a - b
    want = (1.959964 + 0.841621) * d.std(ddof=1) / np.sqrt(100)
    assert min_detectable(a, b, np.ones(100)) == pytest.approx(want, rel=1e-5)
    # four times the tasks, half the detectable difference
    assert min_detectable(np.tile(a, 4), np.tile(b, 4), np.ones(400)) == pytest.approx(want / 2, rel=0.02)
    assert paired_difference(a, b)["mde"] == pytest.approx(want, rel=1e-5)
    # identical models: the independent-samples bound stands in; constant scores: nothing to detect
    assert paired_difference(a, a)["mde"] > 0 and min_detectable(np.ones(5), np.ones(5), np.ones(5)) is None


def test_degenerate_intervals_are_inconclusive():
    """One identical pair used to be [0, 0] and passed; a zero-width interval or n below MIN_N decides nothing."""
    one = paired_difference([0.5], [0.5])
    assert decide(one, "noninferiority", 0.1).outcome == "inconclusive"
    flat = decide(row(0.0, 0.0, a=0.4, b=0.4), "noninferiority", 0.1)
    assert flat.outcome == "inconclusive" and "degenerate" in flat.line
    few = decide(row(-0.01, 0.01, n=MIN_N - 1), "noninferiority", 0.1)
    assert few.outcome == "inconclusive" and f"below the minimum of {MIN_N}" in few.line
    # identical answers on 16 items: the score interval is wide and the gate cannot decide
    sixteen = paired_difference(np.r_[np.ones(8), np.zeros(8)], np.r_[np.ones(8), np.zeros(8)])
    assert decide(sixteen, "noninferiority", 0.1).outcome == "inconclusive"


def test_an_underpowered_pass_is_refused_and_says_why():
    """The interval clears -margin, but at this n an equal model would pass less than POWER of the time."""
    r = row(-0.09, 0.25, n=30, sd=0.4)
    d = decide(r, "noninferiority", 0.1)
    assert d.outcome == "inconclusive" and d.power < POWER and d.mde > 0.1
    assert "underpowered: an equal model passes with probability" in d.line
    assert decide({**r, "n": 3000}, "noninferiority", 0.1).passed  # the same spread on 100x the items
    # superiority has no such refusal: clearing +margin is itself the evidence
    assert decide(row(0.11, 0.4, n=30, sd=0.4), "superiority", 0.1).passed


def test_power_is_the_chance_the_gates_own_bound_clears_the_margin():
    """Binary answers, enumerated by brute force through score_interval: every (ups, downs) of n = 40 tasks, each
    weighted by its multinomial chance, gives the same power as against_margin; the continuous model is the lower
    one only where it should be; a rate on 0-5 scales with it; an unbounded metric is a noncentral t."""
    n, m = 40, 0.1
    up, down = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    up, down = up[up + down <= n], down[up + down <= n]
    x = np.where(np.arange(n) < up[:, None], 1.0, np.where(np.arange(n) < (up + down)[:, None], -1.0, 0.0))
    clears = score_interval(x)[0] >= -m
    for sd in (0.1, 0.3, 0.5):
        q = sd * sd / 2
        chance = stats.multinomial.pmf(np.c_[up, down, n - up - down], n, [q, q, 1 - 2 * q])
        assert pass_probability(n, sd, -m) == pytest.approx(chance[clears].sum(), abs=1e-9)
        assert against_margin({"n": n, "sd": sd}, m, 1.0)[1] == pytest.approx(
            min(chance[clears].sum(), normal_probability(n, sd, -m)), abs=1e-9)
    mde, power = against_margin({"n": 100, "sd": 0.3}, m, 1.0)
    assert 0.5 < power < POWER and mde > m  # underpowered: the MDE lies beyond the margin
    assert against_margin({"n": 100, "sd": 1.5}, 5 * m, 5.0) == (pytest.approx(5 * mde), pytest.approx(power))
    sd = 0.2  # unbounded: the t interval's pass is a noncentral t
    crit = stats.t.ppf(0.975, n - 1)
    assert against_margin({"n": n, "sd": sd}, m, None)[1] == pytest.approx(stats.nct.sf(crit, n - 1, m * np.sqrt(n) / sd))
    assert against_margin({"n": 1, "sd": None}, m, 1.0) == (None, None)
    assert against_margin({"n": n, "sd": 0.0}, m, None) == (None, None)  # unbounded, nothing varies


def test_the_required_size_is_the_first_n_whose_equal_model_passes_with_the_power():
    """Identical answers (sd 0), the best case, pass outright from 43 items at margin 0.10 and from 84 at 0.05 (the
    normal approximation with the variance at the margin said 73 and 151), so the CPU default's IFEval 16 cannot
    pass at all; more spread needs more; no margin, or an unbounded metric that never varies, never."""
    n10, n05 = required_n(0.10, 1.0), required_n(0.05, 1.0)
    assert (n10, n05) == (43, 84)
    for n, m in ((n10, 0.10), (n05, 0.05)):
        at, below = (against_margin({"n": k, "sd": 0.0}, m, 1.0)[1] for k in (n, n - 1))
        assert at == 1.0 and below == 0.0  # identical answers pass or fail outright
    k = required_n(0.10, 1.0, sd=0.3)
    assert k > n10 and all(against_margin({"n": j, "sd": 0.3}, 0.10, 1.0)[1] >= POWER for j in range(k, 2 * k + 1))
    assert against_margin({"n": k - 1, "sd": 0.3}, 0.10, 1.0)[1] < POWER
    k = required_n(0.10, None, sd=0.2)  # unbounded (perplexity): the noncentral t, about (2.8 x 2)^2
    assert 28 <= k <= 36 and against_margin({"n": k, "sd": 0.2}, 0.10, None)[1] >= POWER > against_margin(
        {"n": k - 1, "sd": 0.2}, 0.10, None)[1]
    assert required_n(0.0, 1.0) is None and required_n(0.1, None, sd=0.0) is None
    assert required_n(0.9, 1.0) == MIN_N  # never below the minimum
    row = {"n": 16, "sd": 0.0, "ci": [-0.25, 0.25], "diff": 0.0, "a": 0.5, "b": 0.5}
    assert decide(row, "noninferiority", 0.10).outcome == "inconclusive"  # n=16 < 43: refused as underpowered


def test_power_is_a_sawtooth_in_n_and_the_required_size_is_where_it_stays():
    """Binary answers with few changes: power jumps when one more change can be absorbed and sags between, so the
    first n above 0.8 is not a size to plan by; required_n is the n from which it stays there."""
    powers = {n: against_margin({"n": n, "sd": 0.1}, 0.10, 1.0)[1] for n in range(40, 70)}
    first = min(n for n, p in powers.items() if p >= POWER)
    k = required_n(0.10, 1.0, sd=0.1)
    assert first < k and any(powers[n] < POWER for n in range(first, k))
    assert all(p >= POWER for n, p in powers.items() if n >= k)
