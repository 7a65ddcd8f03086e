"""Per-step training metrics to the active MLflow run (if any), from the main process only.

TRL's logs already hold the total reward (`reward`), each criterion (`rewards/<id>/mean`), `kl`,
`entropy`, `completions/mean_length` and `learning_rate`; we forward them all and add `beta`.
Every `table_every` steps a table of sampled completions with per-criterion scores and reasons is
logged as `completions/step_<N>.json`. We use this instead of report_to="mlflow" because
transformers' integration opens its own run when none is active and cannot add beta or the table.
"""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING

from transformers import TrainerCallback

if TYPE_CHECKING:  # an annotation only: SFT logs through this callback without the reward code
    from rubricrl.train.reward_mix import TrainingReward


def active_mlflow():
    """The mlflow module when a run is active, else None. Without an import of mlflow no run can be active: with
    tracking off (the GPU image has no MLflow) nothing imports it, and neither does this."""
    mlflow = sys.modules.get("mlflow")
    return mlflow if mlflow is not None and mlflow.active_run() is not None else None


def numeric_metrics(logs: dict) -> dict[str, float]:
    return {k: float(v) for k, v in logs.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}


class MLflowMetricsCallback(TrainerCallback):
    def __init__(self, reward: TrainingReward | None = None, table_every: int = 0, table_rows: int = 8):
        self.reward = reward
        self.table_every = table_every
        self.table_rows = table_rows
        self.beta: float | None = None  # set by the driver; changes on rollback

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        mlflow = active_mlflow()
        if mlflow is None:
            return
        metrics = numeric_metrics(logs)
        if self.beta is not None and "kl" in logs:
            metrics["beta"] = self.beta
        if metrics:
            mlflow.log_metrics(metrics, step=state.global_step)
        step = state.global_step
        if self.reward is not None and self.table_every and step % self.table_every == 0 and "reward" in logs:
            rows = self.reward.sample_rows(self.table_rows)
            if rows:
                columns = {key: [r.get(key) for r in rows] for key in rows[0]}
                columns["step"] = [step] * len(rows)
                mlflow.log_table(data=columns, artifact_file=f"completions/step_{step:06d}.json")
