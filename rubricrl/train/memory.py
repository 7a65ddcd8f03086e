"""Training memory per sequence, and GRPO's micro-batch sized to the card.

What autograd keeps for backward in a forward of a Llama or Qwen2 decoder under TRL 1.16 (sdpa attention, TRL's
fused LM head), counted with `torch.autograd.graph.saved_tensors_hooks` (tests/train/test_memory.py recounts it on
tiny models of both architectures; benchmarks/grpo_memory.py on SmolLM2's own shape), per token and per layer, in
fp32 floats:

    10 x hidden + 4 x intermediate + attention heads + 2 + sequence length

(the norms' inputs and outputs, q, k and v expanded to every head, the attention output, the MLP's gate, up, act
and product; the heads' log-sum-exp; the norms' variances; a row of the padding mask). Grouped-query attention
saves no less: k and v are expanded before attention (exact where there are two or more KV heads; with a single one
up to 7% less is kept). Under bf16 autocast 0.82 of it was measured (fp32 copies are
kept beside the casts), so fp32 is the bound for both. With gradient checkpointing a layer keeps only its input
(`hidden` floats a token) and recomputes the rest in backward, one layer at a time. Either way backward needs one
layer's full set again while it runs (recomputed, or the gradients of the saved set), counted here once more.

The LM head keeps no logits: TRL's `ChunkedLogProbFunction` (trl/kernels/chunked_logprob.py) projects the scored
positions (the completion's, on a GPU and, patched, on the CPU: rubricrl.train.trl_patches) in tiles of at most
4,096 positions x 32,768 vocabulary rows. While it runs it holds up to `HEAD_COPIES` fp32 buffers of a tile's size
(on the CPU, where the tile is folded in torch ops; the GPU's Triton kernel holds fewer), so the head adds at most
6 GiB whatever the micro-batch. benchmarks/grpo_memory.py counts a SmolLM2-shaped micro-step's peak of allocated
tensor storage on the CPU (every op, backward's included) against `step_bytes`, which bounds it.

A GRPO step's completions (`grpo.step_completions`, one generation round) are split into micro-batches: `auto`
takes the largest divisor of the step whose sequences fit `FRACTION` of the card's free memory after the policy's
weights, gradients and Adam state and the reference model. Off a GPU `auto` is the CPU default (4), like the
generation batches (rubricrl/inference/batching.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

FLOAT = 4  # bytes: fp32, the bound for bf16 autocast too (0.82 of it measured)
FRACTION = 0.6  # of the free memory, as the generation batches: the allocator's fragmentation and the rest
HEAD_POSITIONS, HEAD_VOCAB = 4096, 32768  # TRL's fused LM head: a tile's positions and vocabulary rows
HEAD_COPIES = 12  # tile-sized fp32 buffers the head may hold while it runs (an upper bound of the CPU's peaks)
CPU_MICRO_BATCH = 4  # `auto` off a GPU: the CPU default's micro-batch
TRAINED = 16  # bytes a trained parameter in fp32 with AdamW: weights, gradients, two moments
FROZEN = FLOAT  # a frozen fp32 model (GRPO's reference)
MIB = 2**20


def _shape(config) -> tuple[int, int, int, int]:
    cfg = getattr(config, "text_config", None) or config
    hidden = cfg.hidden_size
    return (hidden, getattr(cfg, "intermediate_size", None) or 4 * hidden, cfg.num_attention_heads,
            cfg.num_hidden_layers)


def layer_floats(config, tokens: int) -> int:
    """fp32 floats one layer keeps for backward per token of a `tokens`-long sequence, without checkpointing."""
    hidden, inter, heads, _ = _shape(config)
    return 10 * hidden + 4 * inter + heads + 2 + tokens


def saved_bytes(config, tokens: int, checkpointing: bool, dtype_bytes: int = FLOAT) -> int:
    """What autograd keeps for backward over one sequence of `tokens` (every layer); `dtype_bytes` 2 for a model
    whose weights are bf16 (DeepSpeed's bf16), where the activations are too."""
    hidden, _, _, layers = _shape(config)
    per_layer = hidden if checkpointing else layer_floats(config, tokens)
    return tokens * layers * per_layer * dtype_bytes


def sequence_bytes(config, tokens: int, checkpointing: bool, dtype_bytes: int = FLOAT) -> int:
    """The peak one sequence adds to a training micro-step: what is saved, plus one layer's full set while backward
    runs through it."""
    return saved_bytes(config, tokens, checkpointing, dtype_bytes) + tokens * layer_floats(config, tokens) * dtype_bytes


def head_bytes(config, positions: int) -> int:
    """What TRL's fused LM head holds while it scores `positions` positions (the micro-batch's labelled tokens)."""
    cfg = getattr(config, "text_config", None) or config
    return HEAD_COPIES * min(positions, HEAD_POSITIONS) * min(cfg.vocab_size, HEAD_VOCAB) * FLOAT


def step_bytes(config, micro: int, tokens: int, scored: int, checkpointing: bool, dtype_bytes: int = FLOAT) -> int:
    """A micro-step's peak over the weights: `micro` sequences of `tokens`, `scored` of them scored a sequence."""
    return micro * sequence_bytes(config, tokens, checkpointing, dtype_bytes) + head_bytes(config, micro * scored)


def state_bytes(n_params: int, reference: bool) -> int:
    """The policy trained with AdamW in fp32 (weights, gradients, two moments) and a frozen fp32 reference."""
    return n_params * (TRAINED + (FROZEN if reference else 0))


def largest_divisor(n: int, at_most: int) -> int:
    """The largest divisor of n that is at most `at_most` (at least 1)."""
    return max(d for d in range(1, max(1, min(n, at_most)) + 1) if n % d == 0)


@dataclass(frozen=True)
class MicroBatchPlan:
    """How a GRPO step's completions are split, and on what memory figures that was decided."""

    micro_batch: int
    grad_accum: int
    step_completions: int
    sized: str  # "card" (auto on a GPU), "cpu default" (auto elsewhere) or "given"
    sequence_tokens: int | None = None  # the longest prompt + max_completion_length
    sequence_mib: float | None = None  # sequence_bytes of one such sequence
    step_mib: float | None = None  # step_bytes of the chosen micro-batch
    state_mib: float | None = None  # policy + optimizer + reference
    free_mib: float | None = None  # the card's free memory before the trainer loaded anything (less vLLM's share)
    checkpointing: bool = False
    fits: bool = True  # False: not even one sequence fits the estimate (the micro-batch is 1 anyway)

    def to_dict(self) -> dict:
        return asdict(self)


def plan_micro_batch(step_completions: int, free_bytes: int | None = None, config=None, tokens: int = 0,
                     scored: int = 0, checkpointing: bool = False, n_params: int = 0,
                     reference: bool = False) -> MicroBatchPlan:
    """The micro-batch for a step of `step_completions` sequences of `tokens` (`scored` of them the completion): on
    a card with `free_bytes` free, the largest divisor of the step whose step_bytes fit FRACTION of it beside the
    weights and optimizer (1 when none does); without one (None), the CPU default's."""
    if free_bytes is None:
        micro = largest_divisor(step_completions, CPU_MICRO_BATCH)
        return MicroBatchPlan(micro, step_completions // micro, step_completions, "cpu default",
                              checkpointing=checkpointing)
    state = state_bytes(n_params, reference)
    room = free_bytes * FRACTION - state
    fits = [d for d in range(1, step_completions + 1) if step_completions % d == 0
            and step_bytes(config, d, tokens, scored, checkpointing) <= room]
    micro = max(fits, default=1)
    return MicroBatchPlan(micro, step_completions // micro, step_completions, "card", tokens,
                          round(sequence_bytes(config, tokens, checkpointing) / MIB, 1),
                          round(step_bytes(config, micro, tokens, scored, checkpointing) / MIB, 1),
                          round(state / MIB, 1), round(free_bytes / MIB, 1), checkpointing, bool(fits))


def peak_memory_mib() -> dict:
    """This process's peak so far: the resident set's high-water mark and the CUDA allocator's (when a GPU was used).
    The mark is /proc's VmHWM where there is one: ru_maxrss keeps the parent's across fork and exec on Linux."""
    import resource
    import sys
    from pathlib import Path

    try:
        line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith("VmHWM:"))
        rss = int(line.split()[1]) * 1024
    except (OSError, StopIteration, ValueError):
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)
    out = {"rss_mib": round(rss / MIB, 1)}
    torch = sys.modules.get("torch")  # never imported: no GPU was used
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        out["gpu_allocated_mib"] = round(torch.cuda.max_memory_allocated() / MIB, 1)
        out["gpu_reserved_mib"] = round(torch.cuda.max_memory_reserved() / MIB, 1)
    return out


def measure_micro_step(config, micro: int, tokens: int, scored: int, checkpointing: bool, around=None) -> int:
    """Bytes autograd keeps for backward in one GRPO-like micro-step, counted with saved-tensor hooks (parameters left
    out): a random model of `config` with TRL's fused LM head, `micro` sequences of `tokens` (the first left-padded by
    a quarter, the last `scored` scored), forward then backward, both inside the context manager `around` if given
    (benchmarks/grpo_memory.py counts the allocated peak there). What tests/train/test_memory.py checks the formula
    against, and the benchmark measures."""
    from contextlib import nullcontext

    import torch
    from transformers import AutoModelForCausalLM
    from trl.trainer.utils import add_fused_lm_head

    from rubricrl.train import trl_patches

    trl_patches.apply()  # the head scores the completion's positions only, as on a GPU and in the stage
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
    add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    model.train()
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    ids = torch.randint(0, config.vocab_size, (micro, tokens))
    mask = torch.ones_like(ids)
    mask[0, : tokens // 4] = 0
    labels = ids.masked_fill(mask == 0, -100)
    labels[:, :-scored] = -100
    kept = {}

    def pack(t):
        storage = t.untyped_storage()
        kept[storage.data_ptr()] = storage.nbytes()
        return t

    with around if around is not None else nullcontext():
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
        out.loss.backward()
        del out
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    return sum(n for ptr, n in kept.items() if ptr not in params)
