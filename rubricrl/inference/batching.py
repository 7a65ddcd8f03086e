"""Generation batch sizes: a number, or `auto`, sized to the memory the card has free.

`auto` on a CUDA device: as many sequences as the free memory (`torch.cuda.mem_get_info`) holds at `FRACTION`,
each costing its KV cache for prompt + new tokens (layers x 2 x KV heads x head dim x dtype bytes a token), the
prefill's MLP activations of its prompt, and one step's fp32 logits; capped at `CAP` sequences. Everywhere else
(the CPU, llama.cpp, a model on no device) `auto` is the CPU default the caller names, so the CPU default's numbers
do not change. Batches count prompts: a prompt with k returned sequences costs k sequences.
"""

from __future__ import annotations

from typing import Literal, Union

AUTO = "auto"
BatchSize = Union[int, Literal["auto"]]
CAP = 512  # sequences decoding together: plain generate of SmolLM2 on an H200 peaked at 512 (issue 35: 6,074 tok/s)
FRACTION = 0.6  # of the free memory: the rest for the allocator's fragmentation and what else the stage holds


def per_sequence_bytes(config, tokens: int, prompt_tokens: int, dtype_bytes: int) -> int:
    """The memory one sequence of `tokens` (of which `prompt_tokens` prompt) needs while it decodes."""
    cfg = getattr(config, "text_config", None) or config
    heads = cfg.num_attention_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    kv_heads = getattr(cfg, "num_key_value_heads", None) or heads
    kv = 2 * cfg.num_hidden_layers * kv_heads * head_dim * dtype_bytes * tokens
    inter = getattr(cfg, "intermediate_size", None) or 4 * cfg.hidden_size
    prefill = prompt_tokens * (3 * inter + 4 * cfg.hidden_size) * dtype_bytes  # one layer's at a time
    logits = 2 * cfg.vocab_size * 4
    return kv + prefill + logits


def fit(free_bytes: int, per_sequence: int, returns: int = 1, cap: int = CAP, fraction: float = FRACTION) -> int:
    """Prompts per batch: sequences that fit `fraction` of the free memory (at most `cap`), over `returns`."""
    sequences = min(cap, int(free_bytes * fraction) // max(1, per_sequence))
    return max(1, sequences // max(1, returns))


def cpu_batch(setting: BatchSize, cpu_default: int) -> int:
    """The batch where no card is sized (CPU, llama.cpp): the number given, `auto` the CPU default."""
    return cpu_default if setting == AUTO else int(setting)


def generation_batch(setting: BatchSize, model, prompt_tokens: int, max_new_tokens: int, returns: int = 1,
                     cpu_default: int = 8) -> int:
    """Prompts per generate call for this model: `setting`, or for `auto` what the card's free memory holds."""
    if setting != AUTO:
        return int(setting)
    import torch

    param = next(model.parameters(), None)
    if param is None or param.device.type != "cuda":
        return cpu_default
    free, _ = torch.cuda.mem_get_info(param.device)
    per = per_sequence_bytes(model.config, prompt_tokens + max_new_tokens, prompt_tokens, param.element_size())
    return fit(free, per, returns)
