"""GRPO rollouts through HF generate, with and without the shared prefill (rubricrl.train.shared_prefill),
side by side in one run on the same model, prompts, seeds and threads.

    python benchmarks/shared_prefill.py                       # outputs/models/sft, 4 train prompts x 4 completions
    python benchmarks/shared_prefill.py --prompts 6 --k 8

Each prompt is repeated k times in one batch, as TRL's GRPOTrainer hands it to generate; the two variants
alternate per prompt so drift of the machine hits both. Prints seconds per batch, the speed-up, and whether
the sampled tokens are identical (the prefill draws no random numbers, so they should be, up to rounding).
Use an idle machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rubricrl.inference.generate import load_for_generation, prompt_texts  # noqa: E402
from rubricrl.core.taskfile import load_tasks  # noqa: E402
from rubricrl.train.shared_prefill import share_prefill, unshare_prefill  # noqa: E402


def main() -> None:
    import torch
    from transformers import GenerationConfig

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="outputs/models/sft")
    ap.add_argument("--tasks-file", default="data/train.jsonl")
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--temperature", type=float, default=0.9)
    args = ap.parse_args()

    model, tok = load_for_generation(args.model, device="cpu")
    tasks = load_tasks(args.tasks_file)[: args.prompts]
    config = GenerationConfig(do_sample=True, temperature=args.temperature, top_p=1.0, top_k=0,
                              max_new_tokens=args.max_new_tokens, pad_token_id=tok.pad_token_id,
                              eos_token_id=model.generation_config.eos_token_id)
    times = {"plain": 0.0, "shared": 0.0}
    same = prompt_tokens = 0
    for i, text in enumerate(prompt_texts(tok, tasks)):
        ids = tok([text] * args.k, add_special_tokens=False, return_tensors="pt")
        prompt_tokens += ids["input_ids"].shape[1]
        outs = {}
        for variant in (("plain", "shared") if i % 2 == 0 else ("shared", "plain")):
            (share_prefill if variant == "shared" else unshare_prefill)(model)
            torch.manual_seed(i)
            start = time.perf_counter()
            with torch.inference_mode():
                outs[variant] = model.generate(**ids, generation_config=config)
            times[variant] += time.perf_counter() - start
        unshare_prefill(model)
        same += outs["plain"].shape == outs["shared"].shape and torch.equal(outs["plain"], outs["shared"])
    n = len(tasks)
    print(f"{n} prompts (mean {prompt_tokens / n:.0f} tokens) x {args.k} completions of up to {args.max_new_tokens} "
          f"tokens, {torch.get_num_threads()} threads")
    print(f"plain generate : {times['plain'] / n:6.2f} s per prompt")
    print(f"shared prefill : {times['shared'] / n:6.2f} s per prompt")
    print(f"speed-up       : {times['plain'] / times['shared']:.2f}x; identical samples for {same}/{n} prompts")


if __name__ == "__main__":
    main()
