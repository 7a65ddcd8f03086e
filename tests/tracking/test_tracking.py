"""Tracking off is a no-op tracker with the same calls as the MLflow one (stages have no branches)."""

from __future__ import annotations

import mlflow

from rubricrl import tracking
from rubricrl.config import TrackingParams


def log_everything(run, tmp_path):
    (tmp_path / "a.txt").write_text("a")
    run.log_metrics({"x": 1.0, "undefined": None})
    run.log_dict({"k": 1}, "d.json")
    run.log_artifact(tmp_path / "a.txt", "files")
    run.set_tag("t", "v")
    run.set_tags({"u": "w"})
    run.log_outputs([tmp_path / "a.txt"])


def test_tracking_off_is_a_no_op_with_the_same_calls(tmp_path):
    cfg = TrackingParams(uri=f"sqlite:///{tmp_path}/off.db", enabled=False)
    with tracking.stage_run(cfg, "data", {"data": {"seed": 0}}) as run:
        log_everything(run, tmp_path)
    assert not (tmp_path / "off.db").exists()


def test_tracking_on_logs_a_run_with_metrics_tags_and_output_hashes(tmp_path):
    cfg = TrackingParams(uri=f"sqlite:///{tmp_path}/on.db", artifact_root=str(tmp_path / "art"), experiment="t")
    with tracking.stage_run(cfg, "data", {"data": {"seed": 0}}) as run:
        log_everything(run, tmp_path)
    [r] = mlflow.search_runs(experiment_names=["t"], output_format="list")
    assert r.data.metrics == {"x": 1.0} and r.data.params == {"data.seed": "0"}
    assert r.data.tags["t"] == "v" and r.data.tags["u"] == "w" and r.data.tags["rubricrl.stage"] == "data"
    assert any(k.startswith("dvc.md5.") and k.endswith("a.txt") for k in r.data.tags)
