"""The transformers backend: batched generation on the machine's device.

Where a GPU is visible the model runs there in bf16 (fp32 when asked, or where the GPU lacks bf16); otherwise
on CPU in fp32. Prompts are sorted by token length (longest first) so each batch pads little; only the new
tokens are decoded, special tokens skipped, each answer cut after its end token.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from rubricrl.inference.batching import BatchSize, generation_batch


@contextmanager
def torch_threads(n: int):
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def placement(device: str = "auto", precision: str | None = None):
    """(torch device, dtype) to generate with. `device` and `precision` take CommonSettings' values:
    device "auto" is cuda when available, "cpu" forces CPU; on CUDA the weights are bf16 unless
    precision is "fp32" or the GPU has no bf16. CPU always gets fp32 (bf16 there is slow or unsupported)."""
    import torch

    dev = torch.device("cuda" if device != "cpu" and torch.cuda.is_available() else "cpu")
    bf16 = dev.type == "cuda" and precision != "fp32" and torch.cuda.is_bf16_supported()
    return dev, torch.bfloat16 if bf16 else torch.float32


def cpu_bf16() -> bool:
    """The CPU has native bf16 matrix instructions (AVX-512 BF16 or AMX, /proc/cpuinfo), where bf16 autocast is
    fast; on AVX2-only CPUs it is emulated and slower than fp32."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    return bool({"avx512_bf16", "amx_bf16"} & set(flags))


def resolve_precision(device: str, precision: str) -> str:
    """A training precision setting ("fp32", "bf16" or "auto") as trained: auto is bf16 on a GPU that has it and
    on a CPU with native bf16 (cpu_bf16), fp32 elsewhere (README, "Precision": measured on both kinds)."""
    if precision != "auto":
        return precision
    import torch

    if device != "cpu" and torch.cuda.is_available():
        return "bf16" if torch.cuda.is_bf16_supported() else "fp32"
    return "bf16" if cpu_bf16() else "fp32"


def load_for_generation(model_dir: str | Path, device: str = "auto", precision: str | None = None):
    """Model (eval mode, on `placement(device, precision)`) and tokenizer set up for left-padded batches."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dev, dtype = placement(device, precision)
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=dtype).to(dev)
    model.eval()
    return model, tokenizer


def _decode_rows(rows, eos_ids, tokenizer) -> tuple[list[str], int, int]:
    """Texts of generated token rows cut after their end token; (texts, new tokens, truncated count)."""
    texts, new_tokens, truncated = [], 0, 0
    for row in rows:
        end = next((k for k, tok in enumerate(row) if tok in eos_ids), None)
        if end is None:
            truncated += 1
            new_tokens += len(row)
        else:
            new_tokens += end + 1
            row = row[:end + 1]
        texts.append(tokenizer.decode(row, skip_special_tokens=True))
    return texts, new_tokens, truncated


def batched_generate(model, tokenizer, texts: list[str], batch_size: BatchSize, num_return_sequences: int = 1,
              desc: str | None = None, cpu_default: int = 8, **gen_kwargs) -> tuple[list[list[str]], int, int]:
    """Completions per prompt text (input order), prompts batched longest first; (texts, new tokens, truncated).
    batch_size `auto`: sized to the card's free memory for the longest prompt (rubricrl.inference.batching),
    `cpu_default` off a GPU (the caller's CPU default)."""
    import torch
    from tqdm import tqdm
    from transformers import GenerationConfig

    # The chat template writes any BOS itself: do not add special tokens a second time.
    ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    order = sorted(range(len(texts)), key=lambda i: (-len(ids[i]), i))
    new = gen_kwargs.get("max_new_tokens") or model.generation_config.max_new_tokens or 256
    batch_size = generation_batch(batch_size, model, len(ids[order[0]]) if ids else 0, new, num_return_sequences,
                                  cpu_default)
    eos = model.generation_config.eos_token_id
    if eos is None:
        eos = tokenizer.eos_token_id
    eos_ids = set(eos if isinstance(eos, list) else [eos])
    gen_config = GenerationConfig(eos_token_id=eos, pad_token_id=tokenizer.pad_token_id,
                                  num_return_sequences=num_return_sequences, use_cache=True, **gen_kwargs)
    out: list[list[str]] = [[] for _ in texts]
    new_tokens = truncated = 0
    device = next(model.parameters()).device
    # A bar on stderr even when it is a pipe (a stage under DVC or the flow), updated at most every 5 s.
    bar = tqdm(total=len(order) * num_return_sequences, desc=desc, unit="answer", mininterval=5, disable=not desc)
    with torch.inference_mode(), bar:
        for b in range(0, len(order), batch_size):
            chunk = order[b:b + batch_size]
            batch = tokenizer.pad({"input_ids": [ids[i] for i in chunk]}, padding=True, return_tensors="pt").to(device)
            seqs = model.generate(**batch, generation_config=gen_config)
            rows = seqs[:, batch["input_ids"].shape[1]:].tolist()
            decoded, n_new, n_trunc = _decode_rows(rows, eos_ids, tokenizer)
            new_tokens += n_new
            truncated += n_trunc
            for j, i in enumerate(chunk):
                out[i] = decoded[j * num_return_sequences:(j + 1) * num_return_sequences]
            bar.update(len(rows))
    return out, new_tokens, truncated
