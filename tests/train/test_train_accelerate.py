"""The `grpo` stage as two CPU processes (DDP over gloo) under `accelerate launch`, in a scratch project.

accelerate 1.15 runs `--cpu --num_processes 2` as ONE process (its simple launcher needs an MPI
hostfile for several CPU processes), so the tests launch with `--multi_gpu`: torchrun starts two
processes, and on a machine without GPUs (or with device: cpu) they train on CPU with gloo.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rubricrl.core.atomic import write_json, write_jsonl
from rubricrl.core.errors import ConfigError
from rubricrl.core.net import free_port
from rubricrl.inference.models import build_tiny_model
from rubricrl.train.checkpoints import MARKER
from tests.train_helpers import ROOT, RUBRIC, tiny_tasks

PASSING = {"min_margin": 0.4, "probes": {"all_null": {"pass": True, "worst_margin": 2.0, "share_below_gold": 1.0}},
           "reward": {"spearman_accuracy": 0.9}, "economics": {},
           "on_policy": {"spearman_accuracy": 0.8, "pairwise_accuracy": 0.9, "n_samples": 8, "n_pairs": 4}}
FAILING = {**PASSING, "probes": {"all_null": {"pass": False, "worst_margin": -1.0, "share_below_gold": 0.5}}}


def scratch_project(tmp_path: Path, report: dict) -> Path:
    """What the stage reads, relative to its cwd: params.yaml, data/, the SFT model, the calibrated rubric."""
    proj = tmp_path / "proj"
    build_tiny_model(proj / "outputs" / "models" / "sft")
    for split in ("train", "val"):  # the tiny tasks have gold answers: the hack monitor's slice too
        write_jsonl(proj / "data" / f"{split}.jsonl", (t.to_dict() for t in tiny_tasks()))
    (proj / "outputs" / "rubric").mkdir()
    shutil.copy(RUBRIC, proj / "outputs" / "rubric" / "rubric.yaml")
    write_json(proj / "outputs" / "rubric" / "report.json", report)
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    # 2 processes x 2 completions each = one group of 2 per process per step
    params["grpo"].update({"num_generations": 2, "per_device_batch_size": 2, "grad_accum": 1,
                           "max_completion_length": 8, "max_steps": 2, "save_steps": 1, "general_share": 0.0})
    params["grpo"]["monitor"].update({"every": 2, "n_tasks": 2, "max_new_tokens": 8})  # greedy decodes on both ranks
    params["tracking"].update({"enabled": True, "uri": f"sqlite:///{proj / 'mlruns' / 'mlflow.db'}",
                               "artifact_root": str(proj / "mlruns" / "artifacts")})
    (proj / "params.yaml").write_text(yaml.safe_dump(params))
    return proj


def launch(proj: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
           "--main_process_port", str(free_port()), "-m", "rubricrl.stages.grpo"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    env.pop("RUBRICRL_PARENT_RUN_ID", None)
    return subprocess.run(cmd, cwd=proj, env=env, capture_output=True, text=True, timeout=600)


def mlflow_runs(proj: Path):
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{proj / 'mlruns' / 'mlflow.db'}")
    return mlflow.search_runs(experiment_names=["rubricrl"], output_format="list")


@pytest.mark.slow  # two launches of two processes: ~60 s on an idle 2-core box
def test_stage_under_accelerate_trains_on_both_ranks_with_one_mlflow_run(tmp_path):
    proj = scratch_project(tmp_path, PASSING)
    proc = launch(proj)
    assert proc.returncode == 0, proc.stderr[-4000:]

    out = proj / "outputs" / "grpo"
    assert (out / "model" / "model.safetensors").is_file() and (out / "model" / "tokenizer.json").is_file()
    assert {"report.md", "history.csv", "monitor.csv", "fingerprint.json", "train_result.json"} <= \
        {p.name for p in out.iterdir()}
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]  # no temp or half-published folders
    assert json.loads((out / "train_result.json").read_text())["world_size"] == 2
    assert sorted(p.name for p in (out / "checkpoints").glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]
    last = out / "checkpoints" / "checkpoint-2"
    assert {MARKER, "rng_state_0.pth", "rng_state_1.pth"} <= {p.name for p in last.iterdir()}  # both ranks saved
    metrics = json.loads((proj / "metrics" / "grpo.json").read_text())
    assert metrics["steps"] == 2 and metrics["resumed_from_step"] == 0
    [run] = mlflow_runs(proj)  # rank 1 opened none
    assert run.info.status == "FINISHED" and run.data.tags["rubricrl.stage"] == "grpo"
    assert run.data.metrics["grpo.steps"] == 2 and "monitor/field_accuracy" in run.data.metrics

    # The same command again: both ranks resume the finished run instead of one wiping the folder.
    again = launch(proj)
    assert again.returncode == 0, again.stderr[-4000:]
    assert json.loads((proj / "metrics" / "grpo.json").read_text())["resumed_from_step"] == 2
    assert (last / "rng_state_1.pth").is_file()
    assert sorted(r.info.status for r in mlflow_runs(proj)) == ["FINISHED", "FINISHED"]


@pytest.mark.slow
def test_failed_rubric_gate_stops_every_rank_before_anything_is_touched(tmp_path):
    proj = scratch_project(tmp_path, FAILING)
    earlier = proj / "outputs" / "grpo" / "fingerprint.json"
    write_json(earlier, {"fingerprint": "an earlier run"})
    proc = launch(proj)
    # torchrun (ChildFailedError) exits 1; the first rank to stop exits 2 and the other is stopped by torchrun
    # with SIGTERM unless it got to exit 2 first.
    assert proc.returncode != 0
    root_cause = proc.stderr.split("Root Cause")[-1]
    assert re.search(r"exitcode\s*:\s*2 ", root_cause), proc.stderr[-4000:]
    assert set(re.findall(r"exitcode\s*:\s*(-?\d+) ", proc.stderr)) <= {"2", "-15"}
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert errors and set(errors) == {"error: the rubric failed its calibration gate; training will not start:"}
    assert "  - probe 'all_null': scores less than rubric.min_margin=0.4" in proc.stderr
    assert 'rubricrl/stages/grpo.py", line' not in proc.stderr  # one clean error line per rank, no traceback
    assert json.loads(earlier.read_text()) == {"fingerprint": "an earlier run"}  # the output folder is untouched
    assert not (proj / "mlruns").exists()  # no MLflow run was opened, so none is left open


def test_a_training_stage_relaunches_itself_under_accelerate_when_the_profile_names_a_config(monkeypatch):
    import subprocess as sp

    from rubricrl.stages import launch

    calls = []
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.setattr(sp, "call", lambda cmd: calls.append(cmd) or 7)
    with pytest.raises(SystemExit) as exit_info:
        launch.relaunch_under_accelerate("configs/accelerate_zero3.yaml", "rubricrl.stages.sft")
    assert exit_info.value.code == 7  # the launcher's exit code is the stage's
    [cmd] = calls
    assert cmd[:5] == [sys.executable, "-m", "accelerate.commands.launch", "--config_file",
                       "configs/accelerate_zero3.yaml"]
    assert cmd[5] == "--main_process_port" and int(cmd[6]) > 0  # a free rendezvous port on one machine
    assert cmd[7:] == ["-m", "rubricrl.stages.sft"]  # the stage module itself
    monkeypatch.setenv("LOCAL_RANK", "0")  # already under the launcher: carry on in this process
    launch.relaunch_under_accelerate("configs/accelerate_zero3.yaml", "rubricrl.stages.sft")
    launch.relaunch_under_accelerate(None, "rubricrl.stages.sft")  # no config: one process
    assert len(calls) == 1
    monkeypatch.delenv("LOCAL_RANK")
    with pytest.raises(ConfigError, match="configs/nope.yaml: the accelerate config named by accelerate_config"):
        launch.relaunch_under_accelerate("configs/nope.yaml", "rubricrl.stages.sft")


@pytest.mark.parametrize("stage", ["sft", "grpo"])
def test_sft_and_grpo_relaunch_with_their_own_module_and_config(stage, monkeypatch):
    import importlib

    from rubricrl.config import load_params

    module = importlib.import_module(f"rubricrl.stages.{stage}")
    production = load_params(ROOT / "params.yaml", [ROOT / "configs/production.yaml"])
    seen = []
    monkeypatch.setattr(module, "load_params", lambda: production)
    monkeypatch.setattr(module, "relaunch_under_accelerate", lambda config, name: seen.append((config, name)))
    monkeypatch.setattr(module, "run", lambda params: None)
    module.main()
    assert seen == [("configs/accelerate_zero3.yaml", f"rubricrl.stages.{stage}")]
