"""Crash-safe checkpoints and model folders.

transformers writes `checkpoint-N` folders in place, so a kill mid-save leaves a half-written one.
After a save has finished on every process we fsync its files and drop a marker into it; only
marked checkpoints are ever resumed from, and unmarked ones are deleted before a run starts.
Finished models are written to a temp folder and renamed into place.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from transformers import TrainerCallback

from rubricrl.core import crashpoint
from rubricrl.core.atomic import write_json

MARKER = "rubricrl_complete.json"
PREFIX = "checkpoint-"


@dataclass(frozen=True)
class Checkpoint:
    step: int
    path: Path


def list_checkpoints(run_dir: str | Path, complete_only: bool = True) -> list[Checkpoint]:
    """Checkpoints in `run_dir`, oldest first."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return []
    found = []
    for p in run_dir.iterdir():
        suffix = p.name.removeprefix(PREFIX)
        if p.is_dir() and p.name.startswith(PREFIX) and suffix.isdigit():
            if not complete_only or (p / MARKER).is_file():
                found.append(Checkpoint(int(suffix), p))
    return sorted(found, key=lambda c: c.step)


def latest_complete(run_dir: str | Path) -> Checkpoint | None:
    done = list_checkpoints(run_dir)
    return done[-1] if done else None


def newest_at_or_before(run_dir: str | Path, step: int) -> Checkpoint | None:
    done = [c for c in list_checkpoints(run_dir) if c.step <= step]
    return done[-1] if done else None


def _fsync_tree(path: Path) -> None:
    for f in path.rglob("*"):
        if f.is_file():
            fd = os.open(f, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def mark_complete(path: Path, step: int, max_steps: int | None = None, extra: dict | None = None) -> None:
    """`extra`: what the run keeps beside the trainer's own state (the non-finite guard's skipped steps)."""
    _fsync_tree(path)  # the marker must never reach the disk before the data it vouches for
    write_json(path / MARKER, {"step": step, "max_steps": max_steps, "saved_at": time.time(), **(extra or {})})
    crashpoint.point("checkpoint")


def marker(ckpt: Checkpoint) -> dict:
    return json.loads((ckpt.path / MARKER).read_text(encoding="utf-8"))


def is_final(ckpt: Checkpoint) -> bool:
    """Whether the checkpoint was saved at the run's last step (training is over: resuming from it would run one
    more step in transformers, so the model is published from it instead)."""
    m = marker(ckpt)
    return m.get("max_steps") is not None and m["step"] >= m["max_steps"]


def remove_incomplete(run_dir: str | Path) -> list[Path]:
    """Delete checkpoint folders without a marker (a save cut off by a crash)."""
    complete = {c.path for c in list_checkpoints(run_dir)}
    gone = [c.path for c in list_checkpoints(run_dir, complete_only=False) if c.path not in complete]
    for p in gone:
        shutil.rmtree(p)
    return gone


def remove_after(run_dir: str | Path, step: int) -> list[Path]:
    """Delete every checkpoint newer than `step` (the ones a rollback discards)."""
    gone = [c.path for c in list_checkpoints(run_dir, complete_only=False) if c.step > step]
    for p in gone:
        shutil.rmtree(p)
    return gone


def prune(run_dir: str | Path, keep: int | None, protect: int | Iterable[int] | None) -> list[Path]:
    """Keep the `keep` newest complete checkpoints plus those at the step(s) `protect`; delete the rest."""
    if keep is None:
        return []
    protected = {protect} if isinstance(protect, int) else set(protect or ())
    done = list_checkpoints(run_dir)
    gone = [c.path for c in done[:-keep] if c.step not in protected]
    for p in gone:
        shutil.rmtree(p)
    return gone


def publish_dir(tmp: Path, final: Path) -> None:
    """Move a finished folder to `final` by renames: `final` is never a partial folder (a crash between the
    two renames leaves the previous one at .<name>.old-<pid> and no `final`)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    _fsync_tree(tmp)
    crashpoint.point("publish")
    old = final.with_name(f".{final.name}.old-{os.getpid()}")
    if final.exists():
        os.replace(final, old)
    os.replace(tmp, final)
    shutil.rmtree(old, ignore_errors=True)


def temp_dir_for(final: Path) -> Path:
    """A fresh sibling folder on the same filesystem (so the final rename is atomic)."""
    for stale in final.parent.glob(f".{final.name}.old-*"):  # left by a crash inside publish_dir
        shutil.rmtree(stale, ignore_errors=True)
    tmp = final.with_name(f".{final.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    return tmp


def _trainer_only(name: str) -> bool:
    """Files of a checkpoint that resume training but are not part of the model."""
    return (name in {"optimizer.pt", "scheduler.pt", "scaler.pt", "trainer_state.json", "training_args.bin", MARKER,
                     "latest", "zero_to_fp32.py"}
            or name.startswith(("rng_state", "global_step")))


def publish_checkpoint_model(ckpt: Path, final: Path, base_model_dir: Path) -> None:
    """Publish the model inside a checkpoint as a plain HF folder (a LoRA adapter is merged into its base)."""
    tmp = temp_dir_for(final)
    if (ckpt / "adapter_config.json").is_file():
        from peft import PeftModel
        from transformers import AutoModelForCausalLM, AutoTokenizer

        base = AutoModelForCausalLM.from_pretrained(base_model_dir)
        PeftModel.from_pretrained(base, ckpt).merge_and_unload().save_pretrained(tmp)
        AutoTokenizer.from_pretrained(base_model_dir).save_pretrained(tmp)
    else:
        shutil.copytree(ckpt, tmp, ignore=lambda _, names: [n for n in names if _trainer_only(n)])
    publish_dir(tmp, final)


class CheckpointCallback(TrainerCallback):
    """Marks each finished checkpoint complete, then prunes old ones except the last good one.

    `protected_step()` names the checkpoint(s) a rollback could restore right now (None: none yet).
    """

    def __init__(self, keep: int | None, protected_step: Callable[[], int | Iterable[int] | None],
                 extra: Callable[[], dict] | None = None):
        self.keep = keep
        self.protected_step = protected_step
        self.extra = extra  # written into each checkpoint's marker (mark_complete)

    def on_save(self, args, state, control, **kwargs):
        args.distributed_state.wait_for_everyone()  # every rank has written its part (RNG state, shards)
        if state.is_world_process_zero:
            crashpoint.point("save")  # written, not yet marked: a rerun discards it (the worst moment to be killed)
            mark_complete(Path(args.output_dir) / f"{PREFIX}{state.global_step}", state.global_step, state.max_steps,
                          self.extra() if self.extra else None)
            prune(args.output_dir, self.keep, self.protected_step())
        args.distributed_state.wait_for_everyone()  # nobody resumes or lists before the marker exists
