"""Paired comparison of two models on the same tasks: difference, bootstrap CI and permutation p.

A model's metric is the ratio of sums over tasks, sum(num) / sum(den) (den defaults to ones, so
the metric is a mean); see `rubricrl.metrics.strict.per_task` for per-task numerators and
denominators. Both models answered the same tasks, so task i of model A is paired with task i of
model B and the denominators are shared (they come from the gold answers, not from the models).

- CI: `scipy.stats.bootstrap` with `paired=True` (tasks are resampled with replacement, the same
  indices for A, B and den), percentile method, of (sum(num_a) - sum(num_b)) / sum(den).
- p: two-sided paired permutation test, `scipy.stats.permutation_test` on the per-task
  differences d = num_a - num_b as one sample with `permutation_type="samples"`, which for one
  sample flips the sign of each d at random (the null: A and B are exchangeable on every task).
  The statistic sum(d) / sum(den) equals the ratio difference; sum(den) is fixed under sign flips.
  With 2**n <= n_resamples scipy enumerates every sign pattern (an exact test).

- mde: the smallest true difference this n detects with 80% power by a two-sided 95% test (equivalently a
  one-sided 97.5% bound), (z_0.975 + z_0.80) x SE, with SE = sd(d) / (mean(den) sqrt(n)) from the observed
  per-task differences; when every d is 0, the independent-samples bound sqrt(var(a) + var(b)) stands in for
  sd(d) (None when that is 0 too: nothing varies, so nothing can be detected).

Tasks whose denominator is 0 (e.g. no gold-null field for invented_rate) add nothing to either
ratio and are left out; `n` counts the tasks used. Both procedures use `seed`, so a result is
deterministic for a seed (and a scipy version).
"""

from __future__ import annotations

import inspect

import numpy as np
from scipy import stats


def _rng_kw(fn) -> str:
    """scipy >= 1.15 names the seed keyword `rng`; older versions only have `random_state`."""
    return "rng" if "rng" in inspect.signature(fn).parameters else "random_state"


def _as_1d(x, name: str) -> np.ndarray:
    arr = np.asarray(x, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite")
    return arr


def paired_difference(num_a, num_b, den=None, *, n_resamples: int = 2000, confidence: float = 0.95,
                      seed: int = 0) -> dict:
    """{"a", "b", "diff", "ci": [lo, hi], "p", "n"} for metric(A) - metric(B) over paired tasks.

    Degenerate inputs: n == 0 (or every den 0) -> a, b, diff, ci and p None; n == 1 -> ci and p
    None; every per-task difference 0 -> diff 0.0, ci [0.0, 0.0], p 1.0 (scipy is not called).
    """
    num_a, num_b = _as_1d(num_a, "num_a"), _as_1d(num_b, "num_b")
    den = np.ones_like(num_a) if den is None else _as_1d(den, "den")
    if not (len(num_a) == len(num_b) == len(den)):
        raise ValueError(f"num_a, num_b and den must have the same length, "
                         f"got {len(num_a)}, {len(num_b)} and {len(den)}")
    if (den < 0).any():
        raise ValueError("den must be non-negative")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    empty = den == 0
    if ((num_a[empty] != 0) | (num_b[empty] != 0)).any():
        raise ValueError("a task with den 0 must have numerators 0")
    keep = ~empty
    num_a, num_b, den = num_a[keep], num_b[keep], den[keep]
    n = len(den)
    out = {"a": None, "b": None, "diff": None, "ci": None, "p": None, "n": n, "mde": None}
    if n == 0:
        return out
    total = den.sum()
    a, b = num_a.sum() / total, num_b.sum() / total
    d = num_a - num_b
    out.update(a=float(a), b=float(b), diff=float(d.sum() / total), mde=min_detectable(num_a, num_b, den))
    if not d.any():
        out.update(diff=0.0, ci=[0.0, 0.0], p=1.0)
        return out
    if n == 1:
        return out

    def ratio_diff(x, y, z, axis=-1):
        return (x.sum(axis=axis) - y.sum(axis=axis)) / z.sum(axis=axis)

    boot = stats.bootstrap((num_a, num_b, den), ratio_diff, paired=True, vectorized=True,
                           n_resamples=n_resamples, confidence_level=confidence, method="percentile",
                           **{_rng_kw(stats.bootstrap): np.random.default_rng(seed)})
    lo, hi = boot.confidence_interval
    out["ci"] = [float(lo), float(hi)]

    def flipped_sum(x, axis=-1):
        return x.sum(axis=axis) / total

    perm = stats.permutation_test((d,), flipped_sum, permutation_type="samples", vectorized=True,
                                  n_resamples=n_resamples, alternative="two-sided",
                                  **{_rng_kw(stats.permutation_test): np.random.default_rng(seed)})
    out["p"] = float(min(1.0, perm.pvalue))
    return out


def min_detectable(num_a, num_b, den, power: float = 0.8, confidence: float = 0.95) -> float | None:
    """The smallest paired difference of ratios detectable at `power` by a two-sided test at `confidence`."""
    n = len(den)
    if n < 2:
        return None
    scale = float(np.mean(den))
    d = (np.asarray(num_a, float) - np.asarray(num_b, float)) / scale
    sd = float(np.std(d, ddof=1))
    if sd == 0:
        sd = float(np.sqrt(np.var(np.asarray(num_a, float) / scale, ddof=1)
                           + np.var(np.asarray(num_b, float) / scale, ddof=1)))
    if sd == 0:
        return None
    z = stats.norm.ppf(1 - (1 - confidence) / 2) + stats.norm.ppf(power)
    return float(z * sd / np.sqrt(n))


def describe(result: dict, digits: int = 3) -> str:
    """One line, e.g. '+0.052 [+0.010, +0.094], p=0.012' ('n/a' for what is undefined)."""
    def signed(x):
        return f"{x:+.{digits}f}"

    if result.get("diff") is None:
        return f"n/a (n={result.get('n', 0)})"
    ci = result.get("ci")
    ci_text = f"[{signed(ci[0])}, {signed(ci[1])}]" if ci is not None else "[n/a]"
    p = result.get("p")
    if p is None:
        p_text = "p=n/a"
    elif 0 < p < 10 ** -digits:
        p_text = f"p<{10 ** -digits:.{digits}f}"
    else:
        p_text = f"p={p:.{digits}f}"
    return f"{signed(result['diff'])} {ci_text}, {p_text}"
