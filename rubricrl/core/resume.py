"""What a long stage keeps so that a rerun after a kill -9 goes on where it stopped.

- `ResumeDir`: `.cache/resume/<stage>`, inside the checkout but outside the stage's DVC outputs (`dvc repro`
  deletes a stage's outputs before it runs the stage again). Its stamp.json holds a digest of everything that
  made the state (settings, task ids, the models' weight hashes); a folder stamped otherwise is deleted, so the
  state of another configuration is never resumed. The stage clears it once its outputs are written.
- `Journal`: an append-only JSONL of finished items keyed by "id". Each append is one write of whole lines,
  flushed and fsynced; a kill mid-append leaves a torn last line, which the next open drops (and cuts from the
  file). `Journal.map` produces items in fixed chunks of `every`: a chunk whose items are all in the journal is
  read back, any other is produced whole, so a rerun makes exactly the calls that an uninterrupted run makes for
  the chunks it has left: batched generation sees the same batches, and its answers are the same bits.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Callable, Sequence

from rubricrl.core import crashpoint
from rubricrl.core.atomic import dumps, write_json

ROOT = Path(".cache/resume")


def digest(*parts) -> str:
    """A stable digest of JSON-able parts (settings, ids, weight hashes)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()


class Journal:
    """Finished items of one kind (one model's answers, one suite's replies), keyed by their "id"."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.rows: dict[str, dict] = {}
        self.torn = 0  # a torn last line dropped on open (a kill mid-append)
        self.read_back = 0  # items map() took from the journal instead of producing them
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        end = data.rfind(b"\n") + 1  # every complete line ends with a newline: the rest is a torn append
        for line in data[:end].splitlines():
            row = json.loads(line)
            self.rows[row["id"]] = row
        if end < len(data):
            self.torn = 1
            with open(self.path, "r+b") as f:
                f.truncate(end)
                os.fsync(f.fileno())

    def add(self, rows: Sequence[dict]) -> None:
        """Append rows durably, in one write (the crash point tears it in the middle)."""
        data = "".join(dumps(r) + "\n" for r in rows).encode()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "ab") as f:
            f.write(data[:len(data) // 2])
            f.flush()
            crashpoint.point("journal")
            f.write(data[len(data) // 2:])
            f.flush()
            os.fsync(f.fileno())
        self.rows.update((r["id"], r) for r in rows)

    def map(self, ids: Sequence[str], produce: Callable[[list[int]], list[dict]], every: int) -> list[dict]:
        """Rows for `ids`, in their order: chunk k is ids[k*every:(k+1)*every]; produce(indices) returns the rows
        (each with its "id") of a chunk not wholly in the journal, and they are appended before the next chunk."""
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        for start in range(0, len(ids), every):
            chunk = list(range(start, min(start + every, len(ids))))
            if all(ids[i] in self.rows for i in chunk):
                self.read_back += len(chunk)
                continue
            rows = produce(chunk)
            if [r["id"] for r in rows] != [ids[i] for i in chunk]:
                raise ValueError(f"{self.path}: produce() returned rows for other ids than the chunk's")
            self.add(rows)
        return [self.rows[i] for i in ids]


class ResumeDir:
    """A stage's resume folder (module doc); `resumed` tells whether state of the same stamp was found."""

    def __init__(self, stage: str, *stamp_parts, root: str | Path = ROOT):
        self.path = Path(root) / stage
        stamp = digest(*stamp_parts)
        stamp_file = self.path / "stamp.json"
        try:
            self.resumed = json.loads(stamp_file.read_text(encoding="utf-8")).get("stamp") == stamp
        except (OSError, ValueError):
            self.resumed = False
        if not self.resumed:
            shutil.rmtree(self.path, ignore_errors=True)
            self.path.mkdir(parents=True)
            write_json(stamp_file, {"stamp": stamp})

    def journal(self, name: str) -> Journal:
        return Journal(self.path / f"{name}.jsonl")

    def folder(self, name: str) -> Path:
        """A sub-folder for state that is not a journal (checkpoints, a built model)."""
        return self.path / name

    def clear(self) -> None:
        """The stage's outputs are written: its resume state is no longer needed."""
        shutil.rmtree(self.path, ignore_errors=True)
