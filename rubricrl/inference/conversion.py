"""HF model folder -> GGUF with llama.cpp's own converter, and the content-hash cache of the conversions.

The converter (`convert_hf_to_gguf.py`) comes from the pinned, checksummed llama-cpp-python source distribution
that `make setup` unpacks into `.venv/share/llama.cpp` (RUBRICRL_LLAMA_CPP_SRC points elsewhere); nothing is
fetched at run time. GGUFs are cached by the content hash of the folder's weights, config and tokenizer under
`.cache/gguf/` (RUBRICRL_GGUF_CACHE), so the SFT model converted for the rubric stage is reused by the eval.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from rubricrl.core.atomic import write_json
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


_readers: dict[tuple, object] = {}  # (device, inode, size, mtime_ns) -> reader, the last few files read


@functools.cache
def reader_class() -> type:
    """gguf's GGUFReader, slicing a plain ndarray view of its memory map instead of the np.memmap itself: the same
    fields and tensors (tests/inference/test_llamacpp_engine.py compares them), 3.5x faster to parse the
    miniature's Qwen2 F16 (7.2 -> 2.1 s on 2 cores), since every metadata value (300k vocabulary strings and
    merges) is a slice and np.memmap's __getitem__ and __array_finalize__ were three quarters of the time."""
    import numpy as np
    from gguf import GGUFReader

    class PlainViewReader(GGUFReader):
        def _get(self, offset, dtype, count=1, override_order=None):
            plain = self.__dict__.get("_plain")
            if plain is None:
                plain = self.__dict__["_plain"] = self.data.view(np.ndarray)
            count = int(count)
            arr = plain[offset:offset + np.dtype(dtype).itemsize * count].view(dtype=dtype)[:count]
            return arr.view(arr.dtype.newbyteorder(self.byte_order if override_order is None else override_order))

    return PlainViewReader


def read_gguf(path: str | Path):
    """The GGUF reader (reader_class) of `path`, parsed once per file version in this process: parsing reads every
    metadata field (~1 s for SmolLM2's 49k-token vocabulary on 2 cores, 2 s for Qwen2.5's 152k), and one export
    checks a file up to five times (written, reloaded, its weights compared, its speed measured). The key is the
    file's identity and version, so a file renamed into place hits and a changed file (size or mtime) misses."""
    st = os.stat(path)
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in _readers:
        reader = reader_class()(str(path))
        while len(_readers) >= 4:
            _readers.pop(next(iter(_readers)))
        _readers[key] = reader
    return _readers[key]


def check_gguf(path: Path) -> None:
    """A readable GGUF: the magic, and a header gguf can parse (a truncated file fails here, not in C)."""
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise EngineError(f"{path}: not a GGUF file (bad magic)")
    try:
        n = len(read_gguf(path).tensors)
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


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


_checked: dict[tuple, bool] = {}  # (path, size, mtime_ns) -> verified in this process: hash a file once


def cached_ok(path: Path) -> str | None:
    """Why a cached GGUF must not be served (None: it is what was written). Its size and sha256 are recorded
    beside it at write time (`<name>.json`); a file without that record, cut short, or changed fails."""
    record = path.with_name(path.name + ".json")
    try:
        meta = json.loads(record.read_text(encoding="utf-8"))
        size, digest = int(meta["size"]), str(meta["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        return f"no readable record of its size and hash ({record.name})"
    st = path.stat()
    if st.st_size != size:
        return f"{st.st_size} bytes, {size} when written"
    key = (str(path), st.st_size, st.st_mtime_ns)
    if not _checked.get(key):
        if _sha256(path) != digest:
            return "its sha256 differs from the one recorded when it was written"
        _checked[key] = True
    return None


def gguf_for(model_dir: str | Path, outtype: str = "f16") -> Path:
    """The cached GGUF of an HF folder, converting it on the first call, and again when the cached file fails its
    check (cached_ok: size and hash recorded at write), said in one line on stderr."""
    cache = cache_dir()
    path = cache / f"{fingerprint(model_dir)[:24]}-{outtype}.gguf"
    record = path.with_name(path.name + ".json")
    if path.is_file():
        why = cached_ok(path)
        if why is None:
            os.utime(path)  # newest use first in the pruning order
            return path
        print(f"gguf cache: {path}: {why}: rebuilding it", file=sys.stderr)
        path.unlink(missing_ok=True)
        record.unlink(missing_ok=True)
    convert(model_dir, path, outtype)
    st = path.stat()
    write_json(record, {"size": st.st_size, "sha256": _sha256(path), "model_dir": str(model_dir)})
    _checked[(str(path), st.st_size, st.st_mtime_ns)] = True
    for old in sorted(cache.glob("*.gguf"), key=lambda p: p.stat().st_mtime, reverse=True)[KEEP:]:
        old.unlink(missing_ok=True)
        old.with_name(old.name + ".json").unlink(missing_ok=True)
    return path
