"""What every generation backend shares: the chat rendering of tasks and conversations, timing stats, threads."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Sequence

from rubricrl.core.prompt import task_messages
from rubricrl.core.taskfile import Task


@dataclass
class GenerationStats:
    n: int
    new_tokens: int  # generated tokens, each response counted up to and including its end token
    truncated: int  # responses that stopped at max_new_tokens without an end token
    seconds: float  # generation wall time (model loading excluded)
    batch_size: int | str  # "auto": sized by rubricrl.inference.batching where the call ran
    max_new_tokens: int
    threads: int

    @property
    def tokens_per_s(self) -> float:
        return self.new_tokens / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict:
        return {
            "n": self.n, "new_tokens": self.new_tokens, "truncated": self.truncated,
            "seconds": round(self.seconds, 3), "tokens_per_s": round(self.tokens_per_s, 2),
            "batch_size": self.batch_size, "max_new_tokens": self.max_new_tokens, "threads": self.threads,
        }


def default_threads() -> int:
    """The cores this process may use (affinity aware), at most 16: more rarely helps small models."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        n = os.cpu_count() or 1
    return max(1, min(16, n))


def prompt_texts(tokenizer, tasks: Sequence[Task]) -> list[str]:
    return chat_texts(tokenizer, [task_messages(t) for t in tasks])


def chat_texts(tokenizer, conversations: Sequence[list[dict]]) -> list[str]:
    """Each conversation (chat messages) rendered by the model's chat template, ready for the reply."""
    return [tokenizer.apply_chat_template(list(m), tokenize=False, add_generation_prompt=True) for m in conversations]
