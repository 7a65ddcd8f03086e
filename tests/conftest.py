import os

# Nothing may download weights or data at run time.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# One real llama.cpp server (SmolLM2 GGUF) for the whole session, shared by every judge test.
pytest_plugins = ["tests.llama_server"]


import shutil  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def _converted_ggufs(tmp_path_factory):
    """GGUFs converted earlier in this session, each with its record (size and sha256), by name."""
    return tmp_path_factory.mktemp("gguf-converted")


@pytest.fixture
def seeded_gguf_cache(tmp_path_factory, monkeypatch, _converted_ggufs):
    """RUBRICRL_GGUF_CACHE for one test: a folder of its own (a test may damage what is in it), holding copies of the
    GGUFs converted earlier in the session. A conversion is a subprocess of llama.cpp's converter (~15 s on 2 cores);
    the tiny models the engine and export tests build are the same bytes in every module, so each is converted
    once a session instead of once a test. What the test converted goes back for the next one if its record still
    checks (rubricrl.inference.conversion.cached_ok), so a damaged file never spreads."""
    from rubricrl.inference.conversion import cached_ok

    cache = tmp_path_factory.mktemp("gguf") / "cache"  # beside tmp_path, which some tests list
    shutil.copytree(_converted_ggufs, cache)
    monkeypatch.setenv("RUBRICRL_GGUF_CACHE", str(cache))
    yield cache
    for path in cache.glob("*.gguf"):
        record = path.with_name(path.name + ".json")
        if not (_converted_ggufs / path.name).exists() and record.is_file() and cached_ok(path) is None:
            shutil.copy2(record, _converted_ggufs / record.name)
            shutil.copy2(path, _converted_ggufs / path.name)
