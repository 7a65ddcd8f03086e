"""GGUF export: conversion, llama.cpp quantization, verification by reloading and scoring, the serve check."""

import pytest

from rubricrl import export
from rubricrl.evals import llamacpp
from rubricrl.rubric.scoring import RubricScorer
from rubricrl.rubric.spec import load_rubric
from tests.test_llamacpp_engine import smol_tiny  # noqa: F401  (the fixture)
from tests.test_task_eval import tiny_tasks


@pytest.fixture(autouse=True)
def gguf_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RUBRICRL_GGUF_CACHE", str(tmp_path / "gguf"))


@pytest.fixture(scope="module")
def scorer():
    return RubricScorer(load_rubric("json_extraction"))


def test_quantize_reload_and_score(smol_tiny, tmp_path, scorer):  # noqa: F811
    tasks = tiny_tasks()
    f16 = llamacpp.gguf_for(smol_tiny, "f16")
    sizes = {}
    for kind in ("q8_0", "q4_k_m"):
        path = export.quantize(f16, tmp_path / f"m-{kind}.gguf", kind, threads=2)
        llamacpp.check_gguf(path)
        sizes[kind] = path.stat().st_size
        result = export.verify_gguf(path, smol_tiny, tasks, scorer, max_new_tokens=12, threads=2)
        assert result["verified"] and result["n"] == 3 and result["tokens"] > 0
        assert 0 <= result["field_accuracy"] <= 1 and len(result["rows"]) == 3
    assert sizes["q4_k_m"] < sizes["q8_0"] < f16.stat().st_size
    source = {"field_accuracy": 0.5, "reward": 4.0}
    assert export.retention({"field_accuracy": 0.25, "reward": 2.0}, source) == {"field_accuracy": 0.5, "reward": 0.5}
    assert export.retention({"field_accuracy": 0.25}, {"field_accuracy": 0.0}) == {"field_accuracy": None,
                                                                                    "reward": None}


def test_a_truncated_gguf_fails_verification_naming_the_file(smol_tiny, tmp_path, scorer):  # noqa: F811
    good = export.quantize(llamacpp.gguf_for(smol_tiny, "f16"), tmp_path / "good.gguf", "q8_0")
    cut = tmp_path / "model-q8_0.gguf"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(export.ExportError, match=r"model-q8_0\.gguf: verification failed: .*unreadable GGUF"):
        export.verify_gguf(cut, smol_tiny, tiny_tasks(), scorer, max_new_tokens=8, threads=2)
    with pytest.raises(export.ExportError, match="unknown GGUF quantization 'q3'"):
        export.quantize(good, tmp_path / "x.gguf", "q3")


def test_serve_check_answers_through_the_openai_client(smol_tiny, tmp_path, scorer):  # noqa: F811
    q4 = export.quantize(llamacpp.gguf_for(smol_tiny, "f16"), tmp_path / "model-q4_k_m.gguf", "q4_k_m")
    task = tiny_tasks()[0]
    result = export.serve_check(q4, task, scorer, max_tokens=48)
    assert result["answer"].lstrip().startswith("{")  # the server's JSON grammar, even for a random model
    assert result["task"] == task.id and result["reward"] is not None and result["seconds"] > 0
