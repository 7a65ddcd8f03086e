"""GRPO rollouts with each distinct prompt processed once: same tokens as plain generate, fewer prompt passes."""

import pytest
import torch

from rubricrl.inference.models import build_tiny_model
from rubricrl.train.shared_prefill import share_prefill, unshare_prefill


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = build_tiny_model(tmp_path_factory.mktemp("tiny") / "m", hidden_size=64, seed=1)
    return AutoModelForCausalLM.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)


def _batch(tok, texts):
    rows = [tok(t)["input_ids"] for t in texts]
    width, pad = max(map(len, rows)), tok.pad_token_id
    ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows])
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    return ids, mask


def _generate(model, ids, mask, shared: bool, **config):
    from transformers import GenerationConfig

    (share_prefill if shared else unshare_prefill)(model)
    tokens = []
    hook = model.model.register_forward_pre_hook(lambda _m, _a, kw: tokens.append(kw["input_ids"].numel()),
                                                 with_kwargs=True)
    try:
        torch.manual_seed(3)
        out = model.generate(input_ids=ids, attention_mask=mask, generation_config=GenerationConfig(
            max_new_tokens=10, eos_token_id=None, pad_token_id=model.config.pad_token_id, **config))
    finally:
        hook.remove()
        unshare_prefill(model)
    return out, tokens


LONG = "the quick brown fox jumps over the lazy dog again and again and again"


@pytest.mark.parametrize("config", [{"do_sample": False}, {"do_sample": True, "temperature": 0.9, "top_p": 0.95}],
                         ids=["greedy", "sampled"])
def test_same_tokens_as_plain_generate_with_repeated_left_padded_prompts(tiny, config):
    model, tok = tiny
    # GRPO's layout (each prompt num_generations times), two prompt lengths, so one of them is left-padded.
    ids, mask = _batch(tok, [LONG, LONG, "hello world", "hello world", LONG])
    plain, plain_tokens = _generate(model, ids, mask, False, **config)
    shared, shared_tokens = _generate(model, ids, mask, True, **config)
    assert torch.equal(plain, shared)
    width = ids.size(1)
    # Plain: all 5 rows' prompts, then 5 tokens a step. Shared: the 2 distinct prompts (but their last token),
    # then the 5 last prompt tokens, then the same decode steps.
    assert plain_tokens[0] == 5 * width
    assert shared_tokens[0] == 2 * (width - 1) and shared_tokens[1] == 5
    assert shared_tokens[2:] == plain_tokens[1:] == [5] * 9


def test_distinct_prompts_take_the_plain_path(tiny):
    model, tok = tiny
    ids, mask = _batch(tok, [LONG, "hello world", "a b c"])
    plain, plain_tokens = _generate(model, ids, mask, False, do_sample=False)
    shared, shared_tokens = _generate(model, ids, mask, True, do_sample=False)
    assert torch.equal(plain, shared) and plain_tokens == shared_tokens


def test_wrapping_is_idempotent_and_reversible(tiny):
    model, _ = tiny
    share_prefill(model)
    wrapped = model.generate
    share_prefill(model)
    assert model.generate is wrapped and getattr(wrapped, "original", None) is not None
    unshare_prefill(model)
    assert "generate" not in model.__dict__


def test_the_wrapper_counts_what_the_rollouts_sampled_and_not_greedy_calls(tiny):
    """GRPO's tokens/s (metrics/grpo.json rollout_tokens_per_s) come from here: sampled calls only (the hack monitor
    decodes greedily through the same model), padding after an early end left out."""
    from transformers import GenerationConfig

    from rubricrl.train.shared_prefill import rollout_stats

    model, tok = tiny
    ids, mask = _batch(tok, [LONG, LONG, "hello world", "hello world"])
    share_prefill(model)
    try:
        pad = model.config.pad_token_id
        model.generate(input_ids=ids, attention_mask=mask, generation_config=GenerationConfig(
            max_new_tokens=6, do_sample=False, eos_token_id=None, pad_token_id=pad))
        assert rollout_stats(model)["sequences"] == 0
        torch.manual_seed(0)
        out = model.generate(input_ids=ids, attention_mask=mask, generation_config=GenerationConfig(
            max_new_tokens=6, do_sample=True, eos_token_id=None, pad_token_id=pad))
        stats = rollout_stats(model)
        new = out[:, ids.size(1):]
        assert stats["sequences"] == 4 and stats["new_tokens"] == int((new != pad).sum()) > 0
        assert stats["seconds"] > 0
    finally:
        unshare_prefill(model)
    assert rollout_stats(model) == {"sequences": 0, "new_tokens": 0, "seconds": 0.0}
