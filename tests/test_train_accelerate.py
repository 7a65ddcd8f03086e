"""GRPO as two CPU processes (DDP over gloo) under `accelerate launch`, through the user-facing launcher.

accelerate 1.15 runs `--cpu --num_processes 2` as ONE process (its simple launcher needs an MPI
hostfile for several CPU processes), so the test launches with `--multi_gpu`: torchrun starts two
processes, and on a machine without GPUs (or with device: cpu) they train on CPU with gloo.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import yaml

from rubricrl.atomic import write_jsonl
from rubricrl.models import build_tiny_model
from rubricrl.train.checkpoints import MARKER
from tests.train_helpers import ROOT, RUBRIC, tiny_tasks


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_process_grpo_under_accelerate(tmp_path):
    model = build_tiny_model(tmp_path / "tiny")
    tasks = tmp_path / "train.jsonl"
    write_jsonl(tasks, (t.to_dict() for t in tiny_tasks()))
    params = tmp_path / "params.yaml"
    shipped = yaml.safe_load((ROOT / "params.yaml").read_text())
    # 2 processes x 2 completions each = one group of 2 per process per step
    shipped["grpo"].update({"num_generations": 2, "per_device_batch_size": 2, "max_completion_length": 8,
                            "max_steps": 2, "save_steps": 1, "general_share": 0.0})
    shipped["grpo"]["monitor"] = {"enabled": False}
    shipped["scoring"]["rubric"] = str(RUBRIC)
    shipped["tracking"]["enabled"] = False
    params.write_text(yaml.safe_dump(shipped))
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
           "--main_process_port", str(free_port()), "-m", "rubricrl.train.grpo_launch",
           "--model", str(model), "--tasks", str(tasks), "--out", str(out), "--params", str(params)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]

    assert "rank 0/2 finished at step 2" in proc.stderr and "rank 1/2 finished at step 2" in proc.stderr
    [summary] = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith('{"')]  # rank 0 only
    assert summary["world_size"] == 2 and summary["global_step"] == 2
    assert (out / "model" / "model.safetensors").is_file() and (out / "model" / "tokenizer.json").is_file()
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]  # no temp or half-published folders
    assert sorted(p.name for p in (out / "checkpoints").glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]
    assert all((out / "checkpoints" / c / MARKER).is_file() for c in ("checkpoint-1", "checkpoint-2"))
    last = out / "checkpoints" / "checkpoint-2"
    assert {"rng_state_0.pth", "rng_state_1.pth"} <= {p.name for p in last.iterdir()}  # both ranks saved
