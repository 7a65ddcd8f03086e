"""State inside the checkout: a copied checkout reads and writes its own artifacts (MLflow records absolute
locations; tracking.relocate rebinds them), and registry commands refuse a missing or unreadable store instead
of creating an empty one."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

LOG = """
import sys, mlflow
from rubricrl import tracking
from rubricrl.config import TrackingParams
cfg = TrackingParams()
with tracking.stage_run(cfg, sys.argv[1], {}) as run:
    open("note.txt", "w").write(sys.argv[1])
    run.log_artifact("note.txt", "notes")
    print(mlflow.active_run().info.artifact_uri)
"""

READ = """
import sys, mlflow
from rubricrl import tracking
from rubricrl.config import TrackingParams
tracking.setup(TrackingParams())
for r in mlflow.search_runs(experiment_names=["rubricrl"], output_format="list", order_by=["attributes.start_time ASC"]):
    path = mlflow.artifacts.download_artifacts(run_id=r.info.run_id, artifact_path="notes/note.txt")
    print(r.info.run_name, r.info.artifact_uri, open(path).read())
"""


def _py(code: str, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def _tree(root: Path) -> dict:
    return {p.relative_to(root).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_a_copied_checkout_is_independent_of_the_original(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    first = _py(LOG, a, "first")
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip().startswith((a / "mlruns/artifacts").as_uri())
    shutil.copytree(a, b)
    before = _tree(a)
    second = _py(LOG, b, "second")
    assert second.returncode == 0, second.stderr
    assert "this checkout was copied or moved from" in second.stderr
    assert second.stdout.strip().startswith((b / "mlruns/artifacts").as_uri())
    assert _tree(a) == before  # the original tree saw no read-modify-write, no new artifact
    shutil.rmtree(a)  # the copy reads every artifact from its own tree
    listed = _py(READ, b)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.strip().splitlines()
    assert [ln.split()[0] for ln in lines] == ["first", "second"] and all(str(b) in ln for ln in lines)
    assert [ln.split()[-1] for ln in lines] == ["first", "second"]


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "rubricrl.cli.main", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.slow
def test_registry_commands_refuse_a_missing_or_unreadable_store(tmp_path):
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    for cmd in (["registry", "list"], ["registry", "promote"], ["registry", "rollback"], ["registry", "show"]):
        out = _cli(tmp_path, *cmd)
        assert out.returncode == 2, (cmd, out.stdout, out.stderr)
        assert out.stderr.strip().splitlines() == [
            "error: mlruns/mlflow.db: no tracking store here (tracking.uri sqlite:///mlruns/mlflow.db); run the "
            "pipeline first (make run), or run this from the checkout that has it"], cmd
        assert not (tmp_path / "mlruns").exists()  # no new empty store
    (tmp_path / "mlruns").mkdir()
    (tmp_path / "mlruns/mlflow.db").write_bytes(b"not a database" * 100)
    out = _cli(tmp_path, "registry", "list")
    assert out.returncode == 2 and out.stderr.startswith("error: mlruns/mlflow.db: unreadable tracking store")
    assert len(out.stderr.strip().splitlines()) == 1


STAGE = """
import os, signal, sys
from pathlib import Path

import pytest
from rubricrl import tracking
from rubricrl.config import TrackingParams
from rubricrl.core.atomic import output_set
with tracking.stage_run(TrackingParams(), "report", {}) as run:
    with output_set(Path("outputs/report")) as staging:
        (staging / "report.md").write_text(sys.argv[1])
        if sys.argv[1] == "kill":
            os.kill(os.getpid(), signal.SIGKILL)  # kill -9 mid-write: nothing below runs
"""


@pytest.mark.slow
def test_a_killed_stage_leaves_nothing_the_next_run_does_not_clean(tmp_path):
    killed = _py(STAGE, tmp_path, "kill")
    assert killed.returncode == -9
    assert list((tmp_path / "outputs/report").glob(".staging-*"))  # what the kill left
    again = _py(STAGE, tmp_path, "done")
    assert again.returncode == 0, again.stderr
    assert "left RUNNING by process" in again.stderr and "ended as KILLED" in again.stderr
    assert not list((tmp_path / "outputs/report").glob(".staging-*"))
    assert (tmp_path / "outputs/report/report.md").read_text() == "done"
    runs = _py("""
import mlflow
from rubricrl import tracking
from rubricrl.config import TrackingParams
tracking.setup(TrackingParams())
for r in mlflow.search_runs(experiment_names=["rubricrl"], output_format="list", order_by=["attributes.start_time ASC"]):
    print(r.info.run_name, r.info.status)
""", tmp_path)
    assert runs.stdout.split() == ["report", "KILLED", "report", "FINISHED"], runs.stderr


LOGGING_STAGE = """
from rubricrl import tracking
from rubricrl.config import TrackingParams
from rubricrl.core.entry import stage_main


def go():
    with tracking.stage_run(TrackingParams(lock_wait_s=3), "x", {"a": 1}) as run:
        run.log_metrics({"m": 1.0})


stage_main(go)
"""


def _limited(cwd: Path, fsize: int | None = None) -> subprocess.CompletedProcess:
    import resource

    def limit():
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", LOGGING_STAGE], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600, preexec_fn=limit)


def _one_line(out: subprocess.CompletedProcess) -> str:
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), out.stderr
    return lines[0]


@pytest.mark.slow
def test_a_file_size_limit_is_one_error_line(tmp_path):
    line = _one_line(_limited(tmp_path, fsize=64 * 1024))  # MLflow's store outgrows 64 KiB while it is made
    assert "File too large" in line or "disk" in line or "database" in line, line


@pytest.mark.slow
def test_a_locked_store_is_one_error_line(tmp_path):
    import sqlite3

    assert _limited(tmp_path).returncode == 0  # the store exists
    con = sqlite3.connect(tmp_path / "mlruns/mlflow.db", isolation_level=None)
    try:
        con.execute("BEGIN EXCLUSIVE")  # another process holds the store
        line = _one_line(_limited(tmp_path))
    finally:
        con.close()
    assert "locked" in line, line
