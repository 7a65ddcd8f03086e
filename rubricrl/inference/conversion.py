"""HF model folder -> GGUF with llama.cpp's own converter, and the content-hash cache of the conversions.

The converter (`convert_hf_to_gguf.py`) comes from the pinned, checksummed llama-cpp-python source distribution
that `make setup` unpacks into `.venv/share/llama.cpp` (RUBRICRL_LLAMA_CPP_SRC points elsewhere); nothing is
fetched at run time. GGUFs are cached by the content hash of the folder's weights, config and tokenizer under
`.cache/gguf/` (RUBRICRL_GGUF_CACHE), so the SFT model converted for the rubric stage is reused by the eval.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from rubricrl.core.errors import RubricRLError

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
