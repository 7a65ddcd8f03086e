"""MLflow tracking: one run per pipeline run, a nested run per stage, lineage tags on each.

The Prefect flow opens the pipeline run and passes its id to the stages through the environment
(RUBRICRL_PARENT_RUN_ID), so a stage run by plain `dvc repro` becomes a top-level run instead.
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
import sqlite3
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from rubricrl.core import crashpoint
from rubricrl.config import OVERLAY_ENV, TrackingParams, env_overlays
from rubricrl.core.errors import RubricRLError

PARENT_ENV = "RUBRICRL_PARENT_RUN_ID"
PID_TAG = "rubricrl.pid"  # host:pid of the process that opened the run: a later run ends it if that one is gone
ATTEMPT_ENV = "RUBRICRL_ATTEMPT"  # the flow's retrain attempt after a failed general gate (0: the first run)


class StoreError(RubricRLError):
    """The tracking store is missing or unreadable where one must exist."""


# Where MLflow records absolute locations in its SQL store (MLflow 3): rewritten when the checkout moves.
LOCATIONS = (("experiments", "artifact_location"), ("runs", "artifact_uri"), ("logged_models", "artifact_location"),
             ("model_versions", "source"), ("model_versions", "storage_location"))


def sqlite_path(cfg: TrackingParams) -> Path | None:
    return Path(cfg.uri.removeprefix("sqlite:///")) if cfg.uri.startswith("sqlite:///") else None


def check_store(cfg: TrackingParams) -> None:
    """A store that must already exist (registry commands): missing or unreadable is an error naming it, never a
    new empty store."""
    db = sqlite_path(cfg)
    if db is None:
        return
    if not db.is_file():
        raise StoreError(f"{db}: no tracking store here (tracking.uri {cfg.uri}); run the pipeline first "
                         f"(make run), or run this from the checkout that has it")
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=cfg.lock_wait_s)
        try:
            con.execute("select count(*) from experiments").fetchone()
        finally:
            con.close()
    except sqlite3.Error as err:
        if "locked" in str(err):
            raise StoreError(f"{db}: the tracking store is locked by another process (waited {cfg.lock_wait_s:g} s, "
                             f"tracking.lock_wait_s); try again when "
                             f"it is done") from None
        raise StoreError(f"{db}: unreadable tracking store ({type(err).__name__}: {err})") from None


def relocate(cfg: TrackingParams) -> int:
    """A copied or moved checkout: MLflow stores artifact locations as absolute paths, so the copy would read and
    write the original tree's artifacts. When this project's experiment records its artifact root under another
    folder with the same relative layout (tracking.artifact_root relative to the checkout), every location under
    that folder is rewritten to this one. Returns how many were rewritten (0: nothing to do)."""
    db, rel = sqlite_path(cfg), Path(cfg.artifact_root)
    if db is None or rel.is_absolute() or not db.is_file():
        return 0
    new = rel.resolve().as_uri()
    con = sqlite3.connect(db, timeout=cfg.lock_wait_s)
    try:
        row = con.execute("select artifact_location from experiments where name = ?", (cfg.experiment,)).fetchone()
        old = row[0] if row else None
        suffix = "/" + rel.as_posix().strip("/")
        if not old or old == new or not old.endswith(suffix):
            return 0
        old_base, new_base = old[: -len(suffix)] + "/", new[: -len(suffix)] + "/"
        # the same prefixes as bare paths (MLflow's Default experiment records one)
        pairs = [(old_base, new_base), (old_base.removeprefix("file://"), new_base.removeprefix("file://"))]
        tables = {r[0] for r in con.execute("select name from sqlite_master where type = 'table'")}
        changed = 0
        with con:
            for table, column in LOCATIONS:
                if table not in tables:
                    continue
                for a, b in pairs:
                    changed += con.execute(f"update {table} set {column} = ? || substr({column}, ?) "
                                           f"where substr({column}, 1, ?) = ?", (b, len(a) + 1, len(a), a)).rowcount
    finally:
        con.close()
    print(f"tracking: this checkout was copied or moved from {old_base.removeprefix('file://')}: {changed} artifact "
          f"location(s) in {db} now point under {new_base.removeprefix('file://')}", file=sys.stderr)
    return changed


def setup(cfg: TrackingParams, create: bool = True) -> str:
    """Point MLflow at the project's store; create the experiment with its artifact root. Returns its id.

    create=False (registry commands): the store must exist already (check_store). A store copied or moved with its
    checkout is rebound to it first (relocate)."""
    import mlflow

    if not create:
        check_store(cfg)
    db = sqlite_path(cfg)
    if db is not None:
        db.parent.mkdir(parents=True, exist_ok=True)
        relocate(cfg)
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


def artifact_md5(path: str | Path) -> str:
    """md5 of a file, or of a folder's files (relative names and their md5s): what an export's verification
    recorded and what the registry checks before it publishes the bytes."""
    path = Path(path)
    if path.is_file():
        return file_md5(path)
    h = hashlib.md5()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(f.relative_to(path).as_posix().encode())
        h.update(file_md5(f).encode())
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
        crashpoint.point("tracking")
        self.mlflow.log_metrics({re.sub(r"[^\w\-. :/]", "_", k): v for k, v in metrics.items() if v is not None})

    def log_dict(self, obj: dict, name: str) -> None:
        crashpoint.point("tracking")
        self.mlflow.log_dict(obj, name)

    def log_table(self, data: dict, name: str) -> None:
        crashpoint.point("tracking")
        self.mlflow.log_table(data, name)

    def log_artifact(self, path: str | Path, folder: str | None = None) -> None:
        crashpoint.point("tracking")
        self.mlflow.log_artifact(str(path), folder)

    def log_artifacts(self, path: str | Path, folder: str | None = None) -> None:
        crashpoint.point("tracking")
        self.mlflow.log_artifacts(str(path), folder)

    def set_tag(self, key: str, value) -> None:
        crashpoint.point("tracking")
        self.mlflow.set_tag(key, value)

    def set_tags(self, tags: dict) -> None:
        crashpoint.point("tracking")
        self.mlflow.set_tags(tags)

    def log_outputs(self, outputs: list[str | Path]) -> None:
        """Tag the run with the hashes of what the stage wrote (the same md5 DVC will record)."""
        crashpoint.point("tracking")
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
    end_stale_runs(exp_id, stage)
    active = mlflow.active_run()  # in the flow's own process (the registry step): nest under its pipeline run
    parent = os.environ.get(PARENT_ENV) or (active.info.run_id if active else None)
    tags = {"rubricrl.stage": stage, "git.commit": git_commit(), "rubricrl.attempt": os.environ.get(ATTEMPT_ENV, "0"),
            PID_TAG: process_tag(),
            **data_hashes(list(inputs))}
    if os.environ.get(OVERLAY_ENV):  # the settings did not all come from params.yaml: say which and what
        tags["rubricrl.params_overlay"] = " | ".join(f"{p}: {p.read_text(encoding='utf-8').strip()}"
                                                     for p in env_overlays())[:5000]
    with mlflow.start_run(experiment_id=exp_id, run_name=stage, parent_run_id=parent, nested=bool(parent), tags=tags):
        mlflow.log_params(_flatten(params))
        yield Run(mlflow)


def process_tag() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _alive(owner: str) -> bool:
    """Whether the process recorded as `host:pid` still runs (another host's: assumed alive)."""
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def end_stale_runs(exp_id: str, run_name: str) -> list[str]:
    """Runs named `run_name` left RUNNING by a killed process of this host (PID_TAG names a process that is gone)
    end as KILLED, each with one line on stderr. Returns their ids."""
    from mlflow import MlflowClient

    c = MlflowClient()
    ended = []
    for r in c.search_runs([exp_id], filter_string=f"attributes.run_name = '{run_name}' and "
                                                   "attributes.status = 'RUNNING'", max_results=100):
        owner = r.data.tags.get(PID_TAG)
        if owner and not _alive(owner):
            c.set_terminated(r.info.run_id, "KILLED")
            c.set_tag(r.info.run_id, "rubricrl.ended_by", "the next run (its process was gone)")
            ended.append(r.info.run_id)
            print(f"tracking: run {r.info.run_id} ({run_name}) was left RUNNING by process {owner}, which is gone: "
                  f"ended as KILLED", file=sys.stderr)
    return ended


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = "null" if v is None else v
    return out
