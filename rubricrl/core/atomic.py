"""Write outputs atomically: a crash or a bad input never leaves a partial file or a mixed set behind.

- `atomic_open` writes a temp file beside the target (named with the writer's pid) and renames it
  over the target only when the block succeeds. Temp files left by a killed writer are removed by
  the next write into that folder. Files get the mode the umask allows, like any `open()`.
- `output_set` writes several files that belong together (a stage's outputs): they are staged in a
  hidden folder and moved into place together, under a lock on the target folder, so two runs
  into one folder never interleave and a reader never sees files from two runs. A crash before the
  commit leaves the old set; a crash during the commit is finished by the next run (a journal).
- JSON is written strictly: NaN and Infinity are not JSON, so a non-finite number (an undefined
  statistic: Spearman of a constant, a CI of one task) is written as null.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
import shutil
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator, TextIO

from filelock import FileLock

LOCK_DIR = Path(tempfile.gettempdir()) / "rubricrl-locks"  # out of the outputs: a folder holds only what a run wrote
STAGING_PREFIX = ".staging-"
COMMIT_MARKER = "COMMITTED"


def _umask() -> int:
    try:  # Linux: read it without changing it (os.umask would race with other threads)
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale_temps(folder: Path, name: str) -> None:
    """Remove `.name.<pid>.*.tmp` files whose writer has died (a kill or a power cut mid-write)."""
    for tmp in folder.glob(f".{name}.*.tmp"):
        pid = tmp.name[len(name) + 2:].split(".", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            tmp.unlink(missing_ok=True)


@contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w") -> Iterator[TextIO]:
    """Open a temp file beside `path`; rename it over `path` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    clean_stale_temps(path.parent, path.name)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600 whatever the umask
        with os.fdopen(fd, mode, encoding=None if "b" in mode else "utf-8") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def finite(obj):
    """`obj` with every NaN or infinite float replaced by None (JSON has no such numbers)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def dumps(obj, **kw) -> str:
    """Strict JSON text: never NaN or Infinity (those become null)."""
    try:
        return json.dumps(obj, ensure_ascii=False, allow_nan=False, **kw)
    except ValueError:  # a non-finite float somewhere: the rare slow path
        return json.dumps(finite(obj), ensure_ascii=False, allow_nan=False, **kw)


def write_jsonl(path: str | os.PathLike, rows: Iterable[dict]) -> int:
    n = 0
    with atomic_open(path) as f:
        for row in rows:
            f.write(dumps(row) + "\n")
            n += 1
    return n


def write_json(path: str | os.PathLike, obj) -> None:
    with atomic_open(path) as f:
        f.write(dumps(obj, indent=2) + "\n")


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_open(path) as f:
        f.write(text)


def write_csv(path: str | os.PathLike, rows: Iterable[dict], columns: dict[str, str]) -> None:
    """CSV with one column per `columns` item (header -> row key); empty where a row lacks the value."""
    with atomic_open(path) as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(columns)
        for row in rows:
            writer.writerow(["" if finite(row.get(key)) is None else row[key] for key in columns.values()])


def _finish(staging: Path, folder: Path) -> None:
    """Move every staged file into `folder` (the commit); safe to repeat after a crash part-way."""
    for item in sorted(staging.rglob("*")):
        if item.is_file() and item.name != COMMIT_MARKER:
            target = folder / item.relative_to(staging)
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_dir():
                shutil.rmtree(target)
            os.replace(item, target)
    shutil.rmtree(staging, ignore_errors=True)


def recover(folder: Path) -> None:
    """With the folder's lock held: finish a set whose commit was cut short, drop uncommitted ones."""
    for staging in sorted(folder.glob(f"{STAGING_PREFIX}*")):
        if (staging / COMMIT_MARKER).exists():
            _finish(staging, folder)
        else:
            shutil.rmtree(staging, ignore_errors=True)


def lock_path(folder: Path) -> Path:
    """The lock of an output folder: one per absolute path, shared by every process on this machine."""
    LOCK_DIR.mkdir(parents=True, exist_ok=True)
    return LOCK_DIR / (hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:24] + ".lock")


@contextmanager
def output_set(folder: str | os.PathLike, wait_message: str | None = None) -> Iterator[Path]:
    """Yield a staging folder; what is written there replaces its namesakes in `folder` together.

    The lock on `folder` is held from start to commit, so a second run into the same folder waits
    (printing `wait_message` once) instead of mixing its files with the first one's.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    lock = FileLock(lock_path(folder))
    try:
        lock.acquire(timeout=0)
    except TimeoutError:
        if wait_message:
            print(wait_message, flush=True)
        lock.acquire()
    try:
        recover(folder)
        staging = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{os.getpid()}-", dir=folder))
        try:
            yield staging
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        for item in staging.rglob("*"):  # everything durable before the commit marker
            if item.is_file():
                with open(item, "rb") as f:
                    os.fsync(f.fileno())
        (staging / COMMIT_MARKER).write_text(str(time.time()))
        _finish(staging, folder)
    finally:
        lock.release()
