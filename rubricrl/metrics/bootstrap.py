"""Percentile bootstrap 95% intervals over tasks (scipy.stats.bootstrap), deterministic for a seed.

A metric is a ratio of sums over tasks, sum(num) / sum(den): a mean when every den is 1, a micro
rate (e.g. fields right / fields) otherwise. Tasks are resampled, so the interval reflects which
tasks were drawn. Comparisons of two models use `rubricrl.metrics.paired` instead.
"""

from __future__ import annotations

import numpy as np
from scipy import stats


def ratio_ci(num, den=None, n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> list[float] | None:
    """The interval of sum(num) / sum(den) over resampled tasks; None when it cannot be formed."""
    num = np.asarray(num, dtype=float)
    den = np.ones_like(num) if den is None else np.asarray(den, dtype=float)
    if n_boot <= 0 or len(num) == 0 or den.sum() <= 0:
        return None
    if len(num) == 1 or np.all(num * den.sum() == num.sum() * den):  # one ratio only: nothing to resample
        value = float(num.sum() / den.sum())
        return [value, value]

    def statistic(n, d, axis=-1):
        total = d.sum(axis=axis)
        return np.divide(n.sum(axis=axis), total, out=np.full(np.shape(total), np.nan), where=total > 0)

    res = stats.bootstrap((num, den), statistic, paired=True, vectorized=True, n_resamples=n_boot,
                          confidence_level=level, method="percentile", rng=np.random.default_rng(seed))
    lo, hi = res.confidence_interval
    return [float(lo), float(hi)]
