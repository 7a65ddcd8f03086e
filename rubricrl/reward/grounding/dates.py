"""Dates and clock times as a text writes them ('March 5, 2024', '2024年3月5日', '下午3点半'), as YYYY-MM-DD and
HH:MM."""

from __future__ import annotations

import re
import unicodedata

# --- dates and times as the text writes them --------------------------------------------------------

_MONTHS = {m: i + 1 for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct",
                                           "nov", "dec"))}
_MONTH = r"(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?"
_DATE_PATTERNS = (
    (re.compile(r"(?<!\d)(\d{4})\s*年\s*(\d{1,2})\s*月\s*(\d{1,2})\s*[日号]"), "ymd"),
    (re.compile(r"(?<![\d.])(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})(?![\d])"), "ymd"),
    (re.compile(rf"\b{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.I), "mdy"),
    (re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH},?\s+(\d{{4}})\b", re.I), "dmy"),
)
_TIME_PATTERNS = (
    re.compile(r"(凌晨|早上|早晨|上午|中午|下午|傍晚|晚上)?\s*(?<!\d)(\d{1,2}):(\d{2})(?!\d)\s*(am|pm|a\.m\.|p\.m\.)?", re.I),
    re.compile(r"(?<![\d:])(\d{1,2})\s*(am|pm|a\.m\.|p\.m\.)", re.I),
    re.compile(r"(凌晨|早上|早晨|上午|中午|下午|傍晚|晚上)?(\d{1,2})点(半|(\d{1,2})分)?"),
)


def _iso(y: int, m: int, d: int) -> str | None:
    return f"{y:04d}-{m:02d}-{d:02d}" if 1 <= m <= 12 and 1 <= d <= 31 else None


def text_dates(text: str) -> frozenset[str]:
    """The dates a text writes with their year, as YYYY-MM-DD."""
    text = unicodedata.normalize("NFKC", text)
    out = set()
    for pattern, order in _DATE_PATTERNS:
        for m in pattern.finditer(text):
            if order == "ymd":
                y, mo, d = (int(g) for g in m.groups())
            elif order == "mdy":
                mo, d, y = _MONTHS[m.group(1)[:3].casefold()], int(m.group(2)), int(m.group(3))
            else:
                d, mo, y = int(m.group(1)), _MONTHS[m.group(2)[:3].casefold()], int(m.group(3))
            iso = _iso(y, mo, d)
            if iso:
                out.add(iso)
    return frozenset(out)


def _hour24(h: int, marker: str | None) -> int:
    marker = (marker or "").casefold().replace(".", "")
    if marker == "am":
        return 0 if h == 12 else h
    if marker == "pm":
        return h if h == 12 else h + 12
    if marker in ("下午", "傍晚", "晚上"):
        return h + 12 if h < 12 else h
    if marker == "中午":
        return h + 12 if h < 11 else h
    if marker == "凌晨" and h == 12:
        return 0
    return h


def text_times(text: str) -> frozenset[str]:
    """The clock times a text writes, as 24-hour HH:MM ('3:30 pm', '下午3点半' -> 15:30)."""
    text = unicodedata.normalize("NFKC", text)
    out = set()
    for m in _TIME_PATTERNS[0].finditer(text):
        part, h, mi, ampm = m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)
        if ampm and not 1 <= h <= 12:
            continue
        out.add((_hour24(h, ampm or part), mi))
    for m in _TIME_PATTERNS[1].finditer(text):
        h = int(m.group(1))
        if 1 <= h <= 12:
            out.add((_hour24(h, m.group(2)), 0))
    for m in _TIME_PATTERNS[2].finditer(text):
        part, h = m.group(1), int(m.group(2))
        mi = 30 if m.group(3) == "半" else int(m.group(4) or 0)
        out.add((_hour24(h, part), mi))
    return frozenset(f"{h:02d}:{mi:02d}" for h, mi in out if 0 <= h <= 23 and 0 <= mi <= 59)


_ISO_VALUE = re.compile(r"\d{4}-\d{2}-\d{2}")
_HHMM_VALUE = re.compile(r"(\d{1,2}):(\d{2})")
