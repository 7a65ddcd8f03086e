"""One targeted fix to TRL 1.16 for CPU training: score only the labelled positions in the fused LM head.

TRL's SFT and GRPO trainers project the hidden states through the LM head with `fused_lm_head=True`
(trl/trainer/utils.py, `add_fused_lm_head`). On CUDA/XPU it scores only the positions whose label is not
-100 (`compact`); everywhere else it scores every position, a choice made for XLA devices where a changing
number of positions recompiles the graph. On eager CPU that reason does not hold and the cost is real: SFT
labels only the answer (~80 of ~540 tokens) and GRPO only the completion (~110 of ~570), yet the projection
onto SmolLM2's 49,152-token vocabulary, forward and backward, ran over every prompt and padding position: a
third of an SFT step here (py-spy). The results are the same either way (the unlabelled positions are
zeroed afterwards); tests/train/test_trl_patches.py checks loss and gradients against the unpatched path.

`apply()` is idempotent and changes nothing on CUDA/XPU (already compact) or on a TRL without the hook.
"""

from __future__ import annotations

_PATCHED = "_rubricrl_compact_on_cpu"


def apply() -> bool:
    """Make the fused LM head compact on CPU; True when the hook exists (patched now or before)."""
    try:
        from trl.trainer import utils
    except ImportError:
        return False
    original = getattr(utils, "_use_triton", None)
    if original is None:
        return False
    if getattr(original, _PATCHED, False):
        return True

    def compact(device) -> bool:
        # Read only by add_fused_lm_head's `compact` decision; the kernel choice uses its own binding.
        return device.type == "cpu" or original(device)

    setattr(compact, _PATCHED, True)
    compact.original = original
    utils._use_triton = compact
    return True


def revert() -> None:
    """Undo apply() (tests compare both paths)."""
    from trl.trainer import utils

    current = getattr(utils, "_use_triton", None)
    if getattr(current, _PATCHED, False):
        utils._use_triton = current.original
