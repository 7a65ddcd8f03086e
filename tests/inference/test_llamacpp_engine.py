"""The llama.cpp engine: HF -> GGUF with llama.cpp's converter, the same prompts and answers as transformers."""
import pytest

from rubricrl.inference import conversion, llamacpp
from rubricrl.inference.generate import generate_with_stats, sample_responses
from tests.evaluate.test_task_eval import tiny_tasks
from tests.train_helpers import roughen_weights


@pytest.fixture(scope="module")
def smol_tiny(tmp_path_factory):
    """A tiny random Llama with SmolLM2's real tokenizer (the converter only knows published tokenizers),
    with weights large enough that greedy decoding is not all one token."""
    from transformers import AutoTokenizer

    from rubricrl.inference.models import build_tiny_model, embedded_gguf

    gguf = embedded_gguf()
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    path = build_tiny_model(tmp_path_factory.mktemp("smol") / "m", hidden_size=64, seed=3, tokenizer=tokenizer)
    return roughen_weights(path, seed=3)


@pytest.fixture(autouse=True)
def gguf_cache(seeded_gguf_cache):  # tests/conftest.py: one conversion of each model a session
    return seeded_gguf_cache


@pytest.mark.slow
def test_greedy_answers_match_transformers(smol_tiny):
    tasks = tiny_tasks()
    hf, _ = generate_with_stats(smol_tiny, tasks, batch_size=3, max_new_tokens=16, desc=None)
    out, new_tokens, truncated, _ = llamacpp.generate(smol_tiny, tasks, 16, threads=2, outtype="f32")
    assert [o[0] for o in out] == hf
    assert len(set(hf)) == 3 and new_tokens > 0  # not a vacuous comparison
    # The stage path (F16, the default) runs too, and the GGUF is cached by content.
    texts, stats = generate_with_stats(smol_tiny, tasks, max_new_tokens=16, desc=None, engine="llama_cpp")
    assert len(texts) == 3 and stats.new_tokens > 0
    assert len(list(conversion.cache_dir().glob("*.gguf"))) == 2  # f32 and f16, each converted once


@pytest.mark.slow
def test_batched_greedy_answers_match_one_at_a_time(smol_tiny):
    """Continuous batching: 5 prompts through 2 slots (each slot reused, sequences of different lengths live
    together) give the one-prompt-at-a-time answers, token for token, in input order."""
    tasks = (tiny_tasks() * 2)[:5]
    one, new_one, trunc_one, _ = llamacpp.generate(smol_tiny, tasks, 24, threads=2, outtype="f32")
    two, new_two, trunc_two, _ = llamacpp.generate(smol_tiny, tasks, 24, threads=2, outtype="f32", batch=2)
    assert two == one and (new_two, trunc_two) == (new_one, trunc_one)
    assert len({o[0] for o in one}) == 3 and new_one == 5 * 24
    # Sequences that end early free their slot for the next prompt: an end token taken from one answer
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(smol_tiny))
    prompts = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in llamacpp.prompt_texts(tokenizer, tasks)]
    gguf = conversion.gguf_for(smol_tiny, "f32")
    full = llamacpp.greedy_batched(gguf, prompts, set(), 24, 2, slots=1, n_ctx=256)
    end = full[0][5]
    cut = [row[:row.index(end) + 1] if end in row else row for row in full]
    assert llamacpp.greedy_batched(gguf, prompts, {end}, 24, 2, slots=2, n_ctx=256) == cut
    assert 0 < sum(len(r) < 24 for r in cut) < 5  # some end early, some run to the limit
    with pytest.raises(ValueError, match="batch must be >= 1"):
        llamacpp.generate(smol_tiny, tasks, 4, threads=2, batch=0)


@pytest.mark.slow
def test_samples_differ_per_draw_and_repeat_per_seed(smol_tiny):
    tasks = tiny_tasks()[:2]
    a, stats = sample_responses(smol_tiny, tasks, k=3, temperature=1.0, max_new_tokens=12, seed=5, engine="llama_cpp")
    b, _ = sample_responses(smol_tiny, tasks, k=3, temperature=1.0, max_new_tokens=12, seed=5, engine="llama_cpp")
    assert a == b and stats.n == 6
    assert all(len(set(samples)) > 1 for samples in a)  # each draw has its own seed
    c, _ = sample_responses(smol_tiny, tasks, k=3, temperature=1.0, max_new_tokens=12, seed=6, engine="llama_cpp")
    assert c != a


def test_a_truncated_or_foreign_file_fails_with_a_clear_error(smol_tiny, tmp_path):
    good = conversion.gguf_for(smol_tiny)
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 3])
    with pytest.raises(conversion.EngineError, match="cut.gguf: unreadable GGUF"):
        conversion.check_gguf(cut)
    other = tmp_path / "other.gguf"
    other.write_bytes(b"PK\x03\x04 not a gguf")
    with pytest.raises(conversion.EngineError, match="not a GGUF file"):
        conversion.check_gguf(other)


def test_a_gguf_is_parsed_once_per_version_and_a_rewritten_one_again(smol_tiny, tmp_path):
    """The reader parses what gguf's GGUFReader does, field by field and tensor by tensor. read_gguf keys on the file's inode, size and mtime: a rename into place hits, a rewrite misses, so a check
    never passes on a parse of what was there before."""
    import numpy as np
    from gguf import GGUFReader

    good = conversion.gguf_for(smol_tiny)
    fast, stock = conversion.reader_class()(str(good)), GGUFReader(str(good))  # the faster parse reads the same
    assert list(fast.fields) == list(stock.fields) and fast.data_offset == stock.data_offset
    for name, field in stock.fields.items():
        assert field.types == fast.fields[name].types and all(
            np.array_equal(a, b) for a, b in zip(field.parts, fast.fields[name].parts, strict=True)), name
    assert [(t.name, t.tensor_type, list(t.shape), t.data_offset) for t in fast.tensors] == [
        (t.name, t.tensor_type, list(t.shape), t.data_offset) for t in stock.tensors]
    assert all(np.array_equal(a.data, b.data) for a, b in zip(fast.tensors, stock.tensors, strict=True))
    copy = tmp_path / ".copy.tmp"
    copy.write_bytes(good.read_bytes())
    first = conversion.read_gguf(copy)
    moved = copy.rename(tmp_path / "copy.gguf")
    assert conversion.read_gguf(moved) is first
    moved.write_bytes(good.read_bytes()[: good.stat().st_size // 3])
    with pytest.raises(conversion.EngineError, match="copy.gguf: unreadable GGUF"):
        conversion.check_gguf(moved)


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["cut short", "zeroed", "no record"])
def test_a_damaged_cached_gguf_is_rebuilt_not_served(smol_tiny, capsys, damage):
    from rubricrl.inference.llamacpp import generate
    from tests.evaluate.test_task_eval import tiny_tasks

    good = conversion.gguf_for(smol_tiny)
    data = good.read_bytes()
    if damage == "cut short":
        good.write_bytes(data[: len(data) // 2])
    elif damage == "zeroed":
        good.write_bytes(data[: len(data) // 2] + bytes(4096) + data[len(data) // 2 + 4096:])
    else:
        good.with_name(good.name + ".json").unlink()
    conversion._checked.clear()  # a later run: a new process
    tasks = tiny_tasks()[:1]
    out, *_ = generate(smol_tiny, tasks, 8, 2)  # the engine asks the cache: no bare ValueError from llama.cpp
    assert len(out) == 1
    err = capsys.readouterr().err
    assert err.count("gguf cache:") == 1 and "rebuilding it" in err
    assert good.read_bytes() == data and conversion.cached_ok(good) is None
    conversion._checked.clear()
    assert conversion.gguf_for(smol_tiny) == good and "gguf cache:" not in capsys.readouterr().err


@pytest.mark.slow
def test_conversion_failures_and_a_missing_converter_name_the_cause(tmp_path, monkeypatch):
    from rubricrl.inference.models import build_tiny_model

    monkeypatch.setenv("RUBRICRL_GGUF_CACHE", str(tmp_path / "empty-cache"))  # nothing converted: nothing left
    tiny = build_tiny_model(tmp_path / "bpe")  # a tokenizer llama.cpp does not know
    with pytest.raises(conversion.EngineError, match="pre-tokenizer was not recognized"):
        conversion.gguf_for(tiny)
    assert not list(conversion.cache_dir().glob("*")) or not list(conversion.cache_dir().glob("*.gguf"))
    with pytest.raises(conversion.EngineError, match="no \\*.safetensors"):
        conversion.gguf_for(tmp_path)
    monkeypatch.setenv("RUBRICRL_LLAMA_CPP_SRC", str(tmp_path / "nowhere"))
    with pytest.raises(conversion.EngineError, match="make setup"):
        conversion.converter_dir()
