"""prepare_model: the embedded SmolLM2 GGUF becomes a normal, trainable HF folder, offline."""

import json

import pytest

from rubricrl.inference.models import EMBEDDED_POLICY, prepare_policy


@pytest.mark.slow
def test_embedded_policy_becomes_a_trainable_hf_folder(tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = prepare_policy(EMBEDDED_POLICY, tmp_path / "base")
    config = json.loads((out / "config.json").read_text())
    assert "quantization_config" not in config  # a leftover gguf config makes trainers refuse the model
    assert config["hidden_size"] == 576
    model = AutoModelForCausalLM.from_pretrained(out)
    tok = AutoTokenizer.from_pretrained(out)
    assert tok.chat_template and "<|im_start|>" in tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False)
    batch = tok(['{"a": 1}'], return_tensors="pt")
    loss = model(**batch, labels=batch["input_ids"]).loss
    loss.backward()
    assert torch.isfinite(loss) and model.model.embed_tokens.weight.grad is not None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["base"]  # written atomically: no temp folder left


def test_gguf_parsed_once_caches_inside_the_block_and_restores_gguf_after():
    import gguf

    from rubricrl.inference.models import gguf_parsed_once

    before = gguf.GGUFReader, gguf.get_tensor_name_map
    with gguf_parsed_once():
        a = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 2)
        assert gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 2) is a
        assert gguf.GGUFReader.cache_info().maxsize == 2
    assert (gguf.GGUFReader, gguf.get_tensor_name_map) == before
    assert gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 2) is not a
