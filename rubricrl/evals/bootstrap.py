"""Percentile bootstrap over tasks, deterministic for a seed (numpy Generator)."""

from __future__ import annotations

from typing import Iterator

import numpy as np

CHUNK = 256  # bootstrap replicates per block, so memory stays at CHUNK * n indices


def resample_indices(n: int, n_boot: int, seed: int) -> Iterator[np.ndarray]:
    """Blocks of bootstrap index rows (each row: n task indices drawn with replacement)."""
    rng = np.random.default_rng(seed)
    done = 0
    while done < n_boot:
        k = min(CHUNK, n_boot - done)
        yield rng.integers(0, n, size=(k, n))
        done += k


def percentile_ci(replicates: np.ndarray, level: float = 0.95) -> list[float]:
    alpha = (1.0 - level) / 2.0
    lo, hi = np.percentile(replicates, [100 * alpha, 100 * (1 - alpha)])
    return [float(lo), float(hi)]


def micro_f1(tp, fp, fn):
    """Micro F1 from summed counts (arrays allowed); empty precision/recall count as 1, as in FieldCounts."""
    tp, fp, fn = (np.asarray(x, dtype=float) for x in (tp, fp, fn))
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(tp + fp > 0, tp / (tp + fp), 1.0)
        r = np.where(tp + fn > 0, tp / (tp + fn), 1.0)
        f1 = np.where(p + r > 0, 2 * p * r / (p + r), 0.0)
    return f1


def bootstrap_cis(values: dict[str, np.ndarray], counts: np.ndarray | None, n_boot: int, seed: int,
                  level: float = 0.95) -> dict[str, list[float] | None]:
    """95% CIs of the mean of each array in `values` and of micro F1 over `counts` (n x 3: tp, fp, fn).

    Every statistic uses the same resampled task sets (a paired bootstrap). `counts` rows that are
    NaN (tasks without a reference) are left out of the F1 replicates.
    """
    names = list(values)
    n = len(next(iter(values.values()))) if values else (0 if counts is None else len(counts))
    if n_boot <= 0 or n == 0:
        return {**{k: None for k in names}, "f1": None}
    reps = {k: [] for k in names}
    f1_reps = []
    gold = None
    if counts is not None:
        gold = ~np.isnan(counts).any(axis=1)
        counts = np.nan_to_num(counts)
    for idx in resample_indices(n, n_boot, seed):
        for k in names:
            reps[k].append(values[k][idx].mean(axis=1))
        if gold is not None and gold.any():
            sums = counts[idx].sum(axis=1)  # (k, 3)
            f1 = micro_f1(sums[:, 0], sums[:, 1], sums[:, 2])
            # A replicate that drew no gold task has no F1.
            has_gold = gold[idx].any(axis=1)
            f1_reps.append(f1[has_gold])
    out = {k: percentile_ci(np.concatenate(reps[k]), level) for k in names}
    f1_all = np.concatenate(f1_reps) if f1_reps else np.array([])
    out["f1"] = percentile_ci(f1_all, level) if f1_all.size else None
    return out
