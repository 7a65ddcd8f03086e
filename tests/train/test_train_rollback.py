"""KL-spike rollback: the real monitor and driver, with a spike injected into the logged KL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import TrainerCallback

from rubricrl.inference.models import build_tiny_model
from rubricrl.train.checkpoints import MARKER, list_checkpoints, prune
from rubricrl.train.grpo import STATE_FILE, train_grpo
from rubricrl.train.section import training_markdown
from rubricrl.train.rollback import SpikeDetector, TrainingError, last_good_step
from rubricrl.config import RollbackSettings
from rubricrl.reward.functions import RubricReward
from tests.train_helpers import FakeKL, rubric_reward, tiny_settings, tiny_tasks


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


class RestoreProbe(TrainerCallback):
    """At every resumed start, compares the live weights and optimizer with the checkpoint's files."""

    def __init__(self, initial: Path):
        self.initial = load_file(initial / "model.safetensors")
        self.resumes = []

    def on_train_begin(self, args, state, control, model=None, optimizer=None, **kwargs):
        if state.global_step == 0:
            return
        ckpt = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        saved = load_file(ckpt / "model.safetensors")
        live = model.state_dict()
        weights_equal = all(torch.equal(live[k], v) for k, v in saved.items())
        assert not all(torch.equal(self.initial[k], v) for k, v in saved.items())  # training moved the weights
        saved_opt = torch.load(ckpt / "optimizer.pt", weights_only=False)["state"]
        live_opt = optimizer.state_dict()["state"]
        optimizer_equal = saved_opt.keys() == live_opt.keys() and all(
            torch.equal(saved_opt[i]["exp_avg"], live_opt[i]["exp_avg"]) for i in saved_opt)
        self.resumes.append({"step": state.global_step, "beta": args.beta, "weights_equal": weights_equal,
                             "optimizer_equal": optimizer_equal, "n_tensors": len(saved)})


class SeenTasks(RubricReward):
    """The reward, recording which tasks each scored step drew (attempt by attempt, in order)."""

    def __init__(self, base: RubricReward):
        super().__init__(base.scorer, base.tasks)
        self.seen: list[tuple[int, tuple[str, ...]]] = []

    def score(self, completions: list, **columns):
        row = (columns["trainer_state"].global_step + 1, tuple(sorted(set(map(str, columns["task_id"])))))
        if not self.seen or self.seen[-1] != row:
            self.seen.append(row)
        return super().score(completions, **columns)


@pytest.mark.slow
def test_spike_restores_last_good_checkpoint_and_raises_beta(tiny_model, tmp_path):
    probe = RestoreProbe(tiny_model)
    # save_total_limit=1: only the pruning guard keeps checkpoint-1 alive until the spike at step 3.
    settings = tiny_settings(max_steps=6, save_total_limit=1, general_share=0.0)
    reward = SeenTasks(rubric_reward())
    result = train_grpo(tiny_model, tiny_tasks(), tmp_path / "run", settings, reward,
                        callbacks=[FakeKL(3, 3, times=1), probe])
    # The redone steps 2-3 drew other prompts than the rolled-back ones (the shuffle is seeded per attempt).
    steps = [step for step, _ in reward.seen]
    assert steps == [1, 2, 3, 2, 3, 4, 5, 6], reward.seen
    assert [ids for _, ids in reward.seen[1:3]] != [ids for _, ids in reward.seen[3:5]], reward.seen

    [rb] = result["rollbacks"]
    # KL logged at step 3 is measured on the weights after step 2, so checkpoint-2 is condemned too.
    assert (rb["step"], rb["restored_step"], rb["old_beta"], rb["new_beta"]) == (3, 1, 0.02, 0.04)
    assert rb["kl"] == 1e3 and rb["checkpoint"].endswith("checkpoint-1")
    assert probe.resumes == [{"step": 1, "beta": 0.04, "weights_equal": True, "optimizer_equal": True,
                              "n_tensors": probe.resumes[0]["n_tensors"]}]
    assert probe.resumes[0]["n_tensors"] > 0
    assert result["global_step"] == 6 and result["beta"] == 0.04
    steps = [e["step"] for e in result["log_history"] if "kl" in e]
    assert steps == [1, 2, 3, 4, 5, 6]  # the rolled-back steps 2-3 were redone, not appended
    assert (tmp_path / "run" / "model" / "model.safetensors").is_file()
    assert json.loads((tmp_path / "run" / STATE_FILE).read_text())["beta"] == 0.04
    # The rollback appears in the person-readable report, and every step has a row.
    report = training_markdown(result)
    assert "rollbacks: 1" in report and "0.02 -> 0.04" in report and "checkpoint-1 |" in report
    assert [line.split("|")[1].strip() for line in report.splitlines()
            if line.startswith("| ") and line.split("|")[1].strip().isdigit()] == ["3", "1", "2", "3", "4", "5", "6"]


@pytest.mark.slow
def test_persistent_spike_exhausts_rollbacks(tiny_model, tmp_path):
    settings = tiny_settings(max_steps=4, rollback=RollbackSettings(max_rollbacks=2))
    with pytest.raises(TrainingError) as err:
        train_grpo(tiny_model, tiny_tasks(), tmp_path / "run", settings, rubric_reward(),
                   callbacks=[FakeKL(2, 4, times=99)])
    msg = str(err.value)
    assert "step 2" in msg and "KL 1000" in msg and "beta 0.08" in msg and "2 rollback(s)" in msg
    state = json.loads((tmp_path / "run" / STATE_FILE).read_text())
    assert [(r["old_beta"], r["new_beta"], r["checkpoint"]) for r in state["rollbacks"]] == [
        (0.02, 0.04, None), (0.04, 0.08, None)]  # a spike at step 2 leaves only the initial model as good


def test_detector_rules():
    s = RollbackSettings(kl_max=1.0, kl_ratio=5.0, kl_window=3, kl_median_floor=0.01, reward_drop=0.5,
                         reward_window=3)
    d = SpikeDetector(s)
    assert d.judge(2.0, None).startswith("KL 2 above the bound")
    assert d.judge(float("nan"), None) is not None
    for step, kl in enumerate([0.0, 0.001, 0.002], start=1):
        assert d.judge(kl, 5.0) is None  # early KL is ~0: the floor keeps the ratio test quiet
        d.record(step, kl, 5.0)
    assert d.judge(0.04, 5.0) is None  # 0.04 < 5 x floor 0.01
    assert "recent median" in d.judge(0.06, 5.0)
    assert "collapsed" in d.judge(0.001, 2.0)  # 2.0 < 5.0 - 0.5 x 5.0
    d.forget_after(1)
    assert d.last_ok_step == 1 and last_good_step(4) == 2 and last_good_step(1) == 0


def test_prune_keeps_the_protected_checkpoint(tmp_path):
    for step in (1, 2, 3, 4):
        (tmp_path / f"checkpoint-{step}").mkdir()
        (tmp_path / f"checkpoint-{step}" / MARKER).write_text("{}")
    prune(tmp_path, keep=1, protect=2)
    assert [c.step for c in list_checkpoints(tmp_path)] == [2, 4]


def test_a_drop_within_the_prompt_draws_noise_is_no_collapse():
    """Measured with the uncapped prices: the CPU default's first 6 steps' rewards (KL ~0.0005, the policy barely
    moved), then a step of -10.1 whose two prompts held many stated fields. The drop alone (0.5 x |median|) called it a
    collapse and the safety nets gave up after 3 rollbacks; within 3 standard deviations of the window it is the
    draw. A drop far outside the window's spread still trips, and so does any drop from a flat window."""
    window = [-7.55, -1.41, -6.65, -6.84, -3.16, -2.38]
    noisy = SpikeDetector(RollbackSettings(kl_window=6, reward_window=6))
    for step, r in enumerate(window, start=1):
        noisy.record(step, 0.0005, r)
    assert noisy.judge(0.0007, -10.11) is None
    reason = noisy.judge(0.0007, -30.0)
    assert "collapsed below the recent median -4.905 (beyond 3 x its spread 2.6" in reason, reason
    without = SpikeDetector(RollbackSettings(kl_window=6, reward_window=6, reward_spread=None))
    for step, r in enumerate(window, start=1):
        without.record(step, 0.0005, r)
    assert "collapsed" in without.judge(0.0007, -10.11)  # the rule before: the drop alone
    flat = SpikeDetector(RollbackSettings(kl_window=3, reward_window=3))
    for step in (1, 2, 3):
        flat.record(step, 0.0005, 4.0)
    assert "collapsed" in flat.judge(0.0007, 1.0)
