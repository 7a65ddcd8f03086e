"""Reading a verdict from a judge's reply: the first JSON object with a score in range (else 'score: N'), in time
linear in the reply; anything else is no verdict (None), never a 0."""

from __future__ import annotations

import json
import re

OBJECT_START = re.compile(r'\{\s*"')  # where an object with a key (a verdict) may start
SCORE_RE = re.compile(r'"?\bscore"?\s*[:=]\s*"?(-?\d+(?:\.\d+)?)', re.IGNORECASE)
MAX_VERDICT_CHARS = 32_000  # a reply is searched for its verdict this far
MAX_OBJECT_CHARS = 2_000  # a verdict object is decoded within this window (its reason is short)


def _as_int(value) -> int | None:
    if isinstance(value, bool):  # JSON true/false are not the scores 1/0
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return int(number) if number.is_integer() else None  # NaN and infinities are not integers


def _first_scored_object(text: str) -> dict | None:
    """The first JSON object (nested ones included) with a "score" key, in document order.

    Linear in the text: each '{' is decoded within a window, and the characters decoded in all (as far as
    each attempt got) are capped, so neither long nor deeply nested replies make the search quadratic.
    """
    decoder = json.JSONDecoder()
    budget, match = 4 * len(text), OBJECT_START.search(text)
    while match and budget > 0:
        start = match.start()
        window = text[start:start + MAX_OBJECT_CHARS]
        try:
            obj, end = decoder.raw_decode(window)
        except json.JSONDecodeError as err:
            budget -= err.pos + 1
            match = OBJECT_START.search(text, start + 1)
            continue
        except (ValueError, RecursionError):  # an integer too long to convert, or nesting too deep
            budget -= len(window)
            match = OBJECT_START.search(text, start + 1)
            continue
        budget -= end
        stack = [obj]
        while stack:  # pre-order walk of the decoded object; its nested objects need no decoding again
            item = stack.pop()
            if isinstance(item, dict):
                if "score" in item:
                    return item
                stack.extend(reversed(item.values()))
            elif isinstance(item, list):
                stack.extend(reversed(item))
        match = OBJECT_START.search(text, start + end)
    return None


def parse_verdict(text: str, lo: int, hi: int) -> dict | None:
    """{score, reason} from a reply: the first JSON object with a score, else 'score: N'; None if no valid score."""
    text = text[:MAX_VERDICT_CHARS]
    obj = _first_scored_object(text)
    if obj is not None:
        score, reason = obj["score"], obj.get("reason")
    else:
        match = SCORE_RE.search(text)
        if not match:
            return None
        score, reason = match.group(1), None
    score = _as_int(score)
    if score is None or not lo <= score <= hi:
        return None
    reason = reason.strip() if isinstance(reason, str) else ""
    return {"score": score, "reason": reason or text.strip()[:500]}


def parse_item_grades(text: str, ids: list[str]) -> dict | None:
    """{item id: {"met": bool, "reason": str}} for exactly the given ids, from the first JSON object in the reply
    keyed by all of them (other keys are ignored); None when none has a boolean `met` for every id."""
    text = text[:MAX_VERDICT_CHARS]
    decoder = json.JSONDecoder()
    for n, match in enumerate(OBJECT_START.finditer(text)):
        if n >= 64:  # a bounded search: a reply with the verdicts holds them near its start
            return None
        try:
            obj, _ = decoder.raw_decode(text[match.start():match.start() + 16 * MAX_OBJECT_CHARS])
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict) and all(isinstance(obj.get(i), dict) and isinstance(obj[i].get("met"), bool)
                                         for i in ids):
            return {i: {"met": obj[i]["met"], "reason": r.strip()[:300] if isinstance(r := obj[i].get("reason"), str)
                        else ""} for i in ids}
    return None
