"""GRPO rollouts with HF generate: process each distinct prompt once, not once per completion.

TRL's GRPOTrainer repeats every prompt `num_generations` times in the batch it hands to `model.generate`
(transformers path, no vLLM), and generate runs the prompt through the model for every copy: on the CPU
default a micro-batch is one ~460-token prompt x 4 completions, so three of the four prompt passes are
repeated work. `share_prefill(model)` wraps that model's `generate`: the distinct rows of the batch run once
(all tokens but the last), their KV cache is copied to every row that repeats them, and HF generate goes on
from there exactly as it would have (it processes only the tokens the cache lacks). Sampling is unchanged:
the prefill draws no random numbers and the logits match up to floating-point rounding.
tests/train/test_shared_prefill.py checks greedy outputs against plain generate and counts the prompt tokens.

Only the transformers path goes through here: vLLM (the GPU profile) caches prefixes itself.
"""

from __future__ import annotations

import functools
import inspect
import time

_WRAPPED = "_rubricrl_shared_prefill"


def share_prefill(model) -> bool:
    """Wrap `model.generate` (an instance attribute; idempotent). True when wrapped now or before."""
    if getattr(model.generate, _WRAPPED, False):
        return True
    original = model.generate

    @functools.wraps(original)
    def generate(*args, **kwargs):
        started = time.perf_counter()
        out = generate_sharing_prompts(model, original, *args, **kwargs)
        config = kwargs.get("generation_config")
        if kwargs.get("do_sample", getattr(config, "do_sample", False)):  # the rollouts, not the monitor's greedy
            ids = kwargs.get("input_ids", args[0] if args else None)
            seqs = getattr(out, "sequences", out)
            pad = getattr(config, "pad_token_id", None)
            new = seqs[:, ids.size(1):] if ids is not None else seqs[:, :0]
            generate.rollouts["sequences"] += int(seqs.size(0))
            generate.rollouts["new_tokens"] += int((new != pad).sum() if pad is not None else new.numel())
            generate.rollouts["seconds"] += time.perf_counter() - started
        return out

    setattr(generate, _WRAPPED, True)
    generate.original = original
    generate.rollouts = {"sequences": 0, "new_tokens": 0, "seconds": 0.0}  # sampled calls: what GRPO generated
    model.generate = generate
    return True


def rollout_stats(model) -> dict:
    """What the wrapped generate sampled so far: sequences, new tokens (padding left out), seconds."""
    return dict(getattr(model.__dict__.get("generate"), "rollouts", {"sequences": 0, "new_tokens": 0, "seconds": 0.0}))


def unshare_prefill(model) -> None:
    """Undo share_prefill (tests compare both paths)."""
    current = model.__dict__.get("generate")
    if getattr(current, _WRAPPED, False):
        del model.generate


def generate_sharing_prompts(model, generate, input_ids=None, attention_mask=None, **kwargs):
    """Call `generate` with the KV cache of each distinct (left-padded) prompt computed once and shared."""
    import torch
    from transformers import DynamicCache

    name = _cache_kwarg(model)
    if (input_ids is None or input_ids.dim() != 2 or input_ids.size(1) < 2 or kwargs.get(name) is not None
            or kwargs.get("past_key_values") is not None or kwargs.get("inputs_embeds") is not None):
        return generate(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    rows = torch.cat([input_ids, attention_mask.to(input_ids.dtype)], dim=1)
    unique, inverse = torch.unique(rows, dim=0, return_inverse=True)
    if unique.size(0) == rows.size(0):
        return generate(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
    width = input_ids.size(1)
    ids, mask = unique[:, :width], unique[:, width:].to(attention_mask.dtype)
    # Positions as generate computes them for left padding: count only real tokens.
    positions = (mask.long().cumsum(-1) - 1).clamp(min=0)
    cache = DynamicCache(config=model.config)
    with torch.no_grad():
        model(input_ids=ids[:, :-1], attention_mask=mask[:, :-1], position_ids=positions[:, :-1],
              use_cache=True, logits_to_keep=1, **{name: cache})
    cache.batch_select_indices(inverse.to(input_ids.device))
    return generate(input_ids=input_ids, attention_mask=attention_mask, **{name: cache}, **kwargs)


def _cache_kwarg(model) -> str:
    """transformers renamed `past_key_values` to `cache` (5.2x); the older name still works there, with a warning."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "cache" if "cache" in inspect.signature(type(base).forward).parameters else "past_key_values"
