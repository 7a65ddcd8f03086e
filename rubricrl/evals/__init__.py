"""Evaluation of a policy on extraction tasks: greedy generation, rubric and gold metrics, reports."""

from rubricrl.evals.generate import generate_responses, generate_with_stats
from rubricrl.evals.task_eval import evaluate_model, evaluate_responses, samples_markdown

__all__ = ["evaluate_model", "evaluate_responses", "generate_responses", "generate_with_stats", "samples_markdown"]
