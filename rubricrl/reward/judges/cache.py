"""On-disk cache of judge samples: re-scoring the same responses costs no judge calls."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import sys
import threading
from pathlib import Path


def cache_key(*, base_url: str, model: str, messages: list[dict], sample: int, temperature: float,
              max_tokens: int, response_format: str) -> str:
    # Everything that decides the sample: the endpoint and its settings, and the prompt, which carries the
    # criterion, task and response. ASCII JSON, so a lone surrogate in a response cannot break the hash.
    parts = dict(base_url=base_url.rstrip("/"), model=model, messages=messages, sample=sample,
                 temperature=temperature, max_tokens=max_tokens, response_format=response_format)
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode("ascii")).hexdigest()


class JudgeCache:
    """A sqlite3 key -> JSON value table in `cache_dir`, shared by threads (and processes)."""

    def __init__(self, cache_dir: str | Path):
        path = Path(cache_dir)
        path.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._warned = False
        self.path = path / "judge.sqlite3"
        self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        with self._lock, self._db:
            self._db.execute("PRAGMA journal_mode=WAL")  # readers do not block the writer
            self._db.execute("CREATE TABLE IF NOT EXISTS samples (key TEXT PRIMARY KEY, value TEXT NOT NULL)")

    def get(self, key: str, valid=None) -> dict | None:
        """The cached sample, or None: a miss, or an entry that does not parse as a sample (a miss too: the judge is
        asked again and the entry replaced; said once per cache on stderr). `valid(value) -> bool` tells a sample
        of another shape (rubric items' grades); by default a criterion's {score, reason}."""
        with self._lock:
            row = self._db.execute("SELECT value FROM samples WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        try:
            value = json.loads(row[0])
            if valid is not None:
                if not valid(value):
                    raise ValueError("not a sample of item grades")
            elif not (isinstance(value, dict) and isinstance(value.get("score"), (int, float))
                      and not isinstance(value.get("score"), bool) and isinstance(value.get("reason"), str)):
                raise ValueError("not a {score, reason} sample")
        except (ValueError, TypeError) as err:
            if not self._warned:
                self._warned = True
                print(f"judge cache: {self.path}: entry {key[:12]} does not parse ({type(err).__name__}: "
                      f"{str(err)[:80]}): treated as a miss (said once; later bad entries are misses too)",
                      file=sys.stderr)
            return None
        return value

    def put(self, key: str, value: dict) -> None:
        with self._lock, self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO samples (key, value) VALUES (?, ?)",
                (key, json.dumps(value, ensure_ascii=False)),
            )

    def close(self) -> None:
        with self._lock:
            self._db.close()
