"""The gates' error rate, simulated: a candidate whose true difference sits at the margin passes <= 2.5%.

Per-task differences are drawn as paired binary outcomes (d in {-1, 0, +1}: rare one-sided changes, the case a
percentile bootstrap or a t interval on the observed spread gets wrong) and as per-task rates over k fields with
correlated answers (field accuracy). Each configuration draws R replicates at once through the vectorised
`score_interval`; a decision passes non-inferiority only when the lower bound is >= -margin, and `decide` adds
refusals (power, n, degenerate intervals) on top, so its false-pass rate is at most the interval's.
"""

import numpy as np
import pytest
from scipy import stats

from rubricrl.metrics.decide import decide
from rubricrl.metrics.paired import paired_difference, score_interval

R = 4000
LIMIT = 0.025 + 3 * np.sqrt(0.025 * 0.975 / R)  # 2.5% plus three Monte Carlo standard errors


def ternary(rng, n, delta, q):
    """d = -1 with probability q - min(delta, 0), +1 with q + max(delta, 0), else 0: mean delta."""
    u = rng.random((R, n))
    neg, pos = q + max(-delta, 0), q + max(delta, 0)
    return np.where(u < neg, -1.0, np.where(u < neg + pos, 1.0, 0.0))


def rates(rng, n, delta, p_ref, k, rho):
    """Per-task field accuracy over k fields: reference right with p_ref, candidate with p_ref + delta, the
    candidate's draw shared with the reference's with probability rho."""
    z, e = rng.random((R, n, k)), rng.random((R, n, k))
    cand = np.where(rng.random((R, n, k)) < rho, z, e)
    return (cand < p_ref + delta).mean(-1) - (z < p_ref).mean(-1)


# the worst cases of a wider sweep (n 8-200, margins 0.02-0.2, q 0-0.3): rare one-sided changes at n 16-100
CASES = ([("ternary", n, m, q) for n in (8, 16, 32, 100) for m in (0.05, 0.1, 0.2) for q in (0.0, 0.05, 0.3)
          if not (n == 100 and q == 0.3)]
         + [("rates", n, 0.1, p, k, rho) for n in (16, 50) for p in (0.3, 0.9) for k in (1, 5) for rho in (0.5, 0.98)
            if not (n == 50 and k == 5)])


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_a_true_drop_at_the_margin_passes_non_inferiority_at_most_2_5_percent(case):
    rng = np.random.default_rng(CASES.index(case))
    kind, n, m, *rest = case
    d = ternary(rng, n, -m, *rest) if kind == "ternary" else rates(rng, n, -m, *rest)
    lo, _ = score_interval(d)
    assert (lo >= -m).mean() <= LIMIT
    # superiority is the mirror image: a true gain of exactly the margin shown "better by more than the margin"
    _, hi = score_interval(-d)
    lo_sup = -hi
    assert (lo_sup > m).mean() <= LIMIT


def test_the_interval_the_gates_used_before_passed_such_drops_far_more_often():
    """Teeth: the t interval on the observed spread (what a percentile bootstrap approximates), with identical
    answers as [0, 0], passes a drop at the margin > 2.5% where changes are rare and one-sided."""
    rng = np.random.default_rng(0)
    n, m = 100, 0.1
    d = ternary(rng, n, -m, 0.0)
    se = d.std(-1, ddof=1) / np.sqrt(n)
    naive = (d.mean(-1) - stats.t.ppf(0.975, n - 1) * se >= -m).mean()
    assert naive > 0.04
    assert (score_interval(d)[0] >= -m).mean() <= LIMIT


def test_decide_refuses_at_least_what_the_interval_refuses_and_passes_equal_models_when_powered():
    rng = np.random.default_rng(1)
    passed = {}
    for delta in (-0.1, 0.0):
        outcomes = []
        for row in ternary(rng, 200, delta, 0.05)[:300]:  # paired binary answers with these differences
            same = (rng.random(row.shape) < 0.5).astype(float)
            a = np.where(row > 0, 1.0, np.where(row < 0, 0.0, same))
            res = paired_difference(a, a - row, n_resamples=1)
            d = decide(res, "noninferiority", 0.1)
            assert d.outcome != "pass" or res["ci"][0] >= -0.1
            outcomes.append(d.outcome)
        passed[delta] = outcomes.count("pass") / len(outcomes)
    assert passed[-0.1] <= 0.05  # 300 rows: 2.5% plus noise
    assert passed[0.0] >= 0.7, passed  # n=200 is powered for a margin of 0.1 at this spread
