"""Perplexity on a fixed held-out general text: did post-training damage the model's language modelling?

`data/heldout.txt` is original prose written for this project (encyclopedic paragraphs, about 60%
English and 40% Chinese, paragraphs separated by blank lines), so no model was trained on it.
Each paragraph is an item scored by its mean negative log-likelihood per token; lower is better, for
`nll` per item and for the perplexity of `summarize`. Paired comparisons (base vs SFT vs RL) use the
per-item `nll`, which is only comparable between models that share a tokenizer.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

NAME = "perplexity"
DATA = Path(__file__).parent / "data" / "heldout.txt"


def load(n: int | None = None, path: str | Path | None = None) -> list[dict]:
    """The first `n` paragraphs (all when None) as items {"id": "ppl-001", "text": ...}."""
    path = Path(path) if path is not None else DATA
    if n is not None and n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", path.read_text(encoding="utf-8")) if p.strip()]
    return [{"id": f"ppl-{i:03d}", "text": text} for i, text in enumerate(paragraphs[:n], 1)]


def nll(model, tokenizer, items: list[dict], max_tokens: int = 256, batch_size: int = 4) -> list[dict]:
    """Per item {"id", "tokens", "nll"}: mean negative log-likelihood (nats) of its predicted tokens.

    The text is encoded the tokenizer's default way (with BOS where the tokenizer adds one) and cut to
    `max_tokens` tokens; every token after the first is predicted, so `tokens` is the length minus one.
    Batches are right-padded by hand: real tokens keep positions 0..n-1 whatever the batch (left padding
    would shift them in models that do not derive positions from the mask), and padded positions are
    masked out of attention and of the loss, so an item's nll does not depend on `batch_size`.
    """
    import torch

    encoded = [(item["id"], tokenizer(item["text"], truncation=True, max_length=max_tokens)["input_ids"])
               for item in items]
    for item_id, ids in encoded:
        if len(ids) < 2:
            raise ValueError(f"{item_id}: fewer than 2 tokens, nothing to predict")
    # Any id works as padding: padded positions are neither attended to nor scored.
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    device = next(model.parameters()).device
    results = []
    with torch.no_grad():
        for start in range(0, len(encoded), batch_size):
            batch = encoded[start:start + batch_size]
            width = max(len(ids) for _, ids in batch)
            input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, (_, ids) in enumerate(batch):
                input_ids[row, :len(ids)] = torch.tensor(ids)
                mask[row, :len(ids)] = 1
            input_ids, mask = input_ids.to(device), mask.to(device)
            logits = model(input_ids=input_ids, attention_mask=mask).logits[:, :-1].float()
            token_nll = torch.nn.functional.cross_entropy(
                logits.transpose(1, 2), input_ids[:, 1:], reduction="none")
            scored = mask[:, 1:].bool()
            sums = token_nll.masked_fill(~scored, 0.0).sum(dim=1)
            counts = scored.sum(dim=1)
            for (item_id, _), total, count in zip(batch, sums.tolist(), counts.tolist()):
                results.append({"id": item_id, "tokens": count, "nll": total / count})
    return results


def summarize(scored: list[dict]) -> dict:
    """Perplexity of the whole text: exp of the token-weighted mean nll, so long paragraphs weigh more."""
    tokens = sum(s["tokens"] for s in scored)
    if not tokens:
        raise ValueError("no scored tokens to summarize")
    mean_nll = sum(s["nll"] * s["tokens"] for s in scored) / tokens
    return {"perplexity": math.exp(mean_nll), "mean_nll": mean_nll, "tokens": tokens, "n": len(scored)}
