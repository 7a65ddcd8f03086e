"""SFT baseline: TRL's SFTTrainer on (task prompt, gold JSON answer) pairs, loss on the answer only."""

from __future__ import annotations

import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from transformers import TrainerCallback, TrainerState

from rubricrl.core.taskfile import Task
from rubricrl.train import trl_patches
from rubricrl.train.checkpoints import (CheckpointCallback, is_final, latest_complete, marker,
                                       publish_checkpoint_model, publish_dir, remove_incomplete, temp_dir_for)
from rubricrl.train.data import sft_rows
from rubricrl.train.mlflow_log import MLflowMetricsCallback
from rubricrl.train.nonfinite import NonFiniteGuard
from rubricrl.core.errors import TrainingError
from rubricrl.config import SFTSettings
from rubricrl.train.trainer_args import peft_config, sft_config


@dataclass(frozen=True)
class SFTRun:
    model_dir: Path
    examples: int  # rows trained on (tasks with a reference that fits max_length)
    skipped: int
    steps: int
    first_loss: float | None
    last_loss: float | None
    train_seconds: float
    skipped_updates: tuple[int, ...] = ()  # steps whose non-finite update was skipped
    precision: str = "fp32"  # as trained


def process_state(settings: SFTSettings):
    """This process's accelerate PartialState, set up as train_sft's trainer will set it up (the trainer then reuses
    the process group), so the stage can tell the main process before training."""
    return sft_config(settings, Path(".")).distributed_state


def train_sft(model_dir: str | Path, train_tasks: list[Task], out_dir: str | Path, settings: SFTSettings,
              callbacks: Sequence[TrainerCallback] = (), checkpoints: str | Path | None = None) -> SFTRun:
    """Fine-tune `model_dir` on the tasks' reference answers; `out_dir` becomes a normal HF model folder.

    The folder appears only when training has finished (written beside it, then renamed), so a
    crash never leaves a half-written model. Per-step loss goes to the active MLflow run, if any. A non-finite
    update is skipped (rubricrl.train.nonfinite); `callbacks` run after that guard.

    `checkpoints`: a folder for a checkpoint every settings.save_steps steps (model, optimizer, scheduler, RNG and
    the data position; only the newest complete one is kept). Training resumes from the newest complete one there,
    so a rerun after a kill gives the uninterrupted run's weights (tests/train/test_sft_resume.py); its caller
    makes sure the folder holds checkpoints of these settings and data only (rubricrl.core.resume).
    """
    started = time.monotonic()
    from rubricrl.train.data import rows_dataset
    from transformers import AutoTokenizer
    from trl import SFTTrainer

    out, model_dir = Path(out_dir), Path(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    rows, skipped = sft_rows(train_tasks, tokenizer, settings.max_length)
    if not rows:
        raise TrainingError(f"sft: none of the {len(train_tasks)} tasks has a reference answer that fits "
                            f"max_length ({settings.max_length} tokens)")
    # trainer scratch (logs, runs; removed afterwards), or the checkpoints' folder
    work = Path(checkpoints) if checkpoints is not None else out.with_name(f".{out.name}.work")
    args = sft_config(settings, work, save=checkpoints is not None)
    main = args.process_index == 0
    start = None
    if checkpoints is not None:
        if main:
            remove_incomplete(work)  # a save cut off by a kill
        args.distributed_state.wait_for_everyone()
        start = latest_complete(work)
    trl_patches.apply()  # score only the answer in the LM head on CPU too
    guard = NonFiniteGuard("sft", settings.max_skipped_updates)  # skips a non-finite update; too many: TrainingError
    saves = [CheckpointCallback(keep=1, protected_step=lambda: None, extra=lambda: {"skipped": guard.skipped})
             ] if checkpoints is not None else []
    if start is not None:  # the steps skipped before the kill, as the uninterrupted run lists them
        guard.skipped = list(marker(start).get("skipped", []))
        if main:
            print(f"sft: resuming from {start.path} (step {start.step}, saved before an interruption)",
                  file=sys.stderr)
    trainer = SFTTrainer(model=str(model_dir), args=args, train_dataset=rows_dataset(rows),
                         processing_class=tokenizer, peft_config=peft_config(settings.lora),
                         callbacks=[guard, *callbacks, MLflowMetricsCallback(), *saves])
    if start is not None and is_final(start):  # trained to the end, killed before the model was published
        if main:
            publish_checkpoint_model(start.path, out, model_dir)
        args.distributed_state.wait_for_everyone()
        return _result(out, rows, skipped, TrainerState.load_from_json(str(start.path / "trainer_state.json")),
                       started, guard, args)
    trainer.train(resume_from_checkpoint=str(start.path) if start else None)
    tmp = temp_dir_for(out) if main else out.with_name(f".{out.name}.tmp")
    args.distributed_state.wait_for_everyone()
    if settings.lora is not None:
        if main:  # a plain HF folder, loadable without peft
            trainer.model.merge_and_unload().save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
    else:
        trainer.save_model(str(tmp))  # on every rank (ZeRO-3 gathers); only the main process writes
    if main:
        publish_dir(tmp, out)
        if checkpoints is None:
            shutil.rmtree(work, ignore_errors=True)
    args.distributed_state.wait_for_everyone()
    return _result(out, rows, skipped, trainer.state, started, guard, args)


def _result(out: Path, rows: list, skipped: list, state, started: float, guard: NonFiniteGuard, args) -> SFTRun:
    losses = [e["loss"] for e in state.log_history if "loss" in e]
    return SFTRun(out, len(rows), len(skipped), state.global_step, losses[0] if losses else None,
                  losses[-1] if losses else None, round(time.monotonic() - started, 1), tuple(guard.skipped),
                  "bf16" if args.bf16 else "fp32")
