"""GGUF and GPTQ export: conversion, llama.cpp quantization, verification by reloading and scoring, the serve check."""

from pathlib import Path

import pytest

from rubricrl.release import export
from rubricrl.inference import conversion, llamacpp
from rubricrl.reward.scoring import RubricScorer
from rubricrl.reward.load import load_rubric
from tests.inference.test_llamacpp_engine import smol_tiny  # noqa: F401  (the fixture)
from tests.evaluate.test_task_eval import tiny_tasks


@pytest.fixture(autouse=True)
def gguf_cache(seeded_gguf_cache):  # tests/conftest.py: one conversion of each model a session
    return seeded_gguf_cache


@pytest.fixture(scope="module")
def scorer():
    return RubricScorer(load_rubric("json_extraction"))


@pytest.mark.slow
def test_quantize_reload_and_score(smol_tiny, tmp_path, scorer):  # noqa: F811
    tasks = tiny_tasks()
    f16 = conversion.gguf_for(smol_tiny, "f16")
    sizes = {}
    for kind in ("q8_0", "q4_k_m"):
        path = export.quantize(f16, tmp_path / f"m-{kind}.gguf", kind, threads=2)
        conversion.check_gguf(path)
        sizes[kind] = path.stat().st_size
        result = export.verify_gguf(path, smol_tiny, tasks, scorer, max_new_tokens=12, threads=2, reference=f16)
        assert result["verified"] and result["n"] == 3 and result["tokens"] > 0
        assert result["max_row_error"] < export.MAX_ROW_ERROR and result["worst_tensor"]
        assert 0 <= result["field_accuracy"] <= 1 and len(result["rows"]) == 3
    assert sizes["q4_k_m"] < sizes["q8_0"] < f16.stat().st_size
    source = {"field_accuracy": 0.5, "reward": 4.0}
    assert export.retention({"field_accuracy": 0.25, "reward": 2.0}, source) == {"field_accuracy": 0.5, "reward": 0.5,
                                                                                   "valid_json": None}
    assert export.retention({"field_accuracy": 0.25, "valid_json": 0.5}, {"field_accuracy": 0.0, "valid_json": 1.0}) \
        == {"field_accuracy": None, "reward": None, "valid_json": 0.5}


@pytest.mark.slow
def test_a_truncated_gguf_fails_verification_naming_the_file(smol_tiny, tmp_path, scorer):  # noqa: F811
    good = export.quantize(conversion.gguf_for(smol_tiny, "f16"), tmp_path / "good.gguf", "q8_0")
    cut = tmp_path / "model-q8_0.gguf"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(export.ExportError, match=r"model-q8_0\.gguf: verification failed: .*unreadable GGUF"):
        export.verify_gguf(cut, smol_tiny, tiny_tasks(), scorer, max_new_tokens=8, threads=2)
    with pytest.raises(export.ExportError, match="unknown GGUF quantization 'q3'"):
        export.quantize(good, tmp_path / "x.gguf", "q3")


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["q8_0", "q4_k_m"])
def test_zeroed_weights_fail_verification_naming_the_tensor(smol_tiny, tmp_path, scorer, kind):  # noqa: F811
    """Bytes zeroed inside the tensor data keep the header readable and llama.cpp loading: only the content check
    against the F16 conversion catches them."""
    from gguf import GGUFReader

    f16 = conversion.gguf_for(smol_tiny, "f16")
    good = export.quantize(f16, tmp_path / f"model-{kind}.gguf", kind)
    checked = export.check_weights(good, f16)
    assert 0 < checked["max_row_error"] < export.MAX_ROW_ERROR
    data = bytearray(good.read_bytes())
    tensor = max(GGUFReader(str(good)).tensors, key=lambda t: t.n_bytes)  # the largest tensor's middle
    start = int(tensor.data_offset) + tensor.n_bytes // 4
    end = start + min(1 << 20, tensor.n_bytes // 2)
    data[start:end] = bytes(end - start)
    bad = tmp_path / f"zeroed-{kind}.gguf"
    bad.write_bytes(bytes(data))
    conversion.check_gguf(bad)  # the structure still reads
    with pytest.raises(export.ExportError, match=rf"zeroed-{kind}\.gguf: verification failed: tensor "
                                                 rf"{tensor.name} row \d+ .*corrupt weights"):
        export.verify_gguf(bad, smol_tiny, tiny_tasks(), scorer, max_new_tokens=8, threads=2, reference=f16)


@pytest.mark.slow
def test_serve_check_answers_through_the_openai_client(smol_tiny, tmp_path, scorer):  # noqa: F811
    q4 = export.quantize(conversion.gguf_for(smol_tiny, "f16"), tmp_path / "model-q4_k_m.gguf", "q4_k_m")
    task = tiny_tasks()[0]
    result = export.serve_check(q4, task, scorer, max_tokens=48)
    assert result["answer"].lstrip().startswith("{")  # the server's JSON grammar, even for a random model
    assert result["task"] == task.id and result["reward"] is not None and result["seconds"] > 0


@pytest.mark.slow
def test_gptq_quantize_reload_and_score(smol_tiny, tmp_path, scorer):  # noqa: F811
    """GPTQModel 4-bit: quantized on chat-formatted calibration text, saved atomically, reloaded and scored."""
    pytest.importorskip("gptqmodel")
    from transformers import AutoTokenizer

    from rubricrl.inference.generate import chat_texts
    from rubricrl.core.prompt import task_messages

    tasks = tiny_tasks()
    tok = AutoTokenizer.from_pretrained(str(smol_tiny))
    calibration = chat_texts(tok, [task_messages(t) + [{"role": "assistant", "content": '{"a": 1}'}] for t in tasks])
    out = export.gptq_quantize(smol_tiny, tmp_path / "gptq", calibration * 2, bits=4, group_size=32)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gptq"]  # no temporary folder left
    assert not Path("logs").exists()  # GPTQModel's own run logs stay out of the working folder
    config = (out / "quantize_config.json").read_text()
    assert '"bits": 4' in config and '"group_size": 32' in config
    packed = sum(p.stat().st_size for p in out.glob("*.safetensors"))
    result = export.verify_gptq(out, tasks, scorer, max_new_tokens=12, threads=2, speed_tasks=tasks[:1],
                                speed_tokens=8, batch_size=3)
    assert result["verified"] and result["n"] == 3 and result["tokens"] > 0 and result["tokens_per_s"] > 0
    assert result["size_mb"] == round(packed / 2**20, 1) and 0 <= result["field_accuracy"] <= 1
    # The reloaded layers are GPTQ's packed 4-bit linears, not the fp32 source's.
    import torch

    model, _ = export.load_gptq(out)
    layer = model.model.layers[0].mlp.up_proj
    assert not isinstance(layer, torch.nn.Linear) and layer.qweight.dtype == torch.int32 and layer.bits == 4


def test_gptq_rejects_a_group_size_that_does_not_divide_the_model(smol_tiny, tmp_path):  # noqa: F811
    with pytest.raises(export.ExportError, match=r"export\.gptq\.group_size: 48 does not divide hidden_size 64"):
        export.gptq_quantize(smol_tiny, tmp_path / "gptq", ["text"], bits=4, group_size=48)
    assert not (tmp_path / "gptq").exists()


def test_a_corrupt_gptq_folder_fails_verification_naming_it(smol_tiny, tmp_path, scorer):  # noqa: F811
    pytest.importorskip("gptqmodel")
    bad = tmp_path / "gptq"
    bad.mkdir()
    for f in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        (bad / f).write_bytes((smol_tiny / f).read_bytes())
    (bad / "quantize_config.json").write_text('{"bits": 4, "group_size": 32, "quant_method": "gptq"}')
    (bad / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(export.ExportError, match=r"gptq: verification failed: GPTQModel could not load it"):
        export.verify_gptq(bad, tiny_tasks(), scorer, max_new_tokens=8, threads=2)
