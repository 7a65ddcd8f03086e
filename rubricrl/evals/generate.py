"""Batched generation with transformers, over the one prompt template, on the machine's device.

Where a GPU is visible the model runs there in bf16 (fp32 when asked, or where the GPU lacks bf16);
otherwise on CPU in fp32. The stages call this with the defaults, so the eval and the rubric stage's
policy samples follow the hardware the profile runs on; the hack monitor decodes the model being
trained where it already is.
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from rubricrl.prompt import task_messages
from rubricrl.taskfile import Task


@dataclass
class GenerationStats:
    n: int
    new_tokens: int  # generated tokens, each response counted up to and including its end token
    truncated: int  # responses that stopped at max_new_tokens without an end token
    seconds: float  # generation wall time (model loading excluded)
    batch_size: int
    max_new_tokens: int
    threads: int

    @property
    def tokens_per_s(self) -> float:
        return self.new_tokens / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict:
        return {
            "n": self.n, "new_tokens": self.new_tokens, "truncated": self.truncated,
            "seconds": round(self.seconds, 3), "tokens_per_s": round(self.tokens_per_s, 2),
            "batch_size": self.batch_size, "max_new_tokens": self.max_new_tokens, "threads": self.threads,
        }


def default_threads() -> int:
    """The cores this process may use (affinity aware), at most 16: more rarely helps small models."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        n = os.cpu_count() or 1
    return max(1, min(16, n))


@contextmanager
def _torch_threads(n: int):
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def placement(device: str = "auto", precision: str | None = None):
    """(torch device, dtype) to generate with. `device` and `precision` take CommonSettings' values:
    device "auto" is cuda when available, "cpu" forces CPU; on CUDA the weights are bf16 unless
    precision is "fp32" or the GPU has no bf16. CPU always gets fp32 (bf16 there is slow or unsupported)."""
    import torch

    dev = torch.device("cuda" if device != "cpu" and torch.cuda.is_available() else "cpu")
    bf16 = dev.type == "cuda" and precision != "fp32" and torch.cuda.is_bf16_supported()
    return dev, torch.bfloat16 if bf16 else torch.float32


def load_for_generation(model_dir: str | Path, device: str = "auto", precision: str | None = None):
    """Model (eval mode, on `placement(device, precision)`) and tokenizer set up for left-padded batches."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dev, dtype = placement(device, precision)
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=dtype).to(dev)
    model.eval()
    return model, tokenizer


def prompt_texts(tokenizer, tasks: Sequence[Task]) -> list[str]:
    return chat_texts(tokenizer, [task_messages(t) for t in tasks])


def chat_texts(tokenizer, conversations: Sequence[list[dict]]) -> list[str]:
    """Each conversation (chat messages) rendered by the model's chat template, ready for the reply."""
    return [tokenizer.apply_chat_template(list(m), tokenize=False, add_generation_prompt=True) for m in conversations]


def _decode_rows(rows, eos_ids, tokenizer) -> tuple[list[str], int, int]:
    """Texts of generated token rows cut after their end token; (texts, new tokens, truncated count)."""
    texts, new_tokens, truncated = [], 0, 0
    for row in rows:
        end = next((k for k, tok in enumerate(row) if tok in eos_ids), None)
        if end is None:
            truncated += 1
            new_tokens += len(row)
        else:
            new_tokens += end + 1
            row = row[:end + 1]
        texts.append(tokenizer.decode(row, skip_special_tokens=True))
    return texts, new_tokens, truncated


def _generate(model, tokenizer, texts: list[str], batch_size: int, num_return_sequences: int = 1,
              desc: str | None = None, **gen_kwargs) -> tuple[list[list[str]], int, int]:
    """Completions per prompt text (input order), prompts batched longest first; (texts, new tokens, truncated)."""
    import torch
    from tqdm import tqdm
    from transformers import GenerationConfig

    # The chat template writes any BOS itself: do not add special tokens a second time.
    ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    order = sorted(range(len(texts)), key=lambda i: (-len(ids[i]), i))
    eos = model.generation_config.eos_token_id
    if eos is None:
        eos = tokenizer.eos_token_id
    eos_ids = set(eos if isinstance(eos, list) else [eos])
    gen_config = GenerationConfig(eos_token_id=eos, pad_token_id=tokenizer.pad_token_id,
                                  num_return_sequences=num_return_sequences, use_cache=True, **gen_kwargs)
    out: list[list[str]] = [[] for _ in texts]
    new_tokens = truncated = 0
    device = next(model.parameters()).device
    # A bar on stderr even when it is a pipe (a stage under DVC or the flow), updated at most every 5 s.
    bar = tqdm(total=len(order) * num_return_sequences, desc=desc, unit="answer", mininterval=5, disable=not desc)
    with torch.inference_mode(), bar:
        for b in range(0, len(order), batch_size):
            chunk = order[b:b + batch_size]
            batch = tokenizer.pad({"input_ids": [ids[i] for i in chunk]}, padding=True, return_tensors="pt").to(device)
            seqs = model.generate(**batch, generation_config=gen_config)
            rows = seqs[:, batch["input_ids"].shape[1]:].tolist()
            decoded, n_new, n_trunc = _decode_rows(rows, eos_ids, tokenizer)
            new_tokens += n_new
            truncated += n_trunc
            for j, i in enumerate(chunk):
                out[i] = decoded[j * num_return_sequences:(j + 1) * num_return_sequences]
            bar.update(len(rows))
    return out, new_tokens, truncated


def generate_with_stats(model_dir: str | Path, tasks: Sequence[Task], batch_size: int = 8,
                        max_new_tokens: int = 256, threads: int | None = None, model_and_tokenizer=None,
                        device: str = "auto", precision: str | None = None,
                        desc: str | None = "generating", engine: str = "transformers") -> tuple[list[str], GenerationStats]:
    """Greedy responses for `tasks` (in input order) and timing stats.

    Prompts are sorted by token length (longest first) so each batch pads little; only the new
    tokens are decoded, special tokens skipped. `model_and_tokenizer` reuses an already loaded pair
    (as returned by load_for_generation, or a model being trained, used where it is) instead of loading
    `model_dir` on `placement(device, precision)`. engine "llama_cpp" decodes an F16 GGUF of `model_dir`
    one prompt at a time instead (rubricrl.evals.llamacpp; batch_size, device and precision do not apply).
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    threads = threads or default_threads()
    tasks = list(tasks)
    if not tasks:
        return [], GenerationStats(0, 0, 0, 0.0, batch_size, max_new_tokens, threads)
    if engine == "llama_cpp" and model_and_tokenizer is None:
        from rubricrl.evals import llamacpp

        out, new_tokens, truncated, seconds = llamacpp.generate(model_dir, tasks, max_new_tokens, threads, desc=desc)
        return [o[0] for o in out], GenerationStats(len(tasks), new_tokens, truncated, seconds, 1, max_new_tokens, threads)
    with _torch_threads(threads):
        model, tokenizer = model_and_tokenizer or load_for_generation(model_dir, device, precision)
        start = time.perf_counter()
        out, new_tokens, truncated = _generate(model, tokenizer, prompt_texts(tokenizer, tasks), batch_size, desc=desc,
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
    if engine == "llama_cpp":
        from rubricrl.evals import llamacpp

        out, new_tokens, truncated, seconds = llamacpp.generate(model_dir, tasks, max_new_tokens, threads, k=k,
                                                                temperature=temperature, top_p=top_p, seed=seed,
                                                                desc="policy samples")
        return out, GenerationStats(len(tasks) * k, new_tokens, truncated, seconds, 1, max_new_tokens, threads)
    with _torch_threads(threads):
        model, tokenizer = load_for_generation(model_dir, device, precision)
        torch.manual_seed(seed)  # seeds CUDA too
        start = time.perf_counter()
        out, new_tokens, truncated = _generate(model, tokenizer, prompt_texts(tokenizer, tasks), prompts_per_batch,
                                               num_return_sequences=k, desc="policy samples", do_sample=True,
                                               temperature=temperature, top_p=top_p, top_k=0, max_new_tokens=max_new_tokens)
        seconds = time.perf_counter() - start
    stats = GenerationStats(len(tasks) * k, new_tokens, truncated, seconds, prompts_per_batch * k, max_new_tokens, threads)
    return out, stats


def greedy_chat(model, tokenizer, conversations: Sequence[list[dict]], batch_size: int = 8, max_new_tokens: int = 256,
                desc: str | None = None, threads: int | None = None) -> list[str]:
    """Greedy replies of a loaded model (load_for_generation) to chat conversations, in input order."""
    with _torch_threads(threads or default_threads()):
        out, _, _ = _generate(model, tokenizer, chat_texts(tokenizer, conversations), batch_size, desc=desc,
                              do_sample=False, num_beams=1, max_new_tokens=max_new_tokens)
    return [o[0] if o else "" for o in out]


def generate_responses(model_dir: str | Path, tasks: Sequence[Task], batch_size: int = 8,
                       max_new_tokens: int = 256) -> list[str]:
    """Greedy (do_sample=False) responses of the model at `model_dir`, one per task, in input order."""
    return generate_with_stats(model_dir, tasks, batch_size=batch_size, max_new_tokens=max_new_tokens)[0]
