"""Figures for report sections: matplotlib's object API (no pyplot, no global backend state), one PNG each, and
the data a test or a reader may check (the rollback marker steps, the labels)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

DPI = 100


def finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


@dataclass
class FigureResult:
    """A written PNG and the data a test (or a reader) may check, e.g. the rollback marker steps."""

    name: str
    path: Path
    title: str
    data: dict = field(default_factory=dict)


def figure(nrows: int = 1, ncols: int = 1, size=(8.0, 4.0), **kw):
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, **kw)
    return fig, axes


def save(fig, out_dir: Path, name: str, title: str, data: dict | None = None) -> FigureResult:
    from matplotlib.ticker import MaxNLocator

    for ax in fig.axes:
        if ax.get_xlabel() == "step":  # steps are whole numbers
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    path = Path(out_dir) / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI)
    return FigureResult(name, path, title, data or {})


def xy(rows: list[dict], key: str) -> tuple[list, list]:
    pts = [(r["step"], r[key]) for r in rows if finite(r.get("step")) and finite(r.get(key))]
    return [p[0] for p in pts], [p[1] for p in pts]


def errbar(ax, labels: list[str], mean: list, lo: list, hi: list, color: str) -> None:
    ys = list(range(len(labels)))
    xerr = [[(m - l) if finite(l) and finite(m) else 0 for m, l in zip(mean, lo)],
            [(h - m) if finite(h) and finite(m) else 0 for m, h in zip(mean, hi)]]
    ax.errorbar([m if finite(m) else math.nan for m in mean], ys, xerr=xerr, fmt="o", color=color, capsize=3)
    ax.set_yticks(ys, labels, fontsize=8)
    if not ax.yaxis_inverted():  # the first row on top (axes with sharey are inverted once for all)
        ax.invert_yaxis()
    ax.grid(alpha=0.3, axis="x")


