"""Paired comparison of two models on the same tasks: difference, score interval and permutation p.

A model's metric is the ratio of sums over tasks, sum(num) / sum(den) (den defaults to ones, so
the metric is a mean); see `rubricrl.metrics.strict.per_task` for per-task numerators and
denominators. Both models answered the same tasks, so task i of model A is paired with task i of
model B and the denominators are shared (they come from the gold answers, not from the models).

- CI: a score interval (the Wilson interval's construction, generalised to paired differences of a bounded
  metric): each bound is a one-sided (1 + confidence) / 2 bound, inverted from a t test of H0: diff = delta0 whose
  variance is estimated *under H0*, from the least-favourable distribution there: the observed per-task
  differences mixed with the extreme difference (-range for the lower bound, +range for the upper) in the
  proportion that puts the mean at delta0; the critical value is the t quantile plus a continuity correction of
  1/sqrt(n) (score_lower). A percentile bootstrap, or a t interval on the observed spread, calls a run of identical
  answers [0, 0] and passes a true drop at the margin about 12-20% of the time at n = 16-100 (rare one-sided
  changes); this interval keeps the false-pass rate at the margin <= 2.5% (tests/metrics/test_gate_error_rate.py:
  exactly for binary answers at n <= 100, margins 0-0.2, enumerated; simulated over rates, correlations and
  unequal denominators). It is computed from four moments of the scaled differences and denominators, so a
  simulation's thousands of rows cost little more than one. `bounds=None` (a metric
  with no range, e.g. perplexity's log-likelihood) falls back to the t interval on the observed spread, which
  has no interval when every difference is equal.
- p: two-sided paired permutation test, `scipy.stats.permutation_test` on the per-task
  differences d = num_a - num_b as one sample with `permutation_type="samples"`, which for one
  sample flips the sign of each d at random (the null: A and B are exchangeable on every task).
  The statistic sum(d) / sum(den) equals the ratio difference; sum(den) is fixed under sign flips.
  With 2**n <= n_resamples scipy enumerates every sign pattern (an exact test).

- sd: the spread of the linearised per-task differences (d_i - diff x den_i) / mean(den), which
  `rubricrl.metrics.decide` uses for power against a gate's margin.
- binary: every task scores the metric's floor or ceiling for both models, on equal denominators (IFEval, QA,
  HumanEval): `rubricrl.metrics.decide` then computes power exactly for binary answers (None below 2 tasks, False
  for an unbounded metric).
- mde: the smallest true difference from zero this n detects with 80% power by a two-sided 95% test (a
  description for tables that have no margin; gates compute theirs against the margin), (z_0.975 + z_0.80) x SE, with SE = sd(d) / (mean(den) sqrt(n)) from the observed
  per-task differences; when every d is 0, the independent-samples bound sqrt(var(a) + var(b)) stands in for
  sd(d) (None when that is 0 too: nothing varies, so nothing can be detected).

Tasks whose denominator is 0 (e.g. no gold-null field for invented_rate) add nothing to either
ratio and are left out; `n` counts the tasks used. The permutation test uses `seed`, so a result is
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


CONTINUITY = 1.0  # the continuity correction, in standard units times sqrt(n) (score_lower)


def _moments(mean, sxx, sxy, syy):
    mean = np.asarray(mean, dtype=float)
    return (mean, *(np.broadcast_to(np.asarray(v, dtype=float), mean.shape) for v in (sxx, sxy, syy)))


def _critical(n, confidence: float):
    return stats.t.ppf((1 + confidence) / 2, np.asarray(n) - 1) + CONTINUITY / np.sqrt(n)


def _t_stat(mean, sxx, sxy, syy, n, d0):
    """The t statistic of H0: diff = d0, its variance taken under H0 from the least-favourable mixture."""
    gap, extreme = mean - d0, -1.0 - d0
    w = np.divide(gap, gap - extreme, out=np.ones_like(gap), where=gap - extreme > 0)
    second = np.maximum(sxx - 2 * d0 * sxy + d0 * d0 * syy, 0.0)  # mean((x - d0 y)^2)
    var0 = (1 - w) * second + w * extreme ** 2
    return np.divide(gap, np.sqrt(np.maximum(var0, 0.0) / n), out=np.full_like(gap, np.inf), where=var0 > 0)


def score_lower(mean, sxx, sxy, syy, n, confidence: float = 0.95):
    """The lower score bound (module doc) from the moments of the scaled per-task differences x and denominators y:
    mean(x), mean(x^2), mean(x y), mean(y^2) (arrays of one shape, a bound each), over n tasks (n may be an array
    of that shape too).

    H0: diff = d0 is tested by t = (mean - d0) / sqrt(var0 / n), var0 the second moment about d0 of the
    least-favourable mixture; the bound is the largest d0 whose t exceeds the t quantile plus 1/sqrt(n). That
    1/sqrt(n) is a continuity correction: half the step one task's flip from -1 to +1 moves the sum, in standard
    units where every task changed (the worst case). Binary answers take few values, and without it the exact
    chance that a true difference at the bound passes reaches 3.0-3.2% (n = 31-67 with every task changed;
    tests/metrics/test_gate_error_rate.py enumerates it)."""
    mean, sxx, sxy, syy = _moments(mean, sxx, sxy, syy)
    crit = _critical(n, confidence)
    lo, hi = np.full_like(mean, -1.0), mean.copy()  # t(-1) is infinite, t(mean) is 0: bisect between
    for _ in range(60):
        mid = (lo + hi) / 2
        above = _t_stat(mean, sxx, sxy, syy, n, mid) > crit
        lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
    return np.minimum(lo, mean)


def score_clears(mean, sxx, sxy, syy, n, bound, confidence: float = 0.95):
    """Whether the lower score bound lies above `bound`, without the bisection: t falls as d0 rises, so the bound
    clears it exactly when the mean does and t(bound) exceeds the critical value (rubricrl.metrics.decide's power
    evaluates this over every outcome of a suite; it agrees with score_lower to the bisection's 1e-17)."""
    mean, sxx, sxy, syy = _moments(mean, sxx, sxy, syy)
    bound = np.broadcast_to(np.asarray(bound, dtype=float), mean.shape)
    return (mean > bound) & (_t_stat(mean, sxx, sxy, syy, n, bound) > _critical(n, confidence))


def score_interval(x, y=None, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """The score interval (module doc) of mean(x) / mean(y) for per-task differences scaled into [-1, 1].

    x: (..., n) per-task differences divided by (range x mean(den)); y: the denominators divided by their mean
    (ones when None). Vectorised over leading axes (a simulation passes thousands of rows at once); n >= 2."""
    x = np.asarray(x, dtype=float)
    y = np.ones_like(x) if y is None else np.broadcast_to(np.asarray(y, dtype=float), x.shape)
    n = x.shape[-1]
    mean, sxx, sxy, syy = x.mean(-1), (x * x).mean(-1), (x * y).mean(-1), (y * y).mean(-1)
    # the upper bound is the lower bound of -x, whose moments are these with mean and mean(x y) negated
    return (score_lower(mean, sxx, sxy, syy, n, confidence),
            -score_lower(-mean, sxx, -sxy, syy, n, confidence))


def paired_difference(num_a, num_b, den=None, *, bounds: tuple[float, float] | None = (0.0, 1.0),
                      n_resamples: int = 2000, confidence: float = 0.95, seed: int = 0) -> dict:
    """{"a", "b", "diff", "ci": [lo, hi], "p", "n", "sd", "mde", "binary"} for metric(A) - metric(B) over paired
    tasks.

    `bounds`: the range of a task's metric num / den (a rate: (0, 1)); None for an unbounded metric (module doc).
    Degenerate inputs: n == 0 (or every den 0) -> a, b, diff, ci and p None; n == 1 -> ci and p None; every
    per-task difference 0 -> p 1.0 (scipy is not called) and, bounded, the score interval (never [0, 0]: n equal
    answers bound a difference only as tightly as n allows), unbounded, no interval.
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
    if bounds is not None:
        low, high = bounds
        if not high > low:
            raise ValueError(f"bounds must be (low, high) with high > low, got {bounds}")
        for name, num in (("num_a", num_a), ("num_b", num_b)):
            outside = (num < low * den - 1e-9 * den) | (num > high * den + 1e-9 * den)
            if outside.any():
                i = int(np.flatnonzero(outside)[0])
                raise ValueError(f"{name}[{i}] / den = {num[i] / den[i]:g} is outside bounds {bounds}")
    n = len(den)
    out = {"a": None, "b": None, "diff": None, "ci": None, "p": None, "n": n, "sd": None, "mde": None,
           "binary": None}
    if n == 0:
        return out
    total = den.sum()
    a, b = num_a.sum() / total, num_b.sum() / total
    d = num_a - num_b
    diff = float(d.sum() / total)
    scale = float(den.mean())
    resid = (d - diff * den) / scale
    out.update(a=float(a), b=float(b), diff=diff, mde=min_detectable(num_a, num_b, den))
    if n == 1:
        return out
    out["sd"] = float(np.std(resid, ddof=1))
    if bounds is not None:
        width = bounds[1] - bounds[0]
        ends = [np.isclose(num / den, low) | np.isclose(num / den, high) for num in (num_a, num_b)]
        out["binary"] = bool(np.all(den == den[0]) and ends[0].all() and ends[1].all())
        lo, hi = score_interval(d / (width * scale), den / scale, confidence)
        out["ci"] = [float(lo) * width, float(hi) * width]
    else:
        out["binary"] = False
    if bounds is None and out["sd"] > 0:
        half = float(stats.t.ppf((1 + confidence) / 2, n - 1)) * out["sd"] / np.sqrt(n)
        out["ci"] = [float(diff - half), float(diff + half)]
    if not d.any():
        out["p"] = 1.0
        return out

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
