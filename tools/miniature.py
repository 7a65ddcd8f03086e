"""Production in miniature (configs/miniature.yaml): the tiny models it names, built locally.

    python -m tools.miniature build [ROOT]   # ROOT/.cache/miniature/{qwen2.5-7b-instruct,qwen2.5-3b-instruct}

Both are random Qwen2 models with the production checkpoints' vocabulary sizes and embedding tying
(PRODUCTION_MODELS), the Qwen2.5 tokenizer and chat template (miniature_tokenizer). The policy has
two layers, the student one: like 3B against 7B, the student is smaller (and its embeddings are tied).
"""

from __future__ import annotations

import sys
from pathlib import Path

# The production checkpoints' shapes (their config.json on the Hugging Face hub). The miniature keeps what code paths
# depend on: the architecture, the logit width (vocab_size: 7B and 72B have 152,064 rows, 3B 151,936, so the
# student's vocabulary must be aligned to the teacher's), tied or untied embeddings, grouped-query attention. The
# rest (hidden size, layers) is what the memory plan (tools/memory_plan.py) sizes the hardware from.
PRODUCTION_MODELS = {
    "Qwen/Qwen2.5-7B-Instruct": {"model_type": "qwen2", "vocab_size": 152064, "tie_word_embeddings": False,
                                 "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
                                 "num_attention_heads": 28, "num_key_value_heads": 4},
    "Qwen/Qwen2.5-3B-Instruct": {"model_type": "qwen2", "vocab_size": 151936, "tie_word_embeddings": True,
                                 "hidden_size": 2048, "intermediate_size": 11008, "num_hidden_layers": 36,
                                 "num_attention_heads": 16, "num_key_value_heads": 2},
    "Qwen/Qwen2.5-72B-Instruct": {"model_type": "qwen2", "vocab_size": 152064, "tie_word_embeddings": False,
                                  "hidden_size": 8192, "intermediate_size": 29568, "num_hidden_layers": 80,
                                  "num_attention_heads": 64, "num_key_value_heads": 8},
}


QWEN2_VOCAB = "models/ggml-vocab-qwen2.gguf"  # in the llama.cpp tree of the pinned llama-cpp-python sdist


def miniature_tokenizer():
    """The Qwen2.5 tokenizer without a download: Qwen2's vocabulary and merges from the vocab-only GGUF llama.cpp
    tests its tokenizer with (in the pinned llama-cpp-python sdist; `make setup` unpacks it beside the converter,
    with llama.cpp's test vectors: tests/inference/test_models.py checks the tokenizer against them), the Qwen2.5
    chat template (TRL ships it) and Qwen2.5-Instruct's end token <|im_end|>."""
    from transformers import AutoTokenizer
    from trl.chat_template_utils import qwen2_5_chat_template

    from rubricrl.core.errors import ConfigError
    from rubricrl.inference.conversion import converter_dir
    from rubricrl.inference.models import gguf_parsed_once

    vocab = converter_dir() / QWEN2_VOCAB
    if not vocab.is_file():
        raise ConfigError(f"{vocab}: the Qwen2 vocabulary is missing (make setup unpacks it from the "
                          "llama-cpp-python sdist with scripts/llama_cpp.sh)")
    with gguf_parsed_once():
        tokenizer = AutoTokenizer.from_pretrained(str(vocab.parent), gguf_file=vocab.name)
    tokenizer.chat_template = qwen2_5_chat_template
    tokenizer.eos_token, tokenizer.pad_token = "<|im_end|>", "<|endoftext|>"
    return tokenizer


def build_miniature(production: str, out_dir: str | Path, tokenizer, hidden_size: int = 64, layers: int = 2,
                    seed: int = 0) -> Path:
    """A tiny random Qwen2 with the production model's vocabulary size and embedding tying (PRODUCTION_MODELS), 4
    query heads on 2 key-value heads, saved with `tokenizer` (miniature_tokenizer) to out_dir. Its weights are
    drawn larger than the stock init, so greedy decoding is not one token repeated. Its generation config ends at
    <|im_end|> or <|endoftext|>, as Qwen2.5-Instruct's does."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    shape = PRODUCTION_MODELS[production]
    end = [tokenizer.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>")]
    config = Qwen2Config(vocab_size=shape["vocab_size"], tie_word_embeddings=shape["tie_word_embeddings"],
                         hidden_size=hidden_size, intermediate_size=hidden_size * 2, num_hidden_layers=layers,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32768,
                         rope_theta=1e6, rms_norm_eps=1e-6, bos_token_id=None, eos_token_id=end[0],
                         pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.copy_(torch.randn(p.shape, generator=g) * 2 / p.shape[-1] ** 0.5)
    model.generation_config = GenerationConfig(eos_token_id=end, pad_token_id=tokenizer.pad_token_id)
    out = Path(out_dir)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


POLICY, STUDENT = "Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-3B-Instruct"
FOLDERS = {POLICY: ".cache/miniature/qwen2.5-7b-instruct", STUDENT: ".cache/miniature/qwen2.5-3b-instruct"}


def build(root: str | Path = ".") -> dict[str, Path]:
    tokenizer = miniature_tokenizer()
    return {name: build_miniature(name, Path(root) / folder, tokenizer, layers=2 if name == POLICY else 1,
                                  seed=1 if name == POLICY else 2)
            for name, folder in FOLDERS.items()}


def dry_model(out_dir: str | Path) -> Path:
    """The one-GPU script's CPU dry mode model (configs/gpu_dry.yaml): a tiny random Llama (SmolLM2's architecture)
    with SmolLM2's tokenizer and chat template, so the llama.cpp converter and every stage take it."""
    from transformers import AutoTokenizer

    from rubricrl.inference.models import build_tiny_model, embedded_gguf, gguf_parsed_once

    out = Path(out_dir)
    if (out / "config.json").is_file():
        return out
    gguf = embedded_gguf()
    with gguf_parsed_once():
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    return build_tiny_model(out, hidden_size=64, layers=2, seed=3, tokenizer=tokenizer)


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "build" or len(argv) > 2:
        print(__doc__, file=sys.stderr)
        return 2
    for name, path in build(argv[1] if len(argv) > 1 else ".").items():
        print(f"{name} in miniature: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
