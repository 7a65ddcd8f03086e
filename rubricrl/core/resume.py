"""What a long stage keeps so that a rerun after a kill -9 goes on where it stopped.

- `ResumeDir`: `.cache/resume/<stage>`, inside the checkout but outside the stage's DVC outputs (`dvc repro`
  deletes a stage's outputs before it runs the stage again). Its stamp.json holds a digest of everything that
  made the state, by content: the settings as this host runs them (precision auto resolved), the tasks' full
  JSON (tasks_digest), settings files by their bytes (file_digest, accelerate_digest), the models' weights,
  tokenizers and chat templates (model_digest). A folder stamped otherwise is deleted, so the
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
    """A stable digest of JSON-able parts (settings, content digests)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()


def tasks_digest(tasks: Sequence) -> str:
    """The tasks by content, in their order: each one's full JSON (Task.to_dict), so a task whose text, schema or
    reference changed under the same id changes the stamp (its journaled answer was to another prompt)."""
    return digest([t.to_dict() for t in tasks])


_DIGESTS: dict[tuple, str] = {}  # (path, inode, size, mtime) -> sha256, for this process
CACHED_FROM = 64 << 20  # bytes: smaller files are hashed each time (cheap, and a rewrite may keep size and mtime)


def file_digest(path: str | Path | None) -> str | None:
    """sha256 of a file's bytes: a settings file stamped by what it says, not by its name. None: no file named, or
    none there (the stage that reads it fails on its own with a clearer message). Hashed once per file version in
    a process when large (a stage stamps a model and then looks for its twins: a 7B model's weights are 15 GB)."""
    if not path or not Path(path).is_file():
        return None
    st = os.stat(path)
    key = (str(Path(path).resolve()), st.st_ino, st.st_size, st.st_mtime_ns)
    if key in _DIGESTS:
        return _DIGESTS[key]
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    if st.st_size >= CACHED_FROM:  # no file this large is rewritten at its size within a clock tick
        _DIGESTS[key] = h.hexdigest()
    return h.hexdigest()


# What a model folder's answers depend on besides its weights: the tokenizer (and its special tokens), the chat
# template (a file of its own, or the field of tokenizer_config.json), generation defaults and the architecture.
MODEL_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
               "special_tokens_map.json", "added_tokens.json", "chat_template.jinja", "chat_template.json",
               "vocab.json", "merges.txt", "tokenizer.model")


def model_digest(model_dir: str | Path) -> str:
    """A model folder by content, for a stamp: each weight file (*.safetensors, shards too), each of MODEL_FILES
    and each extra chat template (additional_chat_templates/) by name and sha256, so a changed tokenizer or
    chat template starts the stage over as changed weights do. The registry's identity of a model (its
    model.md5 tag) is rubricrl.tracking.weights_digest, the weights only."""
    root = Path(model_dir)
    files = [*root.glob("*.safetensors"), *(root / n for n in MODEL_FILES),
             *root.glob("additional_chat_templates/*")]
    return digest({f.relative_to(root).as_posix(): file_digest(f) for f in files if f.is_file()})


def twins(models: dict[str, str | Path]) -> dict[str, str]:
    """Each model -> the first model (in order) with the same content (model_digest): itself unless an earlier one
    is the same model. A GRPO run the hack monitor stopped on its initial weights (grpo.monitor.after_trip: stop) is
    its SFT model, and greedy answers of the same model under the same settings are the same answers: a stage
    reads the earlier one's journal back instead of generating them again."""
    seen: dict[str, str] = {}
    out = {}
    for name, path in models.items():
        key = model_digest(path) if Path(path).is_dir() else f"missing:{name}"
        out[name] = seen.setdefault(key, name)
    return out


def accelerate_digest(config: str | Path | None) -> dict | None:
    """An accelerate config by content, with the DeepSpeed config file it names (deepspeed_config.
    deepspeed_config_file, read by accelerate from the working folder). None: no relaunch under accelerate."""
    if not config:
        return None
    import yaml

    try:
        loaded = yaml.safe_load(Path(config).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        loaded = None
    named = loaded.get("deepspeed_config") if isinstance(loaded, dict) else None
    deepspeed = named.get("deepspeed_config_file") if isinstance(named, dict) else None
    return {"accelerate": file_digest(config), "deepspeed": file_digest(deepspeed)}


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
