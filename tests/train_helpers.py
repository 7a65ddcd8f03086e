"""Shared pieces of the training tests: tiny tasks, the real rubric, small CPU settings."""

from __future__ import annotations

from pathlib import Path

from transformers import TrainerCallback

from rubricrl.reward.functions import RubricReward
from rubricrl.reward.scoring import RubricScorer
from rubricrl.reward.load import load_rubric
from rubricrl.core.taskfile import Task
from rubricrl.config import GRPOSettings

ROOT = Path(__file__).resolve().parent.parent
RUBRIC = ROOT / "rubricrl" / "reward" / "rubrics" / "json_extraction.yaml"


def tiny_tasks() -> list[Task]:
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "price": {"type": ["number", "null"]}},
              "required": ["name", "price"]}
    return [
        Task("t1", "Extract the product.", "The Lumo lamp costs 25 dollars.", schema, ("Output JSON only.",),
             {"name": "Lumo lamp", "price": 25}),
        Task("t2", "Extract the product.", "The Vela kettle is on sale; no price yet.", schema, (),
             {"name": "Vela kettle", "price": None}),
        Task("t3", "Extract the product.", "Buy the Orbi fan for 40 dollars today.", schema, (),
             {"name": "Orbi fan", "price": 40}),
    ]


def load_benchmark(name: str):
    """A script of benchmarks/ as a module (they are scripts, not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def monitor_tasks(k: int = 8) -> list[Task]:
    """k validation tasks with gold answers, every value stated (tiny_tasks' schema): enough tasks for the hack
    monitor to show a rise on evidence (rubricrl.metrics.rise.MIN_TASKS is 6)."""
    schema = tiny_tasks()[0].schema
    items = ("lamp", "kettle", "fan", "clock", "chair", "mug", "desk", "radio", "stool", "vase", "pan", "bell")
    return [Task(f"m{i}", "Extract the product.", f"The Nova {items[i % len(items)]} costs {10 + 5 * i} dollars.",
                 schema, (), {"name": f"Nova {items[i % len(items)]}", "price": 10 + 5 * i}) for i in range(k)]


def rubric_reward() -> RubricReward:
    return RubricReward(RubricScorer(load_rubric(RUBRIC)))


def tiny_settings(**overrides) -> GRPOSettings:
    """Two completions of 8 tokens per prompt: a step takes well under a second on the tiny model."""
    base = dict(num_generations=2, per_device_batch_size=2, grad_accum=1, temperature=0.7, max_completion_length=8, max_steps=6,
                save_steps=1, save_total_limit=2, learning_rate=1e-3, general_share=0.25, table_every=2)
    base.update(overrides)
    return GRPOSettings(**base)


class FakeKL(TrainerCallback):
    """Replaces the logged KL with a huge value at steps from_step..to_step, `times` times in all.

    Passed to train_grpo it runs before the real rollback monitor, which then sees the fake value.
    """

    def __init__(self, from_step: int, to_step: int, times: int):
        self.steps, self.left = range(from_step, to_step + 1), times

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "kl" in logs and state.global_step in self.steps and self.left:
            logs["kl"] = 1e3
            self.left -= 1


def roughen_weights(model_dir, seed: int):
    """Redraw every matrix of a saved tiny model with larger random weights: the stock init only ever emits
    newlines, which would make order, batching and engine comparisons vacuous."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.copy_(torch.randn(p.shape, generator=g) * 2 / p.shape[-1] ** 0.5)
    model.save_pretrained(model_dir)
    return model_dir
