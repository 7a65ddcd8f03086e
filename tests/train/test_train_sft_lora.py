"""SFT on gold answers, and LoRA runs (SFT and GRPO) that publish a merged, plain HF model folder."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

from rubricrl.inference.models import build_tiny_model
from rubricrl.core.prompt import gold_completion, task_messages
from rubricrl.train.data import sft_rows
from rubricrl.train.grpo import train_grpo
from rubricrl.config import LoRASettings, SFTSettings
from rubricrl.train.sft import train_sft
from tests.train_helpers import rubric_reward, tiny_settings, tiny_tasks


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def changed(a, b) -> bool:
    wa, wb = load_file(a / "model.safetensors"), load_file(b / "model.safetensors")
    assert wa.keys() == wb.keys()  # merged LoRA: the base model's own tensor names, no adapter keys
    return any(not torch.equal(wa[k], wb[k]) for k in wa)


def test_sft_rows_use_the_one_prompt_template(tiny_model):
    tasks = tiny_tasks()
    no_ref = dataclasses.replace(tasks[0], id="no-ref", reference=None)
    rows, skipped = sft_rows([*tasks, no_ref], AutoTokenizer.from_pretrained(tiny_model), max_length=4096)
    assert skipped == ["no-ref"]
    assert rows[0]["prompt"] == task_messages(tasks[0])
    assert rows[0]["completion"] == [{"role": "assistant", "content": gold_completion(tasks[0])}]


@pytest.mark.parametrize("lora", [None, LoRASettings(r=4, alpha=8)], ids=["full", "lora"])
def test_sft_publishes_a_trained_model_folder(tiny_model, tmp_path, lora):
    out = train_sft(tiny_model, tiny_tasks(), tmp_path / "sft", SFTSettings(max_steps=3, learning_rate=1e-2, lora=lora)).model_dir
    assert out == tmp_path / "sft" and changed(tiny_model, out)
    AutoModelForCausalLM.from_pretrained(out)
    AutoTokenizer.from_pretrained(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sft"]  # no scratch or temp folder left


def test_grpo_with_lora_saves_a_merged_model(tiny_model, tmp_path):
    settings = tiny_settings(max_steps=2, learning_rate=1e-2, lora=LoRASettings(r=4, alpha=8))
    result = train_grpo(tiny_model, tiny_tasks(), tmp_path / "run", settings, rubric_reward())
    assert result["global_step"] == 2
    assert changed(tiny_model, tmp_path / "run" / "model")
    assert any("kl" in e for e in result["log_history"])  # PEFT: the reference is the adapter-free base

    # Rerunning a finished run trains nothing and republishes the final checkpoint, its adapter merged.
    first = load_file(tmp_path / "run" / "model" / "model.safetensors")
    again = train_grpo(tiny_model, tiny_tasks(), tmp_path / "run", settings, rubric_reward())
    assert (again["resumed_from_step"], again["global_step"]) == (2, 2)
    second = load_file(tmp_path / "run" / "model" / "model.safetensors")
    assert all(torch.allclose(first[k], second[k], atol=1e-6) for k in first)
