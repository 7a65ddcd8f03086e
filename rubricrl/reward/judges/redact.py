"""The judge's API key: checked when the judge is built, and hidden from every text an error may show."""

from __future__ import annotations

import json
import unicodedata
from urllib.parse import quote, quote_plus

from rubricrl.core.errors import ConfigError


def check_api_key(env: str, key: str) -> None:
    """ConfigError saying what is wrong with the key in environment variable `env`; never shows any of the key."""
    where = f"environment variable {env} (api_key_env)"
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


def short(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."
