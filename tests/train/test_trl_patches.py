"""The CPU fused-LM-head fix: only labelled positions are projected, with the same loss and gradients."""

import pytest
import torch

from rubricrl.inference.models import build_tiny_model
from rubricrl.train import trl_patches


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "m", seed=1)


def _loss_and_grads(model_dir, patched: bool, rows: list):
    from transformers import AutoModelForCausalLM
    from trl.trainer import utils

    (trl_patches.apply if patched else trl_patches.revert)()
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    utils.add_fused_lm_head(model)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, model.config.vocab_size, (3, 40), generator=g)
    mask = torch.ones_like(ids)
    mask[0, :7] = 0  # left padding
    labels = ids.masked_fill(mask == 0, -100)
    labels[:, :30] = -100  # the prompt: only the last 10 positions are the answer
    seen = utils._ChunkedLogProbFunction.apply

    def spy(hidden, *args):
        rows.append(hidden.shape[0])
        return seen(hidden, *args)

    utils._ChunkedLogProbFunction.apply = spy
    try:
        out = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
        out.loss.backward()
    finally:
        utils._ChunkedLogProbFunction.apply = seen
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return out.loss.detach(), out.log_probs.detach(), grads


def test_only_labelled_positions_are_projected_with_the_same_results(tiny):
    full_rows, compact_rows = [], []
    try:
        loss0, lp0, g0 = _loss_and_grads(tiny, False, full_rows)
        loss1, lp1, g1 = _loss_and_grads(tiny, True, compact_rows)
    finally:
        trl_patches.apply()
    assert full_rows == [3 * 39]  # every position after the shift
    assert compact_rows == [3 * 10]  # the answer only: labels 30-39, predicted from positions 29-38
    assert torch.allclose(loss0, loss1, atol=1e-6)
    assert torch.allclose(lp0, lp1, atol=1e-6)
    assert g0.keys() == g1.keys() and len(g0) > 0
    for name in g0:
        assert torch.allclose(g0[name], g1[name], atol=1e-6), name


def test_apply_is_idempotent_and_reports_the_hook():
    from trl.trainer import utils

    assert trl_patches.apply() and trl_patches.apply()
    assert utils._use_triton(torch.device("cpu")) is True
    assert utils._use_triton.original(torch.device("cpu")) is False  # TRL's own answer on CPU
    trl_patches.revert()
    assert utils._use_triton(torch.device("cpu")) is False
    trl_patches.apply()
