"""Resume stamps by content (rubricrl.core.resume): a task changed under the same id, a changed tokenizer or chat
template, a settings file changed at the same path, each starts the state over; the registry's weights identity
does not move with the tokenizer."""

from __future__ import annotations

import json
import os

import pytest

from rubricrl import tracking
from rubricrl.core.resume import ResumeDir, accelerate_digest, model_digest, tasks_digest, twins
from rubricrl.core.taskfile import load_tasks

TASK = {"id": "t1", "instruction": "Extract the product.", "text": "The AirBeat Pro costs $2,999.",
        "schema": {"type": "object", "properties": {"product": {"type": "string"}}, "required": ["product"]},
        "reference": {"product": "AirBeat Pro"}}


def write_tasks(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return load_tasks(path)


def tiny_model(folder):
    """The files of an HF model folder that a stamp reads (their bytes only matter)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.safetensors").write_bytes(b"weights")
    (folder / "config.json").write_text('{"model_type": "llama"}')
    (folder / "tokenizer.json").write_text('{"model": {"vocab": {"a": 0}}}')
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ messages }}"}))
    (folder / "special_tokens_map.json").write_text('{"eos_token": "</s>"}')
    (folder / "generation_config.json").write_text('{"eos_token_id": 2}')
    return folder


def test_a_task_whose_text_changed_under_the_same_id_changes_the_stamp(tmp_path):
    rows = [TASK, {**TASK, "id": "t2", "text": "The BoomBox costs $10.", "reference": {"product": "BoomBox"}}]
    tasks = write_tasks(tmp_path / "a.jsonl", rows)
    first = ResumeDir("eval_task", {"n": 2}, tasks_digest(tasks), root=tmp_path / "resume")
    first.journal("base").add([{"id": "t1", "response": "{}"}])
    assert ResumeDir("eval_task", {"n": 2}, tasks_digest(write_tasks(tmp_path / "b.jsonl", rows)),
                     root=tmp_path / "resume").resumed  # the same content in another file: the same stamp
    changed = write_tasks(tmp_path / "c.jsonl", [rows[0], {**rows[1], "text": "The BoomBox costs $12."}])
    assert [t.id for t in changed] == [t.id for t in tasks]
    again = ResumeDir("eval_task", {"n": 2}, tasks_digest(changed), root=tmp_path / "resume")
    assert not again.resumed and not again.journal("base").rows


@pytest.mark.parametrize("change", [
    lambda m: (m / "tokenizer.json").write_text('{"model": {"vocab": {"b": 0}}}'),
    lambda m: (m / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ messages[0] }}"})),
    lambda m: (m / "chat_template.jinja").write_text("{{ messages }}"),
    lambda m: (m / "special_tokens_map.json").write_text('{"eos_token": "<|im_end|>"}'),
    lambda m: (m / "generation_config.json").write_text('{"eos_token_id": 3}'),
    lambda m: (m / "config.json").write_text('{"model_type": "qwen2"}'),
    lambda m: (m / "model-00002-of-00002.safetensors").write_bytes(b"more"),
], ids=["tokenizer", "template field", "template file", "special tokens", "generation", "config", "weight shard"])
def test_a_changed_tokenizer_template_or_weight_file_changes_the_model_digest(tmp_path, change):
    model = tiny_model(tmp_path / "model")
    before = model_digest(model)
    ResumeDir("sft", model_digest(model), root=tmp_path / "resume")
    change(model)
    assert model_digest(model) != before
    assert not ResumeDir("sft", model_digest(model), root=tmp_path / "resume").resumed


def test_the_registry_identity_stays_the_weights_only(tmp_path):
    """model.md5 (release/registry.py) is tracking.weights_digest: a tokenizer change must not make new weights."""
    model = tiny_model(tmp_path / "model")
    weights = tracking.weights_digest(model)
    (model / "tokenizer.json").write_text('{"model": {"vocab": {"b": 0}}}')
    assert tracking.weights_digest(model) == weights


def test_an_accelerate_config_is_stamped_by_content_with_the_deepspeed_file_it_names(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # accelerate reads the named DeepSpeed file from the working folder
    (tmp_path / "ds.json").write_text('{"zero_optimization": {"stage": 3}}')
    config = tmp_path / "accelerate.yaml"
    config.write_text("distributed_type: DEEPSPEED\nnum_processes: 8\ndeepspeed_config:\n"
                      "  deepspeed_config_file: ds.json\n")
    first = accelerate_digest(config)
    assert accelerate_digest(None) is None and first["deepspeed"] is not None
    (tmp_path / "ds.json").write_text('{"zero_optimization": {"stage": 2}}')
    second = accelerate_digest(config)
    assert second["deepspeed"] != first["deepspeed"] and second["accelerate"] == first["accelerate"]
    config.write_text(config.read_text().replace("num_processes: 8", "num_processes: 4"))
    assert accelerate_digest(config)["accelerate"] != second["accelerate"]


def test_twins_are_models_of_the_same_content_and_only_those(tmp_path):
    """A GRPO run the monitor stopped on its initial weights is a copy of its SFT model: the eval stages read the
    SFT answers back for it. A changed chat template is another model, though the weights are the same."""
    import shutil

    sft = tiny_model(tmp_path / "sft")
    grpo = tmp_path / "grpo"
    shutil.copytree(sft, grpo)
    other = tiny_model(tmp_path / "other")
    (other / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ other }}"}))
    assert twins({"base": tmp_path / "missing", "sft": sft, "grpo": grpo, "x": other}) == {
        "base": "base", "sft": "sft", "grpo": "sft", "x": "x"}


def test_a_large_file_is_hashed_once_per_version_and_again_when_rewritten(tmp_path, monkeypatch):
    from rubricrl.core import resume

    monkeypatch.setattr(resume, "CACHED_FROM", 8)
    f = tmp_path / "model.safetensors"
    f.write_bytes(b"weights-1")
    first = resume.file_digest(f)
    opened = []
    real_open = open
    monkeypatch.setattr("builtins.open", lambda *a, **k: opened.append(a[0]) or real_open(*a, **k))
    assert resume.file_digest(f) == first and not opened  # the same version: not read again
    monkeypatch.setattr("builtins.open", real_open)
    f.write_bytes(b"weights-2")  # a new version: read and hashed again
    os.utime(f, ns=(1, 1))  # (a new mtime, whatever the clock's tick)
    assert resume.file_digest(f) != first
