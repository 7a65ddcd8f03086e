"""The non-finite guard: an optimizer update whose gradients hold a NaN or an infinity is skipped, never applied.

bf16 autocast gave NaN gradients at GRPO step 12 on an H200 (README, "Precision"); one such update writes NaN into
every weight it touches and the run is lost. `NonFiniteGuard` is a TrainerCallback: transformers calls
`on_pre_optimizer_step` after the gradients are reduced across processes and clipped (a non-finite loss gives
non-finite gradients, and clipping does not make them finite), just before `optimizer.step()`. On a bad update it
sets every gradient to None, so the optimizer leaves each weight and its moments as they were, prints one line to
stderr and tags the active MLflow run (`rubricrl.nonfinite.<stage>` = the skipped steps). DDP averages the
gradients before the hook, so every process sees the same values and skips the same update.

What happens next is the caller's: after `max_skipped` bad updates in a row the guard calls `on_limit(step)` (GRPO:
trip the rollback monitor, which restores the last good checkpoint) or, without one, stops training with
`TrainingError` (SFT and distillation have no checkpoint to go back to).

Under DeepSpeed the gradients live in the engine's partitions (every `param.grad` is None here), so the guard
reads the gradient norm the trainer logs for the step instead: the update has happened by then, so a non-finite
norm goes straight to `on_limit` (or the error) without waiting for a second one.
"""

from __future__ import annotations

import math
import sys
from typing import Callable

from transformers import TrainerCallback

from rubricrl.core.errors import TrainingError
from rubricrl.train.mlflow_log import active_mlflow

TAG = "rubricrl.nonfinite"


def gradients_finite(model) -> bool | None:
    """True when every gradient is finite, False when one is not, None when the model holds no gradient here."""
    import torch

    grads = [p.grad for p in model.parameters() if p.grad is not None]
    if not grads:
        return None
    # One reduction per dtype and device instead of a host sync per tensor.
    flags = [torch.isfinite(g).all() for g in grads]
    return bool(torch.stack([f.to(flags[0].device) for f in flags]).all())


class NonFiniteGuard(TrainerCallback):
    def __init__(self, stage: str, max_skipped: int, on_limit: Callable[[int, str], None] | None = None):
        """`stage` names the run in the log line and the tag; `max_skipped`: bad updates in a row allowed (0: the
        first one is the limit); `on_limit(step, reason)` is called at the limit instead of raising."""
        self.stage, self.max_skipped, self.on_limit = stage, max_skipped, on_limit
        self.skipped: list[int] = []  # every skipped step (the step the update would have completed)
        self.in_a_row = 0
        self._skipped_now = False
        self._pending: tuple[int, str] | None = None  # the limit was reached at this step (handled at step end)

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        self._skipped_now = False
        finite = gradients_finite(model) if model is not None else None
        if finite is None or finite:
            self.in_a_row = 0
            return
        step = state.global_step + 1
        for p in model.parameters():
            p.grad = None
        self._skipped_now = True
        self.skipped.append(step)
        self.in_a_row += 1
        reason = f"non-finite gradient at step {step}"
        print(f"{self.stage}: {reason}: update skipped ({self.in_a_row} in a row, "
              f"{len(self.skipped)} in this run)", file=sys.stderr)
        self._tag()
        if self.in_a_row > self.max_skipped:
            self._pending = (step, f"{reason}: {self.in_a_row} non-finite updates in a row (limit {self.max_skipped})")
            self.in_a_row = 0
            if self.on_limit is None:
                self._limit(*self._pending, control)

    def on_step_end(self, args, state, control, **kwargs):
        """After the trainer's own flow callback decided to save: a step at the limit is never saved."""
        if self._pending is not None:
            pending, self._pending = self._pending, None
            self._limit(*pending, control)

    def on_log(self, args, state, control, logs=None, **kwargs):
        """DeepSpeed (no gradients visible to the hook): a non-finite logged gradient norm or loss of an update
        that was not skipped here."""
        if not logs or self._skipped_now:
            return
        bad = [k for k in ("grad_norm", "loss") if isinstance(logs.get(k), float) and not math.isfinite(logs[k])]
        if bad and args.deepspeed:
            step = state.global_step
            self.skipped.append(step)
            self._tag()
            self._limit(step, f"non-finite {' and '.join(bad)} at step {step} (DeepSpeed: the update was applied)",
                        control)

    def _tag(self) -> None:
        if (mlflow := active_mlflow()) is not None:
            mlflow.set_tag(f"{TAG}.{self.stage}", ",".join(map(str, self.skipped[-50:])))

    def _limit(self, step: int, reason: str, control) -> None:
        if self.on_limit is None:
            raise TrainingError(f"{self.stage}: {reason}. Train in fp32 ({self.stage}.precision: fp32) or lower "
                                "the learning rate.")
        control.should_training_stop = True
        control.should_save = False
        self.on_limit(step, reason)
