"""SFT killed with SIGKILL (at exact points: rubricrl.core.crashpoint; after a save, with a save written but not
marked complete, and before publishing) resumes from its last complete checkpoint and
ends with the uninterrupted run's weights, bit for bit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from rubricrl.core.crashpoint import ENV
from rubricrl.inference.models import build_tiny_model
from rubricrl.train.checkpoints import list_checkpoints
from tests.train_helpers import ROOT

SCRIPT = """
import sys
from rubricrl.config import SFTSettings
from rubricrl.train.sft import train_sft
from tests.train_helpers import tiny_tasks
model, out, ck = sys.argv[1:4]
run = train_sft(model, tiny_tasks(), out, SFTSettings(max_steps=6, save_steps=2, per_device_batch_size=2, grad_accum=1,
                precision="fp32", learning_rate=1e-2, max_length=512), checkpoints=ck)
print("RESULT", run.steps, run.first_loss, run.last_loss)
"""


def _run(model: Path, where: Path, kill_at: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != ENV} | {"HF_HUB_OFFLINE": "1"}
    if kill_at:
        env[ENV] = kill_at
    return subprocess.run([sys.executable, "-c", SCRIPT, str(model), str(where / "sft"), str(where / "ck")], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=600)


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(folder / "model.safetensors")


@pytest.mark.slow  # seven tiny SFT runs in subprocesses: ~100 s on 2 cores
def test_sft_killed_after_a_save_or_before_publishing_resumes_to_the_same_weights(tmp_path):
    model = build_tiny_model(tmp_path / "tiny")
    ref = _run(model, tmp_path / "ref")
    assert ref.returncode == 0, ref.stderr[-3000:]
    expected = _weights(tmp_path / "ref" / "sft")
    kills = 0
    for kill_at, saved in (("checkpoint:1", [2]), ("save:2", [2]), ("publish:1", [6])):
        where = tmp_path / kill_at.replace(":", "-")
        first = _run(model, where, kill_at)
        assert first.returncode == -9, first.stderr[-3000:]  # SIGKILL
        kills += 1
        assert [c.step for c in list_checkpoints(where / "ck")] == saved
        if kill_at == "save:2":  # checkpoint-4 written, never marked complete: the rerun discards it
            assert [c.step for c in list_checkpoints(where / "ck", complete_only=False)] == [2, 4]
        assert not (where / "sft").exists()
        rerun = _run(model, where)
        assert rerun.returncode == 0, rerun.stderr[-3000:]
        assert rerun.stdout.split("RESULT ")[1] == ref.stdout.split("RESULT ")[1], kill_at  # steps and losses
        got = _weights(where / "sft")
        assert set(got) == set(expected) and all(torch.equal(got[k], expected[k]) for k in expected), kill_at
    assert kills == 3
