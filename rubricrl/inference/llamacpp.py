"""Generation with llama.cpp on an F16 GGUF of a HF model folder: the CPU default's generation engine.

On the 2-core CPU box the eval and the rubric stage's policy samples decode ~1.8x faster here than with
transformers fp32 (benchmarks/generation_engines.py measures the speed-up and how often the greedy answers
agree). Only the forward pass changes: prompts are rendered with the one chat template and tokenized by the
model's HF tokenizer exactly as in the transformers path, and the generated ids are cut at the same end
tokens and decoded by the same tokenizer.

The HF folder is converted to GGUF once (rubricrl.inference.gguf: llama.cpp's own converter, cached by
content hash).

Greedy answers with `batch` > 1 decode together: up to `batch` prompts hold a sequence each in one context,
every step feeds each live sequence's last token in one llama_decode call, and a finished sequence's slot takes
the next prompt (continuous batching; each prompt's prefill runs alone, so llama.cpp splits no batch). On the
2-core AVX2 host a decode step of 8 sequences cost 8 ms a token against 15-20 ms for one sequence; prefill,
~1 s for a 480-token prompt, is the same either way (benchmarks/generation_engines.py compares the two and counts
identical answers). `batch` = 1 keeps the one-prompt-at-a-time path (the export's tokens/s figures).

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
             gguf: str | Path | None = None, batch: int = 1) -> tuple[list[list[str]], int, int, float]:
    """k completions per task (greedy when temperature is 0), in input order.

    `batch`: greedy answers (k = 1, temperature 0) decoded this many at a time (continuous batching).
    `gguf`: decode this file (e.g. a quantized export of `model_dir`) instead of the cached `outtype` conversion;
    `model_dir` still gives the tokenizer, chat template and end tokens.
    Returns (texts, new tokens, truncated, generation seconds without conversion and loading)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    return _generate(model_dir, tokenizer, prompt_texts(tokenizer, tasks), max_new_tokens, threads, k, temperature,
                     top_p, seed, desc, outtype, gguf, batch)


def generate_chat(model_dir: str | Path, conversations: Sequence[list[dict]], max_new_tokens: int, threads: int,
                  desc: str | None = None, outtype: str = "f16", batch: int = 1) -> tuple[list[str], int, int, float]:
    """Greedy replies to chat conversations (rendered by the model's chat template), in input order."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    out, new_tokens, truncated, seconds = _generate(model_dir, tokenizer, chat_texts(tokenizer, conversations),
                                                    max_new_tokens, threads, 1, 0.0, 1.0, 0, desc, outtype, None, batch)
    return [o[0] for o in out], new_tokens, truncated, seconds


def _generate(model_dir, tokenizer, texts: list[str], max_new_tokens: int, threads: int, k: int, temperature: float,
              top_p: float, seed: int, desc: str | None, outtype: str, gguf,
              batch: int = 1) -> tuple[list[list[str]], int, int, float]:
    from tqdm import tqdm

    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    eos = _eos_ids(model_dir, tokenizer)
    n_ctx = max((len(i) for i in ids), default=0) + max_new_tokens + 8
    if gguf is not None:
        check_gguf(Path(gguf))
    path = gguf or gguf_for(model_dir, outtype)
    bar = tqdm(total=len(ids) * k, desc=desc, unit="answer", mininterval=5, disable=not desc)
    if batch > 1 and k == 1 and temperature == 0.0 and len(ids) > 1:
        start = time.perf_counter()
        with bar:
            rows = greedy_batched(path, ids, eos, max_new_tokens, threads, min(batch, len(ids)), n_ctx,
                                  done=lambda: bar.update(1))
        seconds = time.perf_counter() - start
        return ([[tokenizer.decode(r, skip_special_tokens=True)] for r in rows], sum(map(len, rows)),
                sum(not (r and r[-1] in eos) for r in rows), seconds)
    llm = load(path, threads, n_ctx, seed)
    out: list[list[str]] = []
    new_tokens = truncated = 0
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


def greedy_batched(gguf: str | Path, prompts: Sequence[list[int]], eos: set[int], max_new_tokens: int, threads: int,
                   slots: int, n_ctx: int, n_batch: int = 512, done=lambda: None) -> list[list[int]]:
    """Greedy token ids for each prompt (in input order, cut after the first end token or at max_new_tokens),
    `slots` sequences decoding together in one llama.cpp context of `n_ctx` tokens per sequence."""
    import numpy as np

    try:
        import llama_cpp as lc
    except ImportError:
        raise EngineError("eval.engine llama_cpp needs llama-cpp-python: pip install 'rubricrl[llama]'") from None
    from llama_cpp._logger import set_verbose

    set_verbose(False)  # errors only, as Llama(verbose=False)
    lc.llama_backend_init()
    model = lc.llama_model_load_from_file(str(gguf).encode(), lc.llama_model_default_params())
    if not model:
        raise EngineError(f"{gguf}: llama.cpp could not load the model")
    params = lc.llama_context_default_params()
    per_sequence = -(-n_ctx // 256) * 256  # llama.cpp pads a context to 256 cells; the total divides by slots
    params.n_ctx, params.n_batch, params.n_ubatch = per_sequence * slots, n_batch, n_batch
    params.n_seq_max, params.kv_unified = slots, False  # a KV stream per sequence: 6-8 ms a token at 8-16 here
    params.n_threads = params.n_threads_batch = threads
    ctx = lc.llama_init_from_model(model, params)
    if not ctx:
        lc.llama_model_free(model)
        raise EngineError(f"{gguf}: llama.cpp could not create a context of {per_sequence} x {slots} tokens")
    n_vocab = lc.llama_vocab_n_tokens(lc.llama_model_get_vocab(model))
    memory = lc.llama_get_memory(ctx)
    cells = lc.llama_batch_init(max(n_batch, slots), 0, 1)

    def decode(entries: list[tuple[int, Sequence[int], int]]) -> dict[int, int]:
        """Feed (slot, tokens, first position) entries in one call; the argmax after each entry's last token."""
        n, last = 0, {}
        for slot, tokens, pos in entries:
            for j, token in enumerate(tokens):
                cells.token[n], cells.pos[n], cells.n_seq_id[n] = token, pos + j, 1
                cells.seq_id[n][0], cells.logits[n] = slot, j == len(tokens) - 1
                n += 1
            last[slot] = n - 1
        cells.n_tokens = n
        rc = lc.llama_decode(ctx, cells)
        if rc != 0:
            raise EngineError(f"{gguf}: llama_decode returned {rc} ({len(entries)} sequences, {n} tokens)")
        return {slot: int(np.ctypeslib.as_array(lc.llama_get_logits_ith(ctx, i), shape=(n_vocab,)).argmax())
                for slot, i in last.items()}

    out: list[list[int] | None] = [None] * len(prompts)
    queue, free = list(range(len(prompts))), list(range(slots))
    live: dict[int, tuple[int, list[int], int]] = {}  # slot -> (prompt index, tokens so far, next position)
    try:
        while queue or live:
            while free and queue:  # a free slot takes the next prompt; its prefill runs alone
                slot, t = free.pop(), queue.pop(0)
                lc.llama_memory_seq_rm(memory, slot, -1, -1)
                for s in range(0, len(prompts[t]), n_batch):
                    first = decode([(slot, prompts[t][s:s + n_batch], s)])[slot]
                live[slot] = (t, [first], len(prompts[t]))
            for slot, (t, row, _) in list(live.items()):
                if row[-1] in eos or len(row) >= max_new_tokens:
                    out[t] = row
                    del live[slot]
                    free.append(slot)
                    done()
            if live and not (free and queue):
                for slot, token in decode([(slot, [row[-1]], pos) for slot, (_, row, pos) in live.items()]).items():
                    t, row, pos = live[slot]
                    row.append(token)
                    live[slot] = (t, row, pos + 1)
    finally:
        lc.llama_batch_free(cells)
        lc.llama_free(ctx)
        lc.llama_model_free(model)
    return out  # type: ignore[return-value]


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
