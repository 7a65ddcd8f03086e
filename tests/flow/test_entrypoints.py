"""The flows' entry points: prefect.yaml deploys flows/pipeline.py:pipeline, a file that only imports the flow of
rubricrl/flow/pipeline.py. Prefect's own loader (what `prefect deploy` and a worker's flow run use) finds that
flow object there, from the checkout; the slow test deploys prefect.yaml with `prefect deploy --all` to a real
server and has a process worker run the CPU deployment's `data` stage, through dvc.yaml and tasks/data.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import rubricrl.flow.pipeline as fp  # noqa: E402  (sets the Prefect environment before prefect is imported)
from tests.flow.test_pipeline import make_project  # noqa: E402
from tests.flow.test_status_server import PREFECT, prefect_server  # noqa: E402,F401  (the real server)

DEPLOYMENTS = yaml.safe_load((ROOT / "prefect.yaml").read_text(encoding="utf-8"))["deployments"]
BIN = Path(sys.executable).parent


def test_every_deployment_loads_the_package_flow_from_flows():
    from prefect.flows import load_flow_from_entrypoint

    assert [d["entrypoint"] for d in DEPLOYMENTS] == ["flows/pipeline.py:pipeline"] * 2
    for dep in DEPLOYMENTS:
        path, _, name = dep["entrypoint"].rpartition(":")
        flow = load_flow_from_entrypoint(f"{ROOT / path}:{name}", use_placeholder_flow=False)
        assert flow is fp.pipeline, f"{dep['name']}: {dep['entrypoint']} is not rubricrl.flow.pipeline's flow"
    deployed = {d["entrypoint"].rpartition(":")[0] for d in DEPLOYMENTS}
    assert deployed == {p.relative_to(ROOT).as_posix() for p in (ROOT / "flows").glob("*.py")}  # nothing else there
    assert not (ROOT / "flows" / "__init__.py").exists()


def test_a_flow_run_loads_the_checkouts_flow(tmp_path):
    """As a worker's flow run does (prefect.flow_engine: the entrypoint, relative, from the deployment's working
    folder), in a fresh interpreter: the flow is the one in this checkout's rubricrl/flow/pipeline.py."""
    code = ("import inspect, json; from prefect.flows import load_flow_from_entrypoint; "
            "f = load_flow_from_entrypoint('flows/pipeline.py:pipeline', use_placeholder_flow=False); "
            "print(json.dumps([f.name, inspect.getsourcefile(f.fn)]))")
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect")}
    env.pop("PYTHONPATH", None)  # the working folder alone must bring the project's code
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, text=True, capture_output=True, timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    name, source = json.loads(res.stdout.splitlines()[-1])
    assert name == fp.FLOW and Path(source) == ROOT / "rubricrl" / "flow" / "pipeline.py"


def prefect_cli(proj: Path, env: dict, *args: str, timeout: int = 180) -> str:
    res = subprocess.run([str(PREFECT), *args], cwd=proj, env=env, text=True, capture_output=True, timeout=timeout)
    assert res.returncode == 0, f"prefect {' '.join(args)}: {res.stdout[-3000:]}{res.stderr[-3000:]}"
    return res.stdout


@pytest.mark.slow
def test_prefect_deploy_then_a_worker_runs_a_stage_through_the_entry_points(prefect_server, tmp_path):
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    url, env = prefect_server
    env = {**env, "DVC_NO_ANALYTICS": "1", "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}"}
    proj = make_project(tmp_path, sections={"tracking": {"enabled": False}, "pipeline": {"push": False}},
                        n_train=40, n_test=12, n_val=10)
    prefect_cli(proj, env, "work-pool", "create", "cpu-pool", "--type", "process")
    prefect_cli(proj, env, "work-pool", "create", "gpu-pool", "--type", "docker")
    prefect_cli(proj, env, "--no-prompt", "deploy", "--all")
    with temporary_settings(updates={PREFECT_API_URL: url}), get_client(sync_client=True) as client:
        deployments = {n: client.read_deployment_by_name(f"{fp.FLOW}/{n}") for n in ("rubricrl-cpu", "rubricrl-gpu")}
    assert {n: d.entrypoint for n, d in deployments.items()} == dict.fromkeys(deployments, "flows/pipeline.py:pipeline")
    pull = deployments["rubricrl-cpu"].pull_steps
    assert pull == [{"prefect.deployments.steps.set_working_directory": {"directory": str(proj)}}]

    # project: named, so that the run writes into the copy whichever rubricrl the worker's interpreter finds.
    out = prefect_cli(proj, env, "deployment", "run", f"{fp.FLOW}/rubricrl-cpu", "--param", 'stages=["data"]',
                      "--param", f"project={proj}")
    run_id = next(line.split()[-1] for line in out.splitlines() if "UUID" in line)
    worker = subprocess.run([str(PREFECT), "worker", "start", "--pool", "cpu-pool", "--run-once"], cwd=tmp_path,
                            env=env, text=True, capture_output=True, timeout=300)
    logs = worker.stdout + worker.stderr
    assert worker.returncode == 0, logs[-3000:]
    assert "Running stage 'data'" in logs and "> python tasks/data.py" in logs, logs[-3000:]
    with temporary_settings(updates={PREFECT_API_URL: url}), get_client(sync_client=True) as client:
        state = client.read_flow_run(run_id).state
    assert state.is_completed(), f"{state}\n{logs[-3000:]}"
    assert len((proj / "data" / "train.jsonl").read_text().splitlines()) == 40
    assert yaml.safe_load((proj / "dvc.lock").read_text())["stages"]["data"]["cmd"] == "python tasks/data.py"
