"""Paired comparison of two models: ratio difference, score interval, sign-flip permutation p."""

import numpy as np
import pytest
from scipy import stats

from rubricrl.metrics.paired import describe, paired_difference


def test_known_shift_is_detected():
    rng = np.random.default_rng(1)
    b = rng.binomial(1, 0.5, size=300).astype(float)
    a = b.copy()
    flip = rng.choice(np.flatnonzero(b == 0), size=45, replace=False)  # A fixes 45 of B's errors
    a[flip] = 1.0
    res = paired_difference(a, b, n_resamples=1000, seed=0)
    assert res["n"] == 300
    assert res["diff"] == pytest.approx(45 / 300)
    assert res["a"] == pytest.approx(a.mean()) and res["b"] == pytest.approx(b.mean())
    lo, hi = res["ci"]
    assert 0 < lo < res["diff"] < hi
    assert res["p"] < 0.05
    # B - A: the same shift with the other sign.
    rev = paired_difference(b, a, n_resamples=1000, seed=0)
    assert rev["diff"] == pytest.approx(-res["diff"])
    assert rev["ci"][1] < 0 and rev["p"] < 0.05


def test_identical_inputs_bound_the_difference_only_as_tightly_as_n_allows():
    """Six identical answers are not a [0, 0] interval: the score interval of no change at n is
    +-c^2 / (n + c^2) with c the t quantile plus the continuity correction 1/sqrt(n) (the Wilson interval's
    half-width at a proportion of 0)."""
    x = np.array([1, 0, 1, 1, 0, 0.5])
    res = paired_difference(x, x.copy())
    c2 = (stats.t.ppf(0.975, 5) + 1 / np.sqrt(6)) ** 2  # the t quantile and the continuity correction
    assert res == {"a": pytest.approx(x.mean()), "b": pytest.approx(x.mean()), "diff": 0.0, "sd": 0.0,
                   "ci": [pytest.approx(-c2 / (6 + c2)), pytest.approx(c2 / (6 + c2))], "p": 1.0, "n": 6,
                   "mde": pytest.approx(res["mde"]), "binary": False}  # 0.5 is not binary
    # twenty times the tasks: a much tighter interval, still not degenerate
    wide = paired_difference(np.tile(x, 20), np.tile(x, 20))["ci"]
    assert 0 < wide[1] < res["ci"][1] / 10


def test_bounds_scale_the_interval_and_are_checked():
    a, b = np.array([3.0, 1, 4, 2, 5, 0]), np.array([2.0, 1, 4, 1, 5, 1])
    unit = paired_difference(a / 5, b / 5)
    five = paired_difference(a, b, bounds=(0.0, 5.0))
    assert five["ci"] == [pytest.approx(5 * unit["ci"][0]), pytest.approx(5 * unit["ci"][1])]
    with pytest.raises(ValueError, match=r"num_a\[0\] / den = 3 is outside bounds \(0.0, 1.0\)"):
        paired_difference(a, b)
    # unbounded (perplexity): a t interval on the observed spread, none when nothing varies
    free = paired_difference(a, b, bounds=None)
    assert free["ci"][0] < free["diff"] < free["ci"][1]
    assert paired_difference(a, a, bounds=None)["ci"] is None


def test_noise_without_shift_is_not_significant():
    rng = np.random.default_rng(7)
    b = rng.binomial(1, 0.6, size=200).astype(float)
    a = b.copy()
    flip = rng.choice(200, size=40, replace=False)
    a[flip] = 1 - b[flip]  # 40 answers change, each way as the reference's answer falls
    d = a - b
    res = paired_difference(a, b, n_resamples=1000, seed=3)
    assert res["diff"] == pytest.approx(d.sum() / 200) and res["diff"] != 0
    assert res["p"] > 0.05
    assert res["ci"][0] < 0 < res["ci"][1]


def test_deterministic_for_a_seed():
    rng = np.random.default_rng(11)
    a, b = rng.random(80), rng.random(80)
    den = rng.integers(1, 6, size=80)
    first = paired_difference(a, b, den, n_resamples=500, seed=5)
    assert paired_difference(a, b, den, n_resamples=500, seed=5) == first
    other = paired_difference(a, b, den, n_resamples=500, seed=6)
    assert other["diff"] == first["diff"] and other["ci"] == first["ci"]  # the interval draws nothing
    assert other["p"] != first["p"]


def test_ratio_metric_with_unequal_denominators():
    num_a = np.array([3, 1, 0, 4])
    num_b = np.array([1, 1, 2, 1])
    den = np.array([4, 1, 2, 5])
    res = paired_difference(num_a, num_b, den, n_resamples=200, seed=0)
    # By hand: A = 8/12, B = 5/12, a per-task mean would be (0.75+1+0+0.8)/4 instead.
    assert res["a"] == pytest.approx(8 / 12)
    assert res["b"] == pytest.approx(5 / 12)
    assert res["diff"] == pytest.approx(3 / 12)
    assert res["n"] == 4
    # 2**4 = 16 sign patterns of d = [2, 0, -2, 3] <= 200 resamples: scipy enumerates them.
    # Two-sided p = 2 * min(P(T >= 3), P(T <= 3)); of the 8 sign patterns of (2, -2, 3) the sums
    # are 3, 3, 7, 1, -3, -3, -7, -1, so P(T >= 3) = 3/8 (the zero doubles every pattern) -> 0.75.
    assert res["p"] == pytest.approx(0.75)
    lo, hi = res["ci"]
    assert lo <= res["diff"] <= hi


def test_exact_permutation_p_by_hand():
    # d = [1, 1, 1, 1, 1]: only the all-plus and all-minus patterns reach |sum| = 5, of 32.
    res = paired_difference(np.ones(5), np.zeros(5), n_resamples=100, seed=0)
    assert res["p"] == pytest.approx(2 / 32)


def test_zero_denominator_tasks_are_left_out():
    res = paired_difference([1, 0, 0], [0, 0, 0], [2, 0, 1], n_resamples=100)
    assert res["n"] == 2
    assert res["a"] == pytest.approx(1 / 3) and res["diff"] == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="den 0"):
        paired_difference([1, 1], [0, 0], [1, 0])


@pytest.mark.parametrize("num_a,num_b,den,expected", [
    ([], [], None, {"a": None, "b": None, "diff": None, "ci": None, "p": None, "n": 0, "sd": None, "mde": None, "binary": None}),
    ([0, 0], [0, 0], [0, 0], {"a": None, "b": None, "diff": None, "ci": None, "p": None, "n": 0, "sd": None, "mde": None, "binary": None}),
    ([1], [0], None, {"a": 1.0, "b": 0.0, "diff": 1.0, "ci": None, "p": None, "n": 1, "sd": None, "mde": None, "binary": None}),
    ([2], [1], [4], {"a": 0.5, "b": 0.25, "diff": 0.25, "ci": None, "p": None, "n": 1, "sd": None, "mde": None, "binary": None}),
    # one identical pair: no interval and no p (it used to be [0, 0], p=1, and passed non-inferiority)
    ([1], [1], None, {"a": 1.0, "b": 1.0, "diff": 0.0, "ci": None, "p": None, "n": 1, "sd": None, "mde": None, "binary": None}),
])
def test_degenerate_inputs(num_a, num_b, den, expected):
    assert paired_difference(num_a, num_b, den) == expected


@pytest.mark.parametrize("args,kwargs,match", [
    (([1, 0], [1]), {}, "same length"),
    (([1, 0], [1, 0], [1]), {}, "same length"),
    (([[1, 0]], [[1, 0]]), {}, "one-dimensional"),
    (([1, np.nan], [1, 0]), {}, "finite"),
    (([1, 0], [1, 0], [1, -1]), {}, "non-negative"),
    (([1, 0], [0, 1]), {"n_resamples": 0}, "n_resamples"),
    (([1, 0], [0, 1]), {"confidence": 1.0}, "confidence"),
])
def test_invalid_inputs(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        paired_difference(*args, **kwargs)


@pytest.mark.parametrize("result,text", [
    ({"diff": 0.052, "ci": [0.010, 0.094], "p": 0.012, "n": 9}, "+0.052 [+0.010, +0.094], p=0.012"),
    ({"diff": -0.1, "ci": [-0.2, 0.0], "p": 0.5, "n": 9}, "-0.100 [-0.200, +0.000], p=0.500"),
    ({"diff": 0.3, "ci": [0.2, 0.4], "p": 0.00001, "n": 9}, "+0.300 [+0.200, +0.400], p<0.001"),
    ({"diff": 0.0, "ci": [0.0, 0.0], "p": 1.0, "n": 9}, "+0.000 [+0.000, +0.000], p=1.000"),
    ({"diff": 1.0, "ci": None, "p": None, "n": 1}, "+1.000 [n/a], p=n/a"),
    ({"diff": None, "ci": None, "p": None, "n": 0}, "n/a (n=0)"),
])
def test_describe(result, text):
    assert describe(result) == text


def test_describe_digits():
    assert describe({"diff": 0.05234, "ci": [0.0101, 0.0944], "p": 0.0123, "n": 5}, digits=2) == \
        "+0.05 [+0.01, +0.09], p=0.01"
