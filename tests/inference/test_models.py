"""prepare_model: the embedded SmolLM2 GGUF becomes a normal, trainable HF folder, offline; the miniature's Qwen2.5 tokenizer and models."""

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


@pytest.fixture(scope="module")
def qwen_tokenizer():
    from tools.miniature import miniature_tokenizer

    return miniature_tokenizer()


@pytest.mark.slow
def test_the_miniature_tokenizer_is_qwen2_by_llama_cpps_test_vectors(qwen_tokenizer):
    """llama.cpp's own tokenizer tests (the inputs and the original tokenizer's ids, shipped beside the vocab)."""
    from rubricrl.inference.conversion import converter_dir
    from tools.miniature import QWEN2_VOCAB

    vocab = converter_dir() / QWEN2_VOCAB
    inputs = vocab.with_name(vocab.name + ".inp").read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")
    expected = vocab.with_name(vocab.name + ".out").read_text(encoding="utf-8").strip().split("\n")
    assert len(expected) >= 40
    for text, ids in zip(inputs, expected):
        assert qwen_tokenizer.encode(text, add_special_tokens=False) == [int(i) for i in ids.split()], text
    assert len(qwen_tokenizer) == 151936 and qwen_tokenizer.eos_token == "<|im_end|>"
    prompt = qwen_tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False,
                                                add_generation_prompt=True)
    assert prompt == ("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant."
                      "<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")


@pytest.mark.parametrize("name,rows,tied", [("Qwen/Qwen2.5-7B-Instruct", 152064, False),
                                            ("Qwen/Qwen2.5-3B-Instruct", 151936, True)])
def test_miniatures_keep_the_production_vocabulary_and_tying(qwen_tokenizer, tmp_path, name, rows, tied):
    from transformers import AutoModelForCausalLM

    from tools.miniature import build_miniature

    model = AutoModelForCausalLM.from_pretrained(build_miniature(name, tmp_path / "m", qwen_tokenizer, layers=1))
    assert model.config.model_type == "qwen2" and model.config.vocab_size == rows
    assert model.config.tie_word_embeddings is tied
    assert (model.get_output_embeddings().weight is model.get_input_embeddings().weight) is tied
    assert model.config.num_attention_heads > model.config.num_key_value_heads  # grouped-query attention
