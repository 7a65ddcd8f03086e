"""Find the JSON answer in a raw model response, and say how clean the response was.

Never raises, and costs time linear in the response: a response the parser cannot read (deeply
nested, NaN, numbers beyond the double range, far more items than an extraction holds) has no
answer object, `error` says why, and the rubric scores that.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import IntEnum

from rubricrl.core.jsonio import JSONError, StrictDecoder

_JSON_STARTS = set('{["-0123456789tfn')
# Where an embedded object may start: '{' then '"' or '}' (anything else fails at once), found in C.
_OBJECT_START = re.compile(r'\{[ \t\n\r]*["}]')
# Starts tried before the lenient search gives up. Each failed decode costs up to the length of the
# response (json's error position counts lines from the text start), so the search costs at most
# MAX_STARTS such passes; chatter before an answer has a handful of braces.
MAX_STARTS = 64
# Array items and object members below the answer's own fields. Grounding checks every item (tens of
# microseconds each), so this bounds the scoring time; an extraction answer holds a few dozen.
MAX_ITEMS = 2000


class Shape(IntEnum):
    """How the response holds its answer; the format criterion scores these."""

    NO_JSON = 0  # prose, or nothing that parses
    BROKEN = 1  # starts like JSON but does not parse (truncated), or JSON whose root is no object
    EMBEDDED = 2  # a JSON object inside other text (chatter, a code fence)
    CLEAN = 3  # the whole response is one JSON object


@dataclass(frozen=True)
class ParsedResponse:
    raw: str
    obj: dict | None  # the answer object, when one was found
    shape: Shape
    extra_chars: int  # characters outside the JSON object (0 for a clean answer)
    span: tuple[int, int] | None = None  # where the answer object's JSON text lies in `raw`
    error: str | None = None  # why there is no answer object, when the parser can tell


def parse_response(raw: str) -> ParsedResponse:
    text = raw.strip()
    lead = len(raw) - len(raw.lstrip())
    decoder = StrictDecoder(text)
    error = None
    if text[:1] in _JSON_STARTS:
        try:
            value = decoder.whole()
        except JSONError as err:
            error = str(err) if text[0] in "{[" else None  # prose starting with a digit says nothing
        else:
            if not isinstance(value, dict):
                return ParsedResponse(raw, None, Shape.BROKEN, 0, error=f"the JSON is a {type(value).__name__}, not an object")
            return _answer(raw, value, Shape.CLEAN, 0, (lead, lead + len(text)))
    # Lenient: the first object that decodes (skips chatter and fences). A failed start resumes
    # after the point where its decoding failed, so no character is decoded twice; an object nested
    # in a broken one (a truncated answer) is not the answer and is not looked for.
    pos = 0
    for _ in range(MAX_STARTS):
        m = _OBJECT_START.search(text, pos)
        if m is None:
            break
        try:
            value, end = decoder.decode_at(m.start())
        except JSONError as err:
            error = error or str(err)
            if err.resume is None:
                break
            pos = err.resume
            continue
        return _answer(raw, value, Shape.EMBEDDED, len(text) - (end - m.start()), (lead + m.start(), lead + end))
    if text.startswith(("{", "[")):
        # Truncated JSON: the format criterion handles it; no chatter charge.
        return ParsedResponse(raw, None, Shape.BROKEN, 0, error=error)
    return ParsedResponse(raw, None, Shape.NO_JSON, len(text), error=error)


def _answer(raw: str, obj: dict, shape: Shape, extra: int, span: tuple[int, int]) -> ParsedResponse:
    if _too_many_items(obj):
        return ParsedResponse(raw, None, Shape.BROKEN, 0, error=f"more than {MAX_ITEMS} items in the answer's values")
    return ParsedResponse(raw, obj, shape, extra, span)


def _too_many_items(obj: dict) -> bool:
    level, count = [v for v in obj.values() if isinstance(v, (dict, list))], 0
    while level:
        count += sum(map(len, level))
        if count > MAX_ITEMS:
            return True
        level = [c for v in level for c in (v.values() if isinstance(v, dict) else v) if isinstance(c, (dict, list))]
    return False
