"""Generation with llama.cpp on an F16 GGUF of a HF model folder: the CPU default's generation engine.

On the 2-core CPU box the eval and the rubric stage's policy samples decode ~1.8x faster here than with
transformers fp32 (benchmarks/generation_engines.py measures the speed-up and how often the greedy answers
agree). Only the forward pass changes: prompts are rendered with the one chat template and tokenized by the
model's HF tokenizer exactly as in the transformers path, and the generated ids are cut at the same end
tokens and decoded by the same tokenizer.

The HF folder is converted with llama.cpp's own converter (`convert_hf_to_gguf.py`), taken from the pinned,
checksummed llama-cpp-python source distribution that `make setup` unpacks into `.venv/share/llama.cpp`
(RUBRICRL_LLAMA_CPP_SRC points elsewhere); nothing is fetched at run time. GGUFs are cached by the content
hash of the folder's weights, config and tokenizer under `.cache/gguf/` (RUBRICRL_GGUF_CACHE), so the SFT
model converted for the rubric stage is reused by the eval.

Sampling: each of the k samples of a task gets its own seed (seed + j) and reuses the prompt's KV cache, so
a prompt is processed once per task, not k times. llama.cpp applies top_p before the temperature (HF after
it); with top_p = 1 (the default) the two agree.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

from rubricrl.errors import RubricRLError
from rubricrl.taskfile import Task

CONVERTER = "convert_hf_to_gguf.py"
HASHED = ("config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json", "chat_template.jinja")
KEEP = 8  # cached GGUFs kept (newest first); one SmolLM2 F16 is 270 MB


class EngineError(RubricRLError):
    """The llama.cpp engine cannot run: its converter or package is missing, or a conversion failed."""


def converter_dir() -> Path:
    """The unpacked llama.cpp source with convert_hf_to_gguf.py, conversion/ and gguf-py/."""
    root = Path(os.environ.get("RUBRICRL_LLAMA_CPP_SRC") or Path(sys.prefix) / "share" / "llama.cpp")
    if not (root / CONVERTER).is_file() or not (root / "gguf-py").is_dir():
        raise EngineError(f"llama.cpp's converter is not at {root}: `make setup` unpacks it from the pinned "
                          f"llama-cpp-python sdist (or set RUBRICRL_LLAMA_CPP_SRC to an unpacked vendor/llama.cpp); "
                          f"or set eval.engine: transformers")
    return root


def cache_dir() -> Path:
    return Path(os.environ.get("RUBRICRL_GGUF_CACHE") or ".cache/gguf")


def fingerprint(model_dir: str | Path) -> str:
    """sha256 over the weights, config and tokenizer files of an HF folder (names and contents)."""
    model_dir = Path(model_dir)
    files = sorted(p for p in model_dir.iterdir() if p.is_file() and (p.suffix == ".safetensors" or p.name in HASHED))
    if not any(p.suffix == ".safetensors" for p in files):
        raise EngineError(f"{model_dir}: no *.safetensors weights to convert")
    h = hashlib.sha256()
    for p in files:
        h.update(p.name.encode() + b"\0")
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                h.update(block)
        h.update(b"\0")
    return h.hexdigest()


def check_gguf(path: Path) -> None:
    """A readable GGUF: the magic, and a header gguf can parse (a truncated file fails here, not in C)."""
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise EngineError(f"{path}: not a GGUF file (bad magic)")
    from gguf import GGUFReader

    try:
        reader = GGUFReader(str(path))
        n = len(reader.tensors)
    except Exception as err:  # noqa: BLE001 - any parse failure means the file is unusable
        raise EngineError(f"{path}: unreadable GGUF ({type(err).__name__}: {err})") from None
    if n == 0:
        raise EngineError(f"{path}: GGUF without tensors")


def convert(model_dir: str | Path, out: str | Path, outtype: str = "f16") -> Path:
    """HF folder -> GGUF with llama.cpp's converter, in a subprocess (its gguf-py, not the installed gguf)."""
    src, out = converter_dir(), Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src / "gguf-py"), str(src)]), "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, str(src / CONVERTER), str(model_dir), "--outfile", str(tmp), "--outtype", outtype]
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-8:])
            raise EngineError(f"converting {model_dir} to GGUF failed (exit {proc.returncode}):\n{tail}")
        check_gguf(tmp)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


def gguf_for(model_dir: str | Path, outtype: str = "f16") -> Path:
    """The cached GGUF of an HF folder, converting it on the first call."""
    cache = cache_dir()
    path = cache / f"{fingerprint(model_dir)[:24]}-{outtype}.gguf"
    if path.is_file():
        os.utime(path)  # newest use first in the pruning order
        return path
    convert(model_dir, path, outtype)
    for old in sorted(cache.glob("*.gguf"), key=lambda p: p.stat().st_mtime, reverse=True)[KEEP:]:
        old.unlink(missing_ok=True)
    return path


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

    from rubricrl.evals.generate import prompt_texts

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    return _generate(model_dir, tokenizer, prompt_texts(tokenizer, tasks), max_new_tokens, threads, k, temperature,
                     top_p, seed, desc, outtype, gguf)


def generate_chat(model_dir: str | Path, conversations: Sequence[list[dict]], max_new_tokens: int, threads: int,
                  desc: str | None = None, outtype: str = "f16") -> tuple[list[str], int, int, float]:
    """Greedy replies to chat conversations (rendered by the model's chat template), in input order."""
    from transformers import AutoTokenizer

    from rubricrl.evals.generate import chat_texts

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
