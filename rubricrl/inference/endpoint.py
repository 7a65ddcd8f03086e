"""What every judge behind an OpenAI-compatible chat endpoint shares, tied to no one judge: the reward's judge
(rubricrl.reward.judges.openai_judge) and the free-text checklist's judge panel (rubricrl.metrics.checklist_judge)
both use it, and neither imports the other (the metrics layer shares no code with the reward: tests/test_layers.py,
tests/metrics/test_strict_metric.py).

- ResponseFormats: the response format asked for and its fallback. "auto" tries json_schema, then json_object with
  the schema (llama.cpp's server turns it into a grammar, and answers json_schema with HTTP 500), then none, moving
  on for good at a refused format; response_format() is the request body's field for one of them.
- fence(): untrusted text (a task, a reply) fenced as data a prompt can show, which can neither close its fence nor
  forge another.
- check_api_key(), Redactor, short(): the API key checked when a judge is built, and hidden in all its spellings (and
  any 8+ character piece of one) from every text an error may show.
- error_text(): the message of an error reply's body; backoff_s(): the wait before a retry.

Light on import: the standard library and rubricrl.core only (no openai, httpx or torch).
"""

from __future__ import annotations

import json
import re
import threading
import unicodedata
from urllib.parse import quote, quote_plus

from rubricrl.core.errors import ConfigError

AUTO_FORMATS = ("json_schema", "json_object", "none")  # response_format "auto", in the order tried
MAX_BACKOFF_S = 10.0
MAX_DETAIL_CHARS = 16_000  # untrusted text searched for key pieces for an error message (which shows 200)
FENCE_RUN = re.compile(r"\[{3,}")  # the fence markers start with "[[["; data may not contain that


# --- the response format ----------------------------------------------------------------------------------------

def response_format(fmt: str, schema: dict, name: str) -> dict | None:
    """The request body's response_format asking for JSON that follows `schema` (named `name` where the format
    names it), or None for the format "none"."""
    if fmt == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}
    if fmt == "json_object":  # llama.cpp's server turns the schema into a grammar
        return {"type": "json_object", "schema": schema}
    return None


class ResponseFormats:
    """The response format a judge asks its endpoint for, shared by its threads: one fixed format, or with "auto"
    the next of AUTO_FORMATS each time the server refuses one (for good: the index only moves forward).

    A call reads state() before it is sent, and reports what came of it with answered() or rejected()."""

    def __init__(self, mode: str):
        self.formats = AUTO_FORMATS if mode == "auto" else (mode,)
        self._index = 0  # into formats
        self._ok = False  # the current format has had a 2xx answer
        self._lock = threading.Lock()

    @property
    def current(self) -> str:
        return self.formats[self._index]

    def state(self) -> tuple[int, bool]:
        """The current format's index, and whether the server has answered it yet (until then a failed call may
        only mean the format is refused)."""
        with self._lock:
            return self._index, self._ok

    def response_format(self, fmt: int, schema: dict, name: str) -> dict | None:
        """The request body's response_format for format `fmt` (an index from state())."""
        return response_format(self.formats[fmt], schema, name)

    def answered(self, fmt: int) -> None:
        """A call in format `fmt` had a 2xx answer."""
        with self._lock:
            self._ok = self._ok or fmt == self._index

    def rejected(self, fmt: int, status: int) -> bool:
        """A call in format `fmt` got HTTP `status`; True when the format was refused and another one is to be tried
        at once (the call is no failure), False when the status is the call's failure."""
        with self._lock:
            if fmt < self._index:
                return True  # another thread already moved on
            # llama.cpp answers json_schema with HTTP 500, so a 5xx counts until the format has worked once.
            refused = status in (400, 422) or (status >= 500 and not self._ok)
            if not refused or fmt + 1 >= len(self.formats):
                return False
            self._index, self._ok = fmt + 1, False
            return True


def backoff_s(base_s: float, failures: int) -> float:
    """The wait before the retry that follows the `failures`-th failed call: base_s, doubling, at most 10 s."""
    return min(base_s * 2 ** (failures - 1), MAX_BACKOFF_S)


def error_text(body: bytes) -> str:
    """The message of an error reply ({"error": {"message": ...}}), or its whole body as text."""
    text = body.decode("utf-8", "replace")
    try:
        return str(json.loads(text)["error"]["message"])
    except (ValueError, RecursionError, KeyError, IndexError, TypeError):
        return text


# --- untrusted text in a prompt ---------------------------------------------------------------------------------

def fence(label: str, text: str) -> str:
    """text between [[[BEGIN label]]] and [[[END label]]]; every run of 3+ "[" in it spaced out, so that it can
    neither close its fence nor forge another."""
    safe = FENCE_RUN.sub(lambda m: " ".join(m.group()), text)
    return f"[[[BEGIN {label}]]]\n{safe}\n[[[END {label}]]]"


# --- the API key ------------------------------------------------------------------------------------------------

def check_api_key(env: str, key: str, setting: str = "api_key_env") -> None:
    """ConfigError saying what is wrong with the key in environment variable `env` (named by the setting
    `setting`); never shows any of the key."""
    where = f"environment variable {env} ({setting})"
    names = {"\r": "a carriage return", "\n": "a line feed", "\0": "a NUL byte", "\t": "a tab"}
    bad = next((ch for ch in key if unicodedata.category(ch) == "Cc"), None)  # C0, DEL and C1
    if bad is not None:
        raise ConfigError(f"{where} holds {names.get(bad, 'a control character')}; strip it")
    if key != key.strip():
        raise ConfigError(f"{where} has leading or trailing whitespace; strip it")
    if not key.isascii():  # httpx sends headers as ASCII; a non-ASCII key is a paste error
        raise ConfigError(f"{where} holds a non-ASCII character; an API key is plain ASCII")


class Redactor:
    """Hides a secret in text: every spelling error text may carry it in, and every piece of one 8+ chars long."""

    PIECE = 8

    def __init__(self, secret: str | None):
        forms = set()
        if secret:
            utf8 = secret.encode("utf-8", "backslashreplace")
            forms = {secret, repr(secret)[1:-1], ascii(secret)[1:-1], repr(utf8)[2:-1],
                     secret.encode("unicode_escape").decode("ascii"),
                     quote(utf8, safe=""), quote(utf8), quote_plus(utf8),
                     json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]}
        self.forms = sorted(forms - {""}, key=len, reverse=True)
        n = self.PIECE
        self.pieces = {form[i:i + n] for form in self.forms for i in range(len(form) - n + 1)}

    def __call__(self, text: str, keep: int | None = None) -> str:
        """text redacted; with keep, its first `keep` characters, cut only once every whole key is hidden."""
        for form in self.forms:
            text = text.replace(form, "***")
        text = text[:keep]
        n, spans = self.PIECE, []
        for i in range(len(text) - n + 1) if self.pieces else ():
            if text[i:i + n] in self.pieces:
                if spans and i <= spans[-1][1]:
                    spans[-1][1] = i + n
                else:
                    spans.append([i, i + n])
        out, last = [], 0
        for a, b in spans:
            out += [text[last:a], "***"]
            last = b
        return "".join(out) + text[last:]

    def message(self, text: str, detail: str | None = None) -> str:
        """An error message: text, then untrusted detail (a reply, an error body) as a repr() of one short line, so
        that it can neither break the line nor send terminal escapes; the key hidden before anything is cut."""
        if detail is not None:
            text += f": {short(self(detail, keep=MAX_DETAIL_CHARS))!r}"
        return self(text)


def short(text: str, limit: int = 200) -> str:
    """text on one line (runs of whitespace one space), cut to `limit` characters and "..."."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."
