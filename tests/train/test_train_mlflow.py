"""Per-step GRPO metrics, sampled-completion tables and rollbacks reach the active MLflow run."""

from __future__ import annotations

import mlflow
import pytest
from mlflow.tracking import MlflowClient

from rubricrl.inference.models import build_tiny_model
from rubricrl.config import RollbackSettings
from rubricrl.train.grpo import train_grpo
from tests.train_helpers import FakeKL, rubric_reward, tiny_settings, tiny_tasks


@pytest.fixture
def mlflow_store(tmp_path):
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp = mlflow.create_experiment("train-test", artifact_location=(tmp_path / "artifacts").as_uri())
    mlflow.set_experiment(experiment_id=exp)  # load_table searches the active experiment
    yield exp
    mlflow.set_tracking_uri(previous)


@pytest.mark.slow
def test_metrics_tables_and_rollbacks_reach_mlflow(tmp_path, mlflow_store):
    model = build_tiny_model(tmp_path / "tiny")
    with mlflow.start_run(experiment_id=mlflow_store) as run:
        # Collapse test off: one prompt a step, the tiny random model's reward swung from a median of 3.4 to -0.6
        # (measured), a "collapse" that repeats after every restore (same prompt, same RNG) until max_rollbacks.
        settings = tiny_settings(max_steps=4, table_every=2, rollback=RollbackSettings(reward_drop=None))
        train_grpo(model, tiny_tasks(), tmp_path / "run", settings, rubric_reward(), callbacks=[FakeKL(3, 3, times=1)])
    client = MlflowClient()
    data = client.get_run(run.info.run_id).data
    for key in ["reward", "kl", "beta", "entropy", "learning_rate", "completions/mean_length",
                "rubric/task_reward", "rollback/kl"] + [
            f"rewards/{c}/mean" for c in ("format", "required_fields", "field_types", "faithfulness",
                                          "extra_text", "invented_values")]:
        assert key in data.metrics, key
    kl_steps = sorted({m.step for m in client.get_metric_history(run.info.run_id, "kl")})
    assert kl_steps == [1, 2, 3, 4]  # every step, the redone ones included
    assert {m.value for m in client.get_metric_history(run.info.run_id, "beta")} == {0.02, 0.04}
    assert data.tags["rubricrl.rollbacks"] == "1"

    artifacts = {a.path for a in client.list_artifacts(run.info.run_id, "completions")}
    assert "completions/step_000002.json" in artifacts
    table = mlflow.load_table("completions/step_000002.json", run_ids=[run.info.run_id])
    assert {"task_id", "completion", "total", "format.score", "format.reason", "faithfulness.reason",
            "step"} <= set(table.columns)
    assert len(table) >= 1 and not table["task_id"].str.startswith("general:").any()
    rollbacks = mlflow.artifacts.load_dict(f"{run.info.artifact_uri}/rollbacks.json")["rollbacks"]
    assert [(r["step"], r["restored_step"]) for r in rollbacks] == [(3, 1)]
