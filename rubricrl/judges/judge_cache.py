"""On-disk cache of judge samples: re-scoring the same responses costs no judge calls."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path


def cache_key(model: str, messages: list[dict], sample: int, temperature: float) -> str:
    # Everything that decides the sample; the prompt carries the criterion, task and response.
    blob = json.dumps([model, messages, sample, temperature], ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class JudgeCache:
    """A sqlite3 key -> JSON value table in `cache_dir`, shared by threads (and processes)."""

    def __init__(self, cache_dir: str | Path):
        path = Path(cache_dir)
        path.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path / "judge.sqlite3", check_same_thread=False, timeout=30)
        with self._lock, self._db:
            self._db.execute("PRAGMA journal_mode=WAL")  # readers do not block the writer
            self._db.execute("CREATE TABLE IF NOT EXISTS samples (key TEXT PRIMARY KEY, value TEXT NOT NULL)")

    def get(self, key: str) -> dict | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM samples WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, value: dict) -> None:
        with self._lock, self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO samples (key, value) VALUES (?, ?)",
                (key, json.dumps(value, ensure_ascii=False)),
            )

    def close(self) -> None:
        with self._lock:
            self._db.close()
