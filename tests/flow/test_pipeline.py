"""End to end: the Prefect flow runs the dvc.yaml graph in a fresh git copy, tracked in MLflow."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
TOP_SKIP = {".git", ".venv", "mlruns", ".prefect", ".cache", "data", "metrics", "outputs", "dvc.lock", ".pytest_cache"}


def make_project(tmp_path: Path, sections: dict | None = None, **data_params) -> Path:
    proj = tmp_path / "proj"
    def ignore(folder, names):  # run outputs only at the top (rubricrl/data is code)
        top = Path(folder) == ROOT
        return [n for n in names if (top and n in TOP_SKIP) or n == "__pycache__" or n.endswith(".egg-info")]

    shutil.copytree(ROOT, proj, ignore=ignore)
    params = yaml.safe_load((proj / "params.yaml").read_text())
    params["data"].update(data_params)
    for name, values in (sections or {}).items():
        params[name].update(values)
    (proj / "params.yaml").write_text(yaml.safe_dump(params))
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"],
                ["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init"]):
        subprocess.run(cmd, cwd=proj, check=True)
    return proj


def rubricrl(proj: Path, *args) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PREFECT_HOME": str(proj / ".prefect")}
    return subprocess.run([str(BIN / "rubricrl"), *args], cwd=proj, env=env, text=True, capture_output=True, timeout=600)


# The chain up to the rubric on a tiny random policy: the rubric stage samples the SFT model.
TINY_CHAIN = ("data", "prepare_model", "sft", "rubric")


@pytest.mark.slow
def test_pipeline_runs_stages_tracks_lineage_and_skips_up_to_date(tmp_path):
    from rubricrl.inference.models import build_tiny_model

    tiny = build_tiny_model(tmp_path / "tiny")
    proj = make_project(tmp_path, sections={
        "policy": {"model": str(tiny)}, "sft": {"max_steps": 1, "max_tasks": 4, "per_device_batch_size": 2},
        # transformers samples: llama.cpp's converter knows only published tokenizers, not the tiny BPE
        "rubric": {"policy_tasks": 2, "policy_samples": 2, "sample_engine": "transformers"},
        "grpo": {"max_completion_length": 8}},
        n_train=40, n_test=12, n_val=10)
    stages = [arg for name in TINY_CHAIN for arg in ("--stage", name)]
    first = rubricrl(proj, "pipeline", "run", *stages)
    assert first.returncode == 0, first.stderr[-3000:]
    assert len((proj / "data" / "train.jsonl").read_text().splitlines()) == 40
    stats = json.loads((proj / "metrics" / "data.json").read_text())
    assert stats["test"]["n"] == 12 and set(stats["test"]["parts"]) == {"in_domain", "held_out_domain"}
    lock = yaml.safe_load((proj / "dvc.lock").read_text())
    md5 = {o["path"]: o["md5"] for o in lock["stages"]["data"]["outs"]}

    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{proj / 'mlruns' / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["rubricrl"], output_format="list")
    parent = next(r for r in runs if r.info.run_name == "pipeline")
    stage = next(r for r in runs if r.info.run_name == "data")
    rubric_run = next(r for r in runs if r.info.run_name == "rubric")
    assert stage.data.tags["mlflow.parentRunId"] == parent.info.run_id
    assert rubric_run.data.tags["mlflow.parentRunId"] == parent.info.run_id
    assert rubric_run.data.metrics["pairwise_accuracy"] == 1.0
    assert rubric_run.data.metrics["policy_samples"] == 4  # 2 samples of each of 2 tasks from the SFT model
    report = json.loads((proj / "outputs" / "rubric" / "report.json").read_text())
    assert report["on_policy"]["n_samples"] == 4
    assert any(f.startswith("on-policy") for f in report["gate_failures"])  # a random model gives no signal
    assert (proj / "outputs" / "rubric" / "rubric.yaml").exists() and (proj / "metrics" / "rubric.json").exists()
    assert stage.data.tags["dvc.md5.data/train.jsonl"] == md5["data/train.jsonl"]  # the stage's hash is DVC's
    assert parent.data.tags["dvc.md5.data/test.jsonl"] == md5["data/test.jsonl"]
    assert len(parent.data.tags["git.commit"]) >= 40
    assert stage.data.params["data.n_train"] == "40"
    assert stage.data.metrics["train.n"] == 40

    second = rubricrl(proj, "pipeline", "run", *stages)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "didn't change, skipping" in second.stdout + second.stderr
    runs = mlflow.search_runs(experiment_names=["rubricrl"], output_format="list")
    assert sum(r.info.run_name == "data" for r in runs) == 1  # up to date: the stages did not run again
    assert sum(r.info.run_name == "rubric" for r in runs) == 1

    # A stage that fails inside the flow: the run exits non-zero and the error names the file and line.
    (proj / "user.jsonl").write_text('{"id": "a", "instruction": "x", "text": "y"}\n')
    params = yaml.safe_load((proj / "params.yaml").read_text())
    params["data"].update(source="file", tasks_file="user.jsonl")
    (proj / "params.yaml").write_text(yaml.safe_dump(params))
    third = rubricrl(proj, "pipeline", "run", "--stage", "data")
    assert third.returncode != 0
    assert "stage 'data' failed" in third.stderr and "user.jsonl:1: schema: missing (an extraction task needs its schema" in third.stderr


def test_stage_order_follows_the_dvc_graph():
    sys.path.insert(0, str(ROOT))
    from rubricrl.flow.pipeline import stage_order

    order = stage_order()
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    assert sorted(order) == sorted(stages)
    for before, after in [("data", "rubric"), ("rubric", "grpo"), ("prepare_model", "sft"), ("sft", "grpo"),
                          ("grpo", "eval_task"), ("data", "sft")]:
        assert order.index(before) < order.index(after), order


@pytest.mark.slow
def test_bad_user_task_file_stops_the_stage_with_file_line_and_writes_nothing(tmp_path):
    proj = make_project(tmp_path)
    (proj / "user.jsonl").write_text('{"id": "a", "instruction": "x", "text": "y"}\n')
    params = yaml.safe_load((proj / "params.yaml").read_text())
    params["data"].update(source="file", tasks_file="user.jsonl")
    (proj / "params.yaml").write_text(yaml.safe_dump(params))
    res = subprocess.run([sys.executable, "-m", "rubricrl.stages.data"], cwd=proj, text=True, capture_output=True)
    assert res.returncode == 2
    assert "user.jsonl:1: schema: missing (an extraction task needs its schema" in res.stderr
    assert not (proj / "data").exists() and not (proj / "metrics").exists()


@pytest.mark.slow
def test_bad_params_stop_the_pipeline_before_any_stage(tmp_path):
    proj = make_project(tmp_path)
    (proj / "params.yaml").write_text((proj / "params.yaml").read_text().replace("seed:", "sede:"))
    res = rubricrl(proj, "pipeline", "run")
    assert res.returncode != 0
    assert "data.sede: unknown key" in res.stderr
    assert not (proj / "data").exists()
