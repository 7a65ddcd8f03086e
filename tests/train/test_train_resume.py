"""Crash safety: a GRPO process killed with SIGKILL resumes from its last complete checkpoint."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch
from safetensors.torch import load_file

from rubricrl.inference.models import build_tiny_model
from rubricrl.train.checkpoints import MARKER, list_checkpoints
from rubricrl.train.grpo import train_grpo
from tests.train_helpers import ROOT, rubric_reward, tiny_settings, tiny_tasks

MAX_STEPS = 16


def run_cmd(model, out, sleep_s: float) -> list[str]:
    return [sys.executable, "-m", "tests.grpo_slow_run", str(model), str(out), str(MAX_STEPS), str(sleep_s)]


@pytest.mark.slow  # two subprocess runs: ~20 s on an idle 2-core box, ~55 s on a busy one
def test_sigkill_mid_run_then_rerun_resumes_from_last_complete_checkpoint(tmp_path):
    model = build_tiny_model(tmp_path / "tiny")
    out = tmp_path / "run"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    log = tmp_path / "first.log"
    with open(log, "wb") as f:
        proc = subprocess.Popen(run_cmd(model, out, 0.4), cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while not list_checkpoints(out / "checkpoints"):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"no checkpoint before exit {proc.poll()}:\n{log.read_text()[-3000:]}")
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()

    done = list_checkpoints(out / "checkpoints")
    last = done[-1].step
    assert last < MAX_STEPS and not (out / "model").exists(), "the kill came too late to be mid-run"
    # What a save cut off by a kill leaves: a checkpoint folder without the completion marker.
    torn = out / "checkpoints" / "checkpoint-999"
    shutil.copytree(done[-1].path, torn)
    (torn / MARKER).unlink()

    rerun = subprocess.run(run_cmd(model, out, 0), cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    result = json.loads(next(line for line in rerun.stdout.splitlines() if line.startswith("RESULT "))[7:])
    assert result["resumed_from_step"] == last  # never the torn checkpoint-999
    assert result["global_step"] == MAX_STEPS
    assert not torn.exists()
    state = json.loads((out / "checkpoints" / f"checkpoint-{MAX_STEPS}" / "trainer_state.json").read_text())
    assert [e["step"] for e in state["log_history"] if "kl" in e] == list(range(1, MAX_STEPS + 1))
    final = load_file(out / "model" / "model.safetensors")
    saved = load_file(out / "checkpoints" / f"checkpoint-{MAX_STEPS}" / "model.safetensors")
    assert all(torch.equal(final[k], saved[k]) for k in saved)

    # A third run finds the work done: nothing is trained (transformers would add a step), the model is republished.
    again = train_grpo(model, tiny_tasks(), out, tiny_settings(max_steps=MAX_STEPS, save_steps=2, save_total_limit=2),
                       rubric_reward())
    assert (again["resumed_from_step"], again["global_step"]) == (MAX_STEPS, MAX_STEPS)
    assert all(torch.equal(load_file(out / "model" / "model.safetensors")[k], saved[k]) for k in saved)
