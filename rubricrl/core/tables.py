"""Markdown tables and numbers for reports: the one helper every report section builds its tables with.

A cell is any value: None is '-', a float is written with `digits` decimals (or as given by `fmt`), text has its
pipes escaped and its line breaks folded, so a model's answer in a cell cannot break the table.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Sequence


def cell(value: Any, digits: int = 3, limit: int | None = None) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        text = f"{value:.{digits}f}"
    else:
        text = str(value)
    text = " ".join(text.replace("|", "\\|").split())
    if limit is not None and len(text) > limit:
        text = text[: limit - 3] + "..."
    return text


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], digits: int = 3, limit: int | None = None) -> str:
    """A GitHub-flavoured Markdown table (no trailing newline); `limit` cuts long cells."""
    head = list(headers)
    lines = ["| " + " | ".join(cell(h) for h in head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        row = list(row)
        if len(row) != len(head):
            raise ValueError(f"a row of {len(row)} cells under {len(head)} headers: {row!r}")
        lines.append("| " + " | ".join(cell(v, digits, limit) for v in row) + " |")
    return "\n".join(lines)


def ci(mean: float | None, interval: Sequence[float | None] | None, digits: int = 3) -> str:
    """'0.412 [0.301, 0.520]' ('-' when the mean is undefined, the mean alone without an interval)."""
    if mean is None:
        return "-"
    if not interval or any(v is None for v in interval):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} [{interval[0]:.{digits}f}, {interval[1]:.{digits}f}]"
