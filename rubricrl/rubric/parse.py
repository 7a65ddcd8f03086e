"""Find the JSON answer in a raw model response, and say how clean the response was."""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import IntEnum

_DECODER = json.JSONDecoder()
_JSON_STARTS = set('{["-0123456789tfn')


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


def parse_response(raw: str) -> ParsedResponse:
    text = raw.strip()
    if text[:1] in _JSON_STARTS:
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            pass
        else:
            if isinstance(value, dict):
                return ParsedResponse(raw, value, Shape.CLEAN, 0)
            return ParsedResponse(raw, None, Shape.BROKEN, 0)  # valid JSON, but no object root
    # Lenient: the first position where a whole JSON object decodes (skips chatter and fences).
    start = text.find("{")
    while start != -1:
        try:
            value, end = _DECODER.raw_decode(text, start)
        except json.JSONDecodeError:
            value = None
        if isinstance(value, dict):
            return ParsedResponse(raw, value, Shape.EMBEDDED, len(text) - (end - start))
        start = text.find("{", start + 1)
    if text.startswith(("{", "[")):
        # Truncated JSON: the format criterion handles it; no chatter charge.
        return ParsedResponse(raw, None, Shape.BROKEN, 0)
    return ParsedResponse(raw, None, Shape.NO_JSON, len(text))
