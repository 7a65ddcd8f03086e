"""The non-finite guard on real trainers (SFT, GRPO, GKD): a NaN loss is forced at chosen steps through a forward
hook on the final norm, so the gradients the optimizer would apply are NaN. The guard skips that update (the weights
stay finite), logs it, tags MLflow; too many in a row stop SFT and distillation and roll GRPO back. The control
runs the same injection with the guard taken out: the weights turn NaN, so the tests can fail."""

from __future__ import annotations

import mlflow
import pytest
import torch
from safetensors.torch import load_file
from transformers import TrainerCallback

from rubricrl.config import DistillParams, SFTSettings
from rubricrl.core.errors import TrainingError
from rubricrl.inference.models import build_tiny_model
from rubricrl.release.distill import gkd_train
from rubricrl.train import nonfinite
from rubricrl.train.grpo import train_grpo
from rubricrl.train.sft import train_sft
from tests.train_helpers import rubric_reward, tiny_settings, tiny_tasks


class NaNLoss(TrainerCallback):
    """The final norm's output times NaN during the optimizer steps in `steps` (1-based, as the guard counts), so
    the hidden states, the logits and the loss are NaN (the LM head itself is bypassed by TRL's compact head)."""

    def __init__(self, *steps: int):
        self.steps, self.hook = set(steps), None

    def on_step_begin(self, args, state, control, model=None, **kwargs):
        if state.global_step + 1 in self.steps and self.hook is None:
            self.hook = model.model.norm.register_forward_hook(lambda m, i, out: out * float("nan"))

    def on_step_end(self, args, state, control, **kwargs):
        if self.hook is not None:
            self.hook.remove()
            self.hook = None


class NaNGrad(TrainerCallback):
    """A NaN in one gradient just before the guard looks, once, at optimizer step `step` (GRPO: a NaN loss would
    break its own sampling first). Passed to train_grpo, it runs before the guard."""

    def __init__(self, step: int):
        self.step, self.done = step, False

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        if state.global_step + 1 == self.step and not self.done:
            next(p for p in model.parameters() if p.grad is not None).grad.view(-1)[0] = float("nan")
            self.done = True


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def finite(folder) -> bool:
    return all(torch.isfinite(t).all() for t in load_file(folder / "model.safetensors").values())


def test_sft_skips_a_nonfinite_update_logs_and_tags_it(tiny, tmp_path, capfd):
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    with mlflow.start_run() as run:
        out = train_sft(tiny, tiny_tasks(), tmp_path / "sft", SFTSettings(max_steps=3, per_device_batch_size=2,
                                                                         learning_rate=1e-2), callbacks=[NaNLoss(2)])
    assert out.skipped_updates == (2,) and out.steps == 3
    assert finite(out.model_dir)
    assert "sft: non-finite gradient at step 2: update skipped (1 in a row, 1 in this run)" in capfd.readouterr().err
    assert mlflow.get_run(run.info.run_id).data.tags["rubricrl.nonfinite.sft"] == "2"


def test_without_the_guard_the_same_nan_reaches_the_weights(tiny, tmp_path, monkeypatch):
    monkeypatch.setattr(nonfinite.NonFiniteGuard, "on_pre_optimizer_step", lambda *a, **k: None)
    out = train_sft(tiny, tiny_tasks(), tmp_path / "sft", SFTSettings(max_steps=3, per_device_batch_size=2,
                                                                     learning_rate=1e-2), callbacks=[NaNLoss(2)])
    assert not finite(out.model_dir)


def test_sft_stops_after_too_many_nonfinite_updates_in_a_row(tiny, tmp_path):
    settings = SFTSettings(max_steps=4, per_device_batch_size=2, learning_rate=1e-2, max_skipped_updates=1)
    with pytest.raises(TrainingError, match=r"sft: non-finite gradient at step 3: 2 non-finite updates in a row "
                                            r"\(limit 1\)\. Train in fp32"):
        train_sft(tiny, tiny_tasks(), tmp_path / "sft", settings, callbacks=[NaNLoss(2, 3)])
    assert not (tmp_path / "sft").exists()  # nothing published
    # Apart, the same two bad steps are each skipped and training finishes.
    out = train_sft(tiny, tiny_tasks(), tmp_path / "sft", settings, callbacks=[NaNLoss(1, 3)])
    assert out.skipped_updates == (1, 3) and finite(out.model_dir)


@pytest.mark.slow
def test_grpo_rolls_back_on_a_nonfinite_update(tiny, tmp_path):
    settings = tiny_settings(max_steps=4, save_steps=1, max_skipped_updates=0, general_share=0.0)
    result = train_grpo(tiny, tiny_tasks(), tmp_path / "run", settings, rubric_reward(), callbacks=[NaNGrad(3)])
    assert result["global_step"] == 4 and result["skipped_updates"] == [3]
    [rollback] = result["rollbacks"]
    assert rollback["kind"] == "nonfinite" and rollback["step"] == 3
    assert rollback["reason"].startswith("non-finite gradient at step 3")
    assert rollback["restored_step"] == 1  # the newest checkpoint at or before step 3 - 2
    assert finite(tmp_path / "run" / "model")


def test_distillation_skips_then_stops(tiny, tmp_path):
    convs = [[{"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": f"answer {i}"}]
             for i in range(4)]
    cfg = DistillParams(steps=3, batch_size=2, max_length=64, max_new_tokens=8, pool=4, n_prompts=4,
                        learning_rate=1e-2)
    stats = gkd_train(tiny, tiny, convs, tmp_path / "ok", cfg, callbacks=[NaNLoss(2)])
    assert stats["skipped_updates"] == [2] and finite(tmp_path / "ok")
    with pytest.raises(TrainingError, match="distill: non-finite gradient at step 1"):
        gkd_train(tiny, tiny, convs, tmp_path / "bad", cfg.model_copy(update={"max_skipped_updates": 0}),
                  callbacks=[NaNLoss(1)])


def test_gradients_finite_sees_nan_and_inf_and_no_gradients():
    layer = torch.nn.Linear(2, 2)
    assert nonfinite.gradients_finite(layer) is None
    layer(torch.ones(1, 2)).sum().backward()
    assert nonfinite.gradients_finite(layer) is True
    layer.bias.grad[0] = float("inf")
    assert nonfinite.gradients_finite(layer) is False
