"""GRPO's micro-step memory: measured against rubricrl.train.memory's estimate, on SmolLM2-135M's shape.

    python benchmarks/grpo_memory.py                       # micro-batches 1, 2, 4 of 480 + 256 tokens, both modes
    python benchmarks/grpo_memory.py --micro 1 2 --tokens 368

Each case runs in a fresh process: a random model of SmolLM2-135M's architecture (30 layers, hidden 576, MLP 1,536,
9 heads, 3 KV heads, vocabulary 49,152; the weights do not change the memory), TRL's fused LM head as GRPO adds it,
then one forward + backward of `micro` sequences of `tokens` (the first row left-padded by a quarter, the last 256
tokens the completion), with and without gradient checkpointing (rubricrl.train.memory.measure_micro_step). Two
figures per case:

  kept     bytes autograd keeps for backward (saved-tensor hooks, parameters left out): exact, device-independent
  peak     the most tensor storage alive at once during forward and backward (every op counted by a dispatch mode:
           the CPU's max_memory_allocated), less the parameters' gradients left at the end (they are the optimizer
           state's share, rubricrl.train.memory.state_bytes)

beside rubricrl.train.memory's `saved_bytes` and `step_bytes` (the figure the one-GPU profile's `auto`
micro-batch is sized with; the head scores the completion only, as rubricrl.train.trl_patches makes it on the CPU),
then the micro-batch the plan picks for the one-GPU profile's step (256 completions of the longest train prompt, 904
tokens, + 128) on an H200 (140 GB free) and an H100 (79 GB). Measured on the CPU: the tensors a GPU keeps too (sdpa,
fp32); the GPU's own peak is not measured here.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SMOL = dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
            num_key_value_heads=3, vocab_size=49152, tie_word_embeddings=True, max_position_embeddings=8192)
COMPLETION = 256
MIB = 2**20


class LiveBytes:
    """The bytes of tensor storage alive at once, counted at every op (a TorchDispatchMode, so backward's ops too):
    the CPU's counterpart of CUDA's max_memory_allocated, exact and device-independent. A storage counts from the op
    that made it until the last tensor over it is gone."""

    def __init__(self):
        import weakref

        import torch
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils._pytree import tree_leaves

        counter = self
        self.now = self.peak = 0
        refs, sizes = {}, {}

        def drop(key):
            refs[key] -= 1
            if refs[key] == 0:
                counter.now -= sizes.pop(key)
                del refs[key]

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                for t in tree_leaves(out):
                    if isinstance(t, torch.Tensor) and (key := t.untyped_storage().data_ptr()):
                        if key not in refs:
                            refs[key], sizes[key] = 0, t.untyped_storage().nbytes()
                            counter.now += sizes[key]
                            counter.peak = max(counter.peak, counter.now)
                        refs[key] += 1
                        weakref.finalize(t, drop, key)
                return out

        self.mode = Mode()


def one(micro: int, tokens: int, checkpointing: bool) -> dict:
    from transformers import LlamaConfig

    from rubricrl.train.memory import measure_micro_step

    live = LiveBytes()
    kept = measure_micro_step(LlamaConfig(**SMOL), micro, tokens, COMPLETION, checkpointing, around=live.mode)
    # what is left is the parameters' gradients: the optimizer state's share (memory.state_bytes), not the step's
    return {"kept_mib": round(kept / MIB, 1), "peak_mib": round((live.peak - live.now) / MIB, 1),
            "grads_mib": round(live.now / MIB, 1)}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--micro", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--tokens", type=int, default=480 + COMPLETION)
    # the one-GPU profile's sequences: the longest train prompt (904 tokens of SmolLM2's tokenizer, the embedded
    # data's 800 train tasks) + grpo.max_completion_length 128, the completion scored
    ap.add_argument("--plan-tokens", type=int, default=904 + 128)
    ap.add_argument("--plan-scored", type=int, default=128)
    ap.add_argument("--one", nargs=3, help=argparse.SUPPRESS)  # micro tokens checkpointing: the child process
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(one(int(args.one[0]), int(args.one[1]), args.one[2] == "1")))
        return 0
    from transformers import LlamaConfig

    from rubricrl.core.tables import table
    from rubricrl.train.memory import plan_micro_batch, saved_bytes, step_bytes

    config = LlamaConfig(**SMOL)
    rows = []
    for checkpointing in (False, True):
        for micro in args.micro:
            out = subprocess.run([sys.executable, __file__, "--one", str(micro), str(args.tokens),
                                  "1" if checkpointing else "0"], capture_output=True, text=True, check=True)
            got = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append(["on" if checkpointing else "off", micro, got["kept_mib"],
                         round(micro * saved_bytes(config, args.tokens, checkpointing) / MIB, 1), got["peak_mib"],
                         round(step_bytes(config, micro, args.tokens, COMPLETION, checkpointing) / MIB, 1)])
            print(rows[-1], flush=True)
    print(f"\nSmolLM2-135M's shape, {args.tokens} tokens a sequence, fp32, CPU "
          f"({os.cpu_count()} cores):\n")
    print(table(["checkpointing", "micro-batch", "kept MiB (hooks)", "saved_bytes MiB", "peak MiB (allocated)",
                 "step_bytes MiB"], rows, digits=1))
    n_params = 134_515_008
    cards = []
    for card, free in (("H200", 140 * 10**9), ("H100", 79 * 10**9)):
        for checkpointing in (False, True):
            p = plan_micro_batch(256, free, config, args.plan_tokens, args.plan_scored, checkpointing, n_params, True)
            cards.append([card, "on" if checkpointing else "off", p.micro_batch, p.grad_accum, p.sequence_mib,
                          p.step_mib])
    print(f"\nThe plan for 256 completions a step of {args.plan_tokens} tokens ({args.plan_scored} scored):\n")
    print(table(["card (free)", "checkpointing", "micro-batch", "grad_accum", "MiB a sequence", "MiB a micro-step"],
                cards, digits=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
