"""The Prefect flow: runs whatever stages dvc.yaml holds, in dependency order, one task each.

Each stage runs as `dvc repro --single-item <stage>`, so DVC decides what is up to date and the
stage scripts stay free of Prefect. The flow opens the MLflow pipeline run; stage runs nest under it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from graphlib import TopologicalSorter
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def prefect_env() -> None:
    """A project-local Prefect home and no analytics; without PREFECT_API_URL Prefect runs embedded."""
    os.environ.setdefault("PREFECT_HOME", str(ROOT / ".prefect"))
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    # The embedded server migrates a fresh database on first start: slow on a busy 2-core machine.
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")


prefect_env()

from prefect import flow, task  # noqa: E402  (needs the environment above)


def _covers(out: str, dep: str) -> bool:
    out, dep = out.rstrip("/"), dep.rstrip("/")
    return dep == out or dep.startswith(out + "/") or out.startswith(dep + "/")


def _paths(entries) -> list[str]:
    """Stage deps/outs/metrics entries are strings or one-key mappings with options."""
    out = []
    for e in entries or []:
        out.append(next(iter(e)) if isinstance(e, dict) else e)
    return out


def stage_order(dvc_yaml: Path = ROOT / "dvc.yaml") -> list[str]:
    """Stages in dependency order: a stage comes after every stage whose outputs it reads."""
    stages = (yaml.safe_load(dvc_yaml.read_text()) or {}).get("stages", {})
    outs = {name: _paths(s.get("outs")) + _paths(s.get("metrics")) + _paths(s.get("plots")) for name, s in stages.items()}
    graph = TopologicalSorter()
    for name, s in stages.items():
        deps = _paths(s.get("deps"))
        graph.add(name, *[other for other, paths in outs.items() if other != name
                          and any(_covers(o, d) for o in paths for d in deps)])
    return list(graph.static_order())


@task(name="dvc-stage")
def run_stage(stage: str, force: bool, env: dict) -> None:
    cmd = [sys.executable, "-m", "dvc", "repro", "--single-item", stage] + (["--force"] if force else [])
    # Output streams live (a training stage runs for many minutes); the stderr tail goes into the error.
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stderr=subprocess.PIPE)
    tail = b""
    for chunk in iter(lambda: proc.stderr.read1(4096), b""):
        if hasattr(sys.stderr, "buffer"):
            sys.stderr.buffer.write(chunk)
        else:  # a replaced stderr (a test's capture) takes text only
            sys.stderr.write(chunk.decode("utf-8", "replace"))
        sys.stderr.flush()
        tail = (tail + chunk)[-4000:]
    if proc.wait() != 0:
        text = tail.decode("utf-8", "replace").replace("\r", "\n").strip()
        raise RuntimeError(f"stage '{stage}' failed (exit {proc.returncode}): {text[-2000:]}")


@flow(name="rubricrl-pipeline")
def pipeline(stages: list[str] | None = None, force: bool = False) -> list[str]:
    import mlflow

    from rubricrl import tracking
    from rubricrl.config import load_params

    params = load_params(ROOT / "params.yaml")  # DVC's params file; fail fast, naming the key
    order = [s for s in stage_order() if not stages or s in stages]
    unknown = sorted(set(stages or []) - set(stage_order()))
    if unknown:
        raise ValueError(f"unknown stage(s): {', '.join(unknown)} (dvc.yaml has: {', '.join(stage_order())})")
    # Stage commands say `python ...`: make that this environment's interpreter.
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    if not params.tracking.enabled:
        for stage in order:
            run_stage(stage, force, env)
        return order
    exp_id = tracking.setup(params.tracking)
    with mlflow.start_run(experiment_id=exp_id, run_name="pipeline",
                          tags={"git.commit": tracking.git_commit(), "rubricrl.stages": ",".join(order)}) as run:
        env[tracking.PARENT_ENV] = run.info.run_id
        for stage in order:
            run_stage(stage, force, env)
        lock = ROOT / "dvc.lock"
        if lock.exists():
            mlflow.log_artifact(str(lock))
            mlflow.set_tags(_lock_hashes(lock))
    return order


def _lock_hashes(lock: Path) -> dict[str, str]:
    """DVC's own hashes of every stage output, as lineage tags of the pipeline run."""
    tags = {}
    for name, s in (yaml.safe_load(lock.read_text()) or {}).get("stages", {}).items():
        for o in s.get("outs", []):
            if "md5" in o:
                tags[f"dvc.md5.{o['path']}"] = o["md5"]
    return tags


def run_pipeline(stages: list[str] | None = None, force: bool = False) -> list[str]:
    from rubricrl.config import load_params

    load_params(ROOT / "params.yaml")  # a bad key stops here, before Prefect or any stage starts
    return pipeline(stages=stages, force=force)


def serve_pipeline(cron: str) -> None:
    """Scheduled runs: serve the flow with a cron schedule; a run can also be retriggered from the UI/API."""
    pipeline.serve(name="rubricrl-scheduled", cron=cron)


if __name__ == "__main__":
    run_pipeline()
