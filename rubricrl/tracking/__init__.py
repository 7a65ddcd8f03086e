"""MLflow tracking: one run per pipeline run, a nested run per stage, lineage tags on each.

The Prefect flow opens the pipeline run and passes its id to the stages through the environment
(RUBRICRL_PARENT_RUN_ID), so a stage run by plain `dvc repro` becomes a top-level run instead.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from rubricrl.config import OVERLAY_ENV, TrackingParams, env_overlays

PARENT_ENV = "RUBRICRL_PARENT_RUN_ID"
ATTEMPT_ENV = "RUBRICRL_ATTEMPT"  # the flow's retrain attempt after a failed general gate (0: the first run)


def setup(cfg: TrackingParams) -> str:
    """Point MLflow at the project's store; create the experiment with its artifact root. Returns its id."""
    import mlflow

    if cfg.uri.startswith("sqlite:///"):
        Path(cfg.uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    mlflow.set_tracking_uri(cfg.uri)
    exp = mlflow.get_experiment_by_name(cfg.experiment)
    if exp is not None:
        return exp.experiment_id
    root = Path(cfg.artifact_root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    return mlflow.create_experiment(cfg.experiment, artifact_location=root.as_uri())


def git_commit() -> str:
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return sha + ("-dirty" if dirty else "")


def file_md5(path: Path) -> str:
    """The hash DVC 3 records for a file (md5 of its bytes)."""
    h = hashlib.md5()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def weights_md5(model_dir: str | Path) -> dict[str, str]:
    """md5 per weight file of an HF folder (a big model is saved in shards, model-0000N-of-0000M.safetensors)."""
    return {p.name: file_md5(p) for p in sorted(Path(model_dir).glob("*.safetensors"))}


def weights_digest(model_dir: str | Path) -> str:
    """One md5 over the weight files (names and their md5s): the same weights, the same digest."""
    h = hashlib.md5()
    for name, md5 in weights_md5(model_dir).items():
        h.update(name.encode())
        h.update(md5.encode())
    return h.hexdigest()


def data_hashes(paths: list[str | Path]) -> dict[str, str]:
    """md5 per file (folders: per file inside), as lineage tags `dvc.md5.<path>`."""
    out = {}
    for p in map(Path, paths):
        files = sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
        for f in files:
            if f.exists():
                out[f"dvc.md5.{f.as_posix()}"] = file_md5(f)
    return out


class Run:
    """The MLflow run of a stage: what a stage logs, in one place."""

    def __init__(self, mlflow):
        self.mlflow = mlflow

    def log_metrics(self, metrics: dict) -> None:
        """None values are left out; characters MLflow refuses in a name ('pass@1') become '_'."""
        self.mlflow.log_metrics({re.sub(r"[^\w\-. :/]", "_", k): v for k, v in metrics.items() if v is not None})

    def log_dict(self, obj: dict, name: str) -> None:
        self.mlflow.log_dict(obj, name)

    def log_table(self, data: dict, name: str) -> None:
        self.mlflow.log_table(data, name)

    def log_artifact(self, path: str | Path, folder: str | None = None) -> None:
        self.mlflow.log_artifact(str(path), folder)

    def log_artifacts(self, path: str | Path, folder: str | None = None) -> None:
        self.mlflow.log_artifacts(str(path), folder)

    def set_tag(self, key: str, value) -> None:
        self.mlflow.set_tag(key, value)

    def set_tags(self, tags: dict) -> None:
        self.mlflow.set_tags(tags)

    def log_outputs(self, outputs: list[str | Path]) -> None:
        """Tag the run with the hashes of what the stage wrote (the same md5 DVC will record)."""
        self.mlflow.set_tags(data_hashes(list(outputs)))


class NoRun(Run):
    """Tracking off (`tracking.enabled: false`): every call does nothing, so stages need no branches."""

    def __init__(self):
        super().__init__(None)

    def __getattribute__(self, name):
        if name in Run.__dict__ and not name.startswith("_"):
            return lambda *args, **kwargs: None
        return super().__getattribute__(name)


@contextmanager
def stage_run(cfg: TrackingParams, stage: str, params: dict, inputs: list = ()) -> Iterator[Run]:
    """A run for one stage (a NoRun when tracking is off), nested under the pipeline run if there is one."""
    if not cfg.enabled:
        yield NoRun()
        return
    import mlflow

    exp_id = setup(cfg)
    active = mlflow.active_run()  # in the flow's own process (the registry step): nest under its pipeline run
    parent = os.environ.get(PARENT_ENV) or (active.info.run_id if active else None)
    tags = {"rubricrl.stage": stage, "git.commit": git_commit(), "rubricrl.attempt": os.environ.get(ATTEMPT_ENV, "0"),
            **data_hashes(list(inputs))}
    if os.environ.get(OVERLAY_ENV):  # the settings did not all come from params.yaml: say which and what
        tags["rubricrl.params_overlay"] = " | ".join(f"{p}: {p.read_text(encoding='utf-8').strip()}"
                                                     for p in env_overlays())[:5000]
    with mlflow.start_run(experiment_id=exp_id, run_name=stage, parent_run_id=parent, nested=bool(parent), tags=tags):
        mlflow.log_params(_flatten(params))
        yield Run(mlflow)


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = "null" if v is None else v
    return out
