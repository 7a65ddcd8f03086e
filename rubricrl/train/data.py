"""Tasks -> TRL datasets, through the one prompt template (rubricrl.core.prompt), fingerprinted by their content.

`Dataset.from_list` / `from_dict` fingerprint a new dataset by pickling its Arrow table through datasets' Hasher
(dill). On Python 3.12 with datasets 5.2 and dill 0.4.1 (the GPU image's Python and docker/Dockerfile.gpu's) that
failed (`PicklingError: Can't pickle <class 'MonthDayNano'>`), so SFT, GRPO and distillation build their datasets
with rows_dataset: the table straight from pyarrow, the fingerprint the sha256 of the rows' JSON, so the Hasher
never sees the table. Equal rows give equal fingerprints (datasets' cache keys stay stable across runs).
"""

from __future__ import annotations

import hashlib
import json
import logging

from rubricrl.core.prompt import gold_completion, task_messages
from rubricrl.core.taskfile import Task
from rubricrl.train.general import general_count, general_rows

log = logging.getLogger(__name__)


def token_count(tokenizer, messages: list[dict], add_generation_prompt: bool) -> int:
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=add_generation_prompt,
                                        tokenize=True, return_dict=True)["input_ids"]
    return len(ids)


def grpo_rows(tasks: list[Task], tokenizer, max_prompt_length: int, general_share: float,
              seed: int) -> tuple[list[dict], list[str]]:
    """Rows with `prompt` (chat messages), `task_id` and `check` (a general row's verifiable constraint, else ""),
    general rows mixed in, and the ids left out as too long.

    TRL 1.16 has no max_prompt_length, so over-long prompts are left out here instead of being cut
    (a cut prompt loses its schema or its text).
    """
    rows, skipped = [], []
    for t in tasks:
        messages = task_messages(t)
        if token_count(tokenizer, messages, True) > max_prompt_length:
            skipped.append(t.id)
        else:
            rows.append({"prompt": messages, "task_id": t.id, "check": ""})
    if skipped:
        log.warning("left out %d task(s) whose prompt exceeds %d tokens: %s", len(skipped), max_prompt_length,
                    ", ".join(skipped[:10]) + (" ..." if len(skipped) > 10 else ""))
    rows += [r for r in general_rows(general_count(len(rows), general_share), seed)
             if token_count(tokenizer, r["prompt"], True) <= max_prompt_length]
    return rows, skipped


def sft_rows(tasks: list[Task], tokenizer, max_length: int) -> tuple[list[dict], list[str]]:
    """Prompt-completion rows (loss on the completion only) and the ids left out (no reference, or too long)."""
    rows, skipped = [], []
    for t in tasks:
        if t.reference is None:
            skipped.append(t.id)
            continue
        prompt = task_messages(t)
        completion = [{"role": "assistant", "content": gold_completion(t)}]
        if token_count(tokenizer, prompt + completion, False) > max_length:
            skipped.append(t.id)  # a truncated example would teach a cut-off JSON answer
            continue
        rows.append({"prompt": prompt, "completion": completion})
    if skipped:
        log.warning("SFT left out %d task(s) without a reference or over %d tokens", len(skipped), max_length)
    return rows, skipped


def fingerprint(rows: list[dict]) -> str:
    """The sha256 of the rows as canonical JSON (datasets takes any string as a fingerprint)."""
    return hashlib.sha256(json.dumps(rows, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()


def rows_dataset(rows: list[dict]):
    """A `datasets.Dataset` of `rows` (dicts with the same keys), built without hashing its table."""
    import pyarrow as pa
    from datasets import Dataset
    from datasets.table import InMemoryTable

    if not rows:
        raise ValueError("rows_dataset: no rows")
    return Dataset(InMemoryTable(pa.Table.from_pylist(rows)), fingerprint=fingerprint(rows))
