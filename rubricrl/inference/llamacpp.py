"""Generation with llama.cpp on an F16 GGUF of a HF model folder: the CPU default's generation engine.

On the 2-core CPU box the eval and the rubric stage's policy samples decode ~1.8x faster here than with
transformers fp32 (benchmarks/generation_engines.py measures the speed-up and how often the greedy answers
agree). Only the forward pass changes: prompts are rendered with the one chat template and tokenized by the
model's HF tokenizer exactly as in the transformers path, and the generated ids are cut at the same end
tokens and decoded by the same tokenizer.

The HF folder is converted to GGUF once (rubricrl.inference.gguf: llama.cpp's own converter, cached by
content hash).

Sampling: each of the k samples of a task gets its own seed (seed + j) and reuses the prompt's KV cache, so
a prompt is processed once per task, not k times. llama.cpp applies top_p before the temperature (HF after
it); with top_p = 1 (the default) the two agree.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Sequence

from rubricrl.core.taskfile import Task
from rubricrl.inference.chat import chat_texts, prompt_texts
from rubricrl.inference.conversion import EngineError, check_gguf, gguf_for


def load(gguf: str | Path, threads: int, n_ctx: int, seed: int = 0):
    try:
        from llama_cpp import Llama
    except ImportError:
        raise EngineError("eval.engine llama_cpp needs llama-cpp-python: pip install 'rubricrl[llama]' "
                          "(make setup installs it), or set eval.engine: transformers") from None
    return Llama(model_path=str(gguf), n_ctx=n_ctx, n_batch=512, n_threads=threads, n_threads_batch=threads,
                 seed=seed, verbose=False)


def generate(model_dir: str | Path, tasks: Sequence[Task], max_new_tokens: int, threads: int, k: int = 1,
             temperature: float = 0.0, top_p: float = 1.0, seed: int = 0,
             desc: str | None = None, outtype: str = "f16",
             gguf: str | Path | None = None) -> tuple[list[list[str]], int, int, float]:
    """k completions per task (greedy when temperature is 0), in input order.

    `gguf`: decode this file (e.g. a quantized export of `model_dir`) instead of the cached `outtype` conversion;
    `model_dir` still gives the tokenizer, chat template and end tokens.
    Returns (texts, new tokens, truncated, generation seconds without conversion and loading)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    return _generate(model_dir, tokenizer, prompt_texts(tokenizer, tasks), max_new_tokens, threads, k, temperature,
                     top_p, seed, desc, outtype, gguf)


def generate_chat(model_dir: str | Path, conversations: Sequence[list[dict]], max_new_tokens: int, threads: int,
                  desc: str | None = None, outtype: str = "f16") -> tuple[list[str], int, int, float]:
    """Greedy replies to chat conversations (rendered by the model's chat template), in input order."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    out, new_tokens, truncated, seconds = _generate(model_dir, tokenizer, chat_texts(tokenizer, conversations),
                                                    max_new_tokens, threads, 1, 0.0, 1.0, 0, desc, outtype, None)
    return [o[0] for o in out], new_tokens, truncated, seconds


def _generate(model_dir, tokenizer, texts: list[str], max_new_tokens: int, threads: int, k: int, temperature: float,
              top_p: float, seed: int, desc: str | None, outtype: str, gguf) -> tuple[list[list[str]], int, int, float]:
    from tqdm import tqdm

    ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    eos = _eos_ids(model_dir, tokenizer)
    n_ctx = max((len(i) for i in ids), default=0) + max_new_tokens + 8
    if gguf is not None:
        check_gguf(Path(gguf))
    llm = load(gguf or gguf_for(model_dir, outtype), threads, n_ctx, seed)
    out: list[list[str]] = []
    new_tokens = truncated = 0
    bar = tqdm(total=len(ids) * k, desc=desc, unit="answer", mininterval=5, disable=not desc)
    start = time.perf_counter()
    with bar:
        for t, prompt in enumerate(ids):
            samples = []
            for j in range(k):
                llm.set_seed(seed + t * k + j)
                row = []
                for tok in llm.generate(prompt, temp=temperature, top_p=top_p, top_k=0, min_p=0.0, typical_p=1.0,
                                        repeat_penalty=1.0):
                    row.append(tok)
                    if tok in eos or len(row) >= max_new_tokens:
                        break
                new_tokens += len(row)
                truncated += not (row and row[-1] in eos)
                samples.append(tokenizer.decode(row, skip_special_tokens=True))
                bar.update(1)
            out.append(samples)
    seconds = time.perf_counter() - start
    llm.close()
    return out, new_tokens, truncated, seconds


def _eos_ids(model_dir, tokenizer) -> set[int]:
    """The end tokens the transformers path stops at: generation_config's, else the tokenizer's."""
    from transformers import GenerationConfig

    try:
        eos = GenerationConfig.from_pretrained(str(model_dir)).eos_token_id
    except OSError:
        eos = None
    if eos is None:
        eos = tokenizer.eos_token_id
    return set(eos if isinstance(eos, list) else [eos])
