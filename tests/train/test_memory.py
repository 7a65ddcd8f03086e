"""rubricrl.train.memory: the per-sequence training memory against what autograd really keeps, and GRPO's
micro-batch split (auto) against the card's memory."""

from __future__ import annotations

import pytest

from rubricrl.config import GRPOSettings
from rubricrl.train.memory import (
    CPU_MICRO_BATCH, FLOAT, FRACTION, head_bytes, largest_divisor, layer_floats, measure_micro_step, plan_micro_batch,
    saved_bytes, sequence_bytes, state_bytes, step_bytes,
)

TOKENS, COMPLETION = 64, 16


def _config(arch: str, layers: int, **shape):
    from transformers import LlamaConfig, Qwen2Config

    cls = {"llama": LlamaConfig, "qwen2": Qwen2Config}[arch]
    return cls(num_hidden_layers=layers, **{"vocab_size": 512, "max_position_embeddings": 256, **shape})


def _kept_for_backward(config, checkpointing: bool) -> int:
    """A micro-batch of two sequences of TOKENS, the last COMPLETION scored (as GRPO's)."""
    return measure_micro_step(config, 2, TOKENS, COMPLETION, checkpointing)


SHAPES = [
    ("llama", dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=4)),
    ("llama", dict(hidden_size=96, intermediate_size=256, num_attention_heads=6, num_key_value_heads=2)),  # GQA
    ("qwen2", dict(hidden_size=64, intermediate_size=192, num_attention_heads=4, num_key_value_heads=1)),
]


@pytest.mark.parametrize("checkpointing", [False, True], ids=["full", "checkpointed"])
@pytest.mark.parametrize("arch,shape", SHAPES, ids=lambda v: v if isinstance(v, str) else str(v["hidden_size"]))
def test_a_layer_keeps_what_the_formula_says(arch, shape, checkpointing):
    """One more layer adds saved_bytes' per-layer share (two sequences), with and without checkpointing: exactly, or
    (a single KV head: k and v expanded as views, the mask not kept) up to 7% less; the whole forward's keep stays
    under sequence_bytes (its extra layer covers the embedding, the final norm and the head)."""
    two, three = (_kept_for_backward(_config(arch, n, **shape), checkpointing) for n in (2, 3))
    estimate = 2 * saved_bytes(_config(arch, 1, **shape), TOKENS, checkpointing)
    if shape["num_key_value_heads"] > 1 or checkpointing:
        assert three - two == estimate
    else:
        assert 0.93 * estimate <= three - two < estimate
    assert three <= 2 * sequence_bytes(_config(arch, 3, **shape), TOKENS, checkpointing)


def test_checkpointing_keeps_a_hidden_vector_a_token_a_layer():
    config = _config("llama", 30, hidden_size=576, intermediate_size=1536, num_attention_heads=9,
                     num_key_value_heads=3)  # SmolLM2-135M's shape
    assert saved_bytes(config, 736, True) == 736 * 30 * 576 * FLOAT
    assert layer_floats(config, 736) == 10 * 576 + 4 * 1536 + 9 + 2 + 736
    assert saved_bytes(config, 736, False) / saved_bytes(config, 736, True) > 20


SMOL = dict(hidden_size=576, intermediate_size=1536, num_attention_heads=9, num_key_value_heads=3, vocab_size=49152)


def test_the_plan_on_an_h200_picks_32_of_256_and_128_would_not_fit():
    """The one-GPU profile on an H200's ~140 GB: SmolLM2, the longest train prompt (904 tokens) + 128 completion
    tokens, 256 completions a step: 32 a micro-batch; 128, which ran out of memory there (issue 35), needs more than
    the card has; with gradient checkpointing the whole step fits."""
    config = _config("llama", 30, **SMOL)
    free, n, tokens = 140 * 10**9, 134_515_008, 904 + 128
    plan = plan_micro_batch(256, free, config, tokens, 128, False, n, True)
    assert (plan.micro_batch, plan.grad_accum, plan.sized, plan.fits) == (32, 8, "card", True)
    assert step_bytes(config, 128, tokens, 128, False) > free
    assert step_bytes(config, 32, tokens, 128, False) + state_bytes(n, True) <= free * FRACTION
    assert step_bytes(config, 64, tokens, 128, False) + state_bytes(n, True) > free * FRACTION
    checkpointed = plan_micro_batch(256, free, config, tokens, 128, True, n, True)
    assert checkpointed.micro_batch == 256 and checkpointed.grad_accum == 1


def test_the_head_holds_tiles_up_to_4096_positions():
    config = _config("llama", 30, **SMOL)
    assert head_bytes(config, 256) == 12 * 256 * 32768 * FLOAT
    assert head_bytes(config, 4096) == head_bytes(config, 10**6) == 6 * 2**30


def test_a_smaller_card_gets_a_smaller_divisor_and_no_room_gets_one():
    config = _config("llama", 30, **SMOL)
    n, tokens = 134_515_008, 904 + 128
    h100 = plan_micro_batch(256, 79 * 10**9, config, tokens, 128, False, n, True)
    assert h100.micro_batch == 16 and h100.micro_batch * h100.grad_accum == 256
    assert plan_micro_batch(24, 79 * 10**9, config, tokens, 128, False, n, True).micro_batch == 24  # a divisor 256 lacks
    tight = plan_micro_batch(256, 4 * 10**9, config, tokens, 128, False, n, True)
    assert tight.micro_batch == 1 and not tight.fits  # nothing fits: 1, and the plan says so


def test_off_a_gpu_auto_is_the_cpu_default():
    plan = plan_micro_batch(8)
    assert (plan.micro_batch, plan.grad_accum, plan.sized) == (CPU_MICRO_BATCH, 2, "cpu default")
    assert plan_micro_batch(6).micro_batch == 3  # a divisor of the step
    assert largest_divisor(7, 4) == 1 and largest_divisor(12, 100) == 12


def test_grpo_settings_refuse_a_split_that_does_not_add_up():
    ok = GRPOSettings(per_device_batch_size="auto", grad_accum="auto", step_completions=256, num_generations=8)
    assert ok.split(64).per_device_batch_size == 64 and ok.split(64).grad_accum == 4
    assert GRPOSettings(per_device_batch_size=4, grad_accum=2, step_completions=8).split(4).grad_accum == 2
    assert GRPOSettings().split(4).step_completions == 8
    for bad, said in [({"per_device_batch_size": "auto", "grad_accum": "auto"}, "step_completions, which is null"),
                      ({"per_device_batch_size": "auto", "step_completions": 8}, "set both auto"),
                      ({"per_device_batch_size": 4, "grad_accum": 2, "step_completions": 16}, "make them agree"),
                      ({"per_device_batch_size": "auto", "grad_accum": "auto", "step_completions": 10},
                       "not a multiple of num_generations=4"),
                      ({"per_device_batch_size": 0}, "an integer >= 1 or 'auto', got 0"),
                      ({"grad_accum": "many"}, "an integer >= 1 or 'auto', got 'many'")]:
        with pytest.raises(ValueError, match=said):
            GRPOSettings(**bad)


def test_the_peak_is_this_process_own():
    """VmHWM, not ru_maxrss: a child started from this (large) process reports its own peak, not ours."""
    import json
    import subprocess
    import sys

    code = ("import json; from rubricrl.train.memory import peak_memory_mib; a = peak_memory_mib()['rss_mib']; "
            "b = bytearray(300 * 2**20); b[::4096] = b'x' * len(b[::4096]); "
            "print(json.dumps([a, peak_memory_mib()['rss_mib']]))")
    ballast = bytearray(600 * 2**20)  # this process larger than the child will be
    ballast[::4096] = b"x" * len(ballast[::4096])
    before, after = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                              check=True).stdout)
    assert before < 600 and 300 <= after - before < 400
