"""The one generation interface over both backends (transformers: rubricrl.inference.hf; llama.cpp on an F16
GGUF: rubricrl.inference.llamacpp), over the one prompt template.

The stages call this with the defaults, so the eval and the rubric stage's policy samples follow the hardware
the profile runs on; the hack monitor decodes the model being trained where it already is.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Sequence

from rubricrl.core.taskfile import Task
from rubricrl.inference.chat import GenerationStats, chat_texts, default_threads, prompt_texts
from rubricrl.inference.hf import batched_generate, load_for_generation, placement, torch_threads

__all__ = ["GenerationStats", "chat_texts", "default_threads", "generate_responses", "generate_with_stats",
           "greedy_chat", "load_for_generation", "placement", "prompt_texts", "sample_responses"]


def resolve_engine(engine: str, device: str = "auto") -> str:
    """auto: transformers on a GPU, llama.cpp on a CPU: greedy answers of the SFT model on 16 test tasks measured
    1.99x faster with llama.cpp than HF batches of 8 on an AVX2-only host and 2.06x on an AVX-512 one
    (benchmarks/generation_engines.py; one earlier AVX-512 measurement had 0.82x, the later ones 1.17-2.06x)."""
    if engine != "auto":
        return engine
    import torch

    if device != "cpu" and torch.cuda.is_available():
        return "transformers"
    return "llama_cpp"


def generate_with_stats(model_dir: str | Path, tasks: Sequence[Task], batch_size: int = 8,
                        max_new_tokens: int = 256, threads: int | None = None, model_and_tokenizer=None,
                        device: str = "auto", precision: str | None = None,
                        desc: str | None = "generating", engine: str = "transformers") -> tuple[list[str], GenerationStats]:
    """Greedy responses for `tasks` (in input order) and timing stats.

    Prompts are sorted by token length (longest first) so each batch pads little; only the new
    tokens are decoded, special tokens skipped. `model_and_tokenizer` reuses an already loaded pair
    (as returned by load_for_generation, or a model being trained, used where it is) instead of loading
    `model_dir` on `placement(device, precision)`. engine "llama_cpp" decodes an F16 GGUF of `model_dir`
    instead, batch_size sequences together (rubricrl.inference.llamacpp; device and precision do not apply).
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    threads = threads or default_threads()
    tasks = list(tasks)
    if not tasks:
        return [], GenerationStats(0, 0, 0, 0.0, batch_size, max_new_tokens, threads)
    if resolve_engine(engine, device) == "llama_cpp" and model_and_tokenizer is None:
        from rubricrl.inference import llamacpp

        out, new_tokens, truncated, seconds = llamacpp.generate(model_dir, tasks, max_new_tokens, threads, desc=desc,
                                                                batch=batch_size)
        return [o[0] for o in out], GenerationStats(len(tasks), new_tokens, truncated, seconds, batch_size,
                                                    max_new_tokens, threads)
    with torch_threads(threads):
        model, tokenizer = model_and_tokenizer or load_for_generation(model_dir, device, precision)
        start = time.perf_counter()
        out, new_tokens, truncated = batched_generate(model, tokenizer, prompt_texts(tokenizer, tasks), batch_size, desc=desc,
                                               do_sample=False, num_beams=1, max_new_tokens=max_new_tokens)
        seconds = time.perf_counter() - start
    stats = GenerationStats(len(tasks), new_tokens, truncated, seconds, batch_size, max_new_tokens, threads)
    return [o[0] if o else "" for o in out], stats


def sample_responses(model_dir: str | Path, tasks: Sequence[Task], k: int, temperature: float, max_new_tokens: int,
                     top_p: float = 1.0, seed: int = 0, prompts_per_batch: int = 2,
                     threads: int | None = None, device: str = "auto", precision: str | None = None,
                     engine: str = "transformers") -> tuple[list[list[str]], GenerationStats]:
    """k sampled completions per task (the policy's own samples, as GRPO draws them), and timing stats.

    Seeded (torch.manual_seed; llama.cpp: seed + sample index), so a run is repeatable on the same machine
    and library versions. engine "llama_cpp" processes each prompt once for its k samples (KV-cache reuse);
    transformers processes it k times.
    """
    import torch

    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    threads = threads or default_threads()
    tasks = list(tasks)
    if resolve_engine(engine, device) == "llama_cpp":
        from rubricrl.inference import llamacpp

        out, new_tokens, truncated, seconds = llamacpp.generate(model_dir, tasks, max_new_tokens, threads, k=k,
                                                                temperature=temperature, top_p=top_p, seed=seed,
                                                                desc="policy samples")
        return out, GenerationStats(len(tasks) * k, new_tokens, truncated, seconds, 1, max_new_tokens, threads)
    with torch_threads(threads):
        model, tokenizer = load_for_generation(model_dir, device, precision)
        torch.manual_seed(seed)  # seeds CUDA too
        start = time.perf_counter()
        out, new_tokens, truncated = batched_generate(model, tokenizer, prompt_texts(tokenizer, tasks), prompts_per_batch,
                                               num_return_sequences=k, desc="policy samples", do_sample=True,
                                               temperature=temperature, top_p=top_p, top_k=0, max_new_tokens=max_new_tokens)
        seconds = time.perf_counter() - start
    stats = GenerationStats(len(tasks) * k, new_tokens, truncated, seconds, prompts_per_batch * k, max_new_tokens, threads)
    return out, stats


def greedy_chat(model, tokenizer, conversations: Sequence[list[dict]], batch_size: int = 8, max_new_tokens: int = 256,
                desc: str | None = None, threads: int | None = None) -> list[str]:
    """Greedy replies of a loaded model (load_for_generation) to chat conversations, in input order."""
    with torch_threads(threads or default_threads()):
        out, _, _ = batched_generate(model, tokenizer, chat_texts(tokenizer, conversations), batch_size, desc=desc,
                              do_sample=False, num_beams=1, max_new_tokens=max_new_tokens)
    return [o[0] if o else "" for o in out]


def generate_responses(model_dir: str | Path, tasks: Sequence[Task], batch_size: int = 8,
                       max_new_tokens: int = 256) -> list[str]:
    """Greedy (do_sample=False) responses of the model at `model_dir`, one per task, in input order."""
    return generate_with_stats(model_dir, tasks, batch_size=batch_size, max_new_tokens=max_new_tokens)[0]
