"""Generation engines side by side in one run: transformers fp32 (the eval's batches) vs llama.cpp on an F16 GGUF.

    python benchmarks/generation_engines.py                          # outputs/models/sft, 16 test tasks
    python benchmarks/generation_engines.py --model outputs/grpo/model --tasks 20 --samples-tasks 6

Two workloads, each on the same model, prompts and threads, one engine after the other:
  greedy   the eval: transformers batches of --batch-size (longest prompts first), llama.cpp one prompt at a
           time, and llama.cpp with --batch-size sequences decoding together (continuous batching, the stages'
           setting); speed-ups and how many greedy answers are identical.
  samples  the rubric stage's policy samples: k completions per task at GRPO's temperature; transformers
           repeats each prompt k times in a batch, llama.cpp processes it once and reuses its KV cache.
  sampler  (--sampler) the policy sampler's batch sizes side by side on the same model and prompts: today's
           (rubric.sample_batch 2 prompts x k, the CPU default), larger batches and `auto` (the card's free
           memory on a GPU: rubricrl/inference/batching.py; the CPU default on a CPU), then llama.cpp; tokens/s
           of each and its ratio to today's. On a GPU: --sampler-batches 2,8,32,64,auto (prompts x k sequences).
Times exclude loading and the one-off GGUF conversion (printed apart). Use an idle machine: both engines
use every core.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rubricrl.inference import conversion, llamacpp  # noqa: E402
from rubricrl.inference.generate import default_threads, generate_with_stats, sample_responses  # noqa: E402
from rubricrl.core.taskfile import load_tasks  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="outputs/models/sft")
    ap.add_argument("--tasks", type=int, default=16, help="test tasks decoded greedily")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=200)
    ap.add_argument("--samples-tasks", type=int, default=6, help="val tasks sampled k times (0: skip)")
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--temperature", type=float, default=0.9)
    ap.add_argument("--out", help="also write the results as JSON here")
    ap.add_argument("--sampler", action="store_true", help="only the sampler workload (batch sizes side by side)")
    ap.add_argument("--sampler-tasks", type=int, default=8)
    ap.add_argument("--sampler-batches", default="2,8,auto", help="prompts per generate call, comma-separated")
    ap.add_argument("--sampler-tokens", type=int, default=128)
    a = ap.parse_args()
    threads = default_threads()
    if a.sampler:
        return sampler(a, threads)
    test = load_tasks("data/test.jsonl")[: a.tasks]

    start = time.perf_counter()
    gguf = conversion.gguf_for(a.model)
    convert_s = time.perf_counter() - start
    print(f"GGUF {gguf} ({gguf.stat().st_size / 2**20:.0f} MiB): {convert_s:.1f} s (0 when cached)", file=sys.stderr)

    hf, hf_stats = generate_with_stats(a.model, test, batch_size=a.batch_size, max_new_tokens=a.max_new_tokens,
                                       threads=threads, desc="transformers")
    lc, lc_stats = generate_with_stats(a.model, test, batch_size=1, max_new_tokens=a.max_new_tokens, threads=threads,
                                       desc="llama.cpp", engine="llama_cpp")
    lb, lb_stats = generate_with_stats(a.model, test, batch_size=a.batch_size, max_new_tokens=a.max_new_tokens,
                                       threads=threads, desc="llama.cpp batched", engine="llama_cpp")
    same = sum(x == y for x, y in zip(hf, lc))
    result = {"model": a.model, "threads": threads, "gguf_convert_s": round(convert_s, 1), "greedy": {
        "tasks": len(test), "transformers": hf_stats.to_dict(), "llama_cpp": lc_stats.to_dict(),
        "llama_cpp_batched": lb_stats.to_dict(),
        "speedup": round(hf_stats.seconds / lc_stats.seconds, 2), "identical": same,
        "batched_vs_one": round(lc_stats.seconds / lb_stats.seconds, 2),
        "batched_identical_to_one": sum(x == y for x, y in zip(lb, lc))}}
    if a.samples_tasks:
        val = load_tasks("data/val.jsonl")[: a.samples_tasks]
        _, hs = sample_responses(a.model, val, a.k, a.temperature, 128, threads=threads)
        _, ls = sample_responses(a.model, val, a.k, a.temperature, 128, threads=threads, engine="llama_cpp")
        result["samples"] = {"tasks": len(val), "k": a.k, "transformers": hs.to_dict(), "llama_cpp": ls.to_dict(),
                             "speedup": round(hs.seconds / ls.seconds, 2)}
    text = json.dumps(result, indent=2)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n")
    g = result["greedy"]
    print(f"greedy: llama.cpp {g['speedup']}x transformers, {same}/{len(test)} answers identical", file=sys.stderr)
    print(f"greedy: llama.cpp batched {g['batched_vs_one']}x one at a time, {g['batched_identical_to_one']}/{len(test)} "
          "answers identical", file=sys.stderr)
    if "samples" in result:
        print(f"samples: llama.cpp {result['samples']['speedup']}x transformers", file=sys.stderr)


def sampler(a, threads: int) -> None:
    """The policy sampler at each batch size, then llama.cpp, on the same prompts; tokens/s and ratio to today's."""
    import torch

    val = load_tasks("data/val.jsonl")[: a.sampler_tasks]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    rows = []
    for b in a.sampler_batches.split(","):
        batch = b if b == "auto" else int(b)
        _, st = sample_responses(a.model, val, a.k, a.temperature, a.sampler_tokens, threads=threads, device=device,
                                 prompts_per_batch=batch)
        rows.append({"engine": "transformers", "prompts_per_batch": batch, **st.to_dict()})
    if device == "cpu":
        _, st = sample_responses(a.model, val, a.k, a.temperature, a.sampler_tokens, threads=threads,
                                 engine="llama_cpp")
        rows.append({"engine": "llama_cpp", "prompts_per_batch": 1, **st.to_dict()})
    today = rows[0]["tokens_per_s"]
    for r in rows:
        r["vs_today"] = round(r["tokens_per_s"] / today, 2) if today else None
    result = {"model": a.model, "device": device, "threads": threads, "tasks": len(val), "k": a.k,
              "max_new_tokens": a.sampler_tokens, "sampler": rows}
    text = json.dumps(result, indent=2)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n")
    for r in rows:
        print(f"sampler {r['engine']:12s} prompts/batch {str(r['prompts_per_batch']):>4s}: "
              f"{r['tokens_per_s']:8.1f} tokens/s, {r['vs_today']}x today's", file=sys.stderr)


if __name__ == "__main__":
    main()
