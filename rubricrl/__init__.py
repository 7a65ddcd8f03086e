"""RubricRL: post-train LLMs with rubric rewards instead of a trained reward model."""

__version__ = "0.1.0"
