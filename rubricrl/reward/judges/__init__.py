"""Judges for judge criteria: `grounded` (deterministic, CPU) and `openai` (any compatible endpoint); for a free-text
task's unchecked rubric items also `embedding` (a packaged sentence-embedding model)."""

from __future__ import annotations

from rubricrl.reward.judges.base import Judge, JudgeRequest, Verdict
from rubricrl.reward.judges.grounded import GroundedJudge
from rubricrl.config import JudgeConfig

__all__ = ["Judge", "JudgeRequest", "Verdict", "GroundedJudge", "build_judge"]


def build_judge(config: JudgeConfig, policy_model: str | None = None) -> Judge:
    if config.type == "grounded":
        return GroundedJudge()
    if config.type == "embedding":
        from rubricrl.reward.judges.embedding import EmbeddingJudge  # late: loads sentence-transformers

        return EmbeddingJudge(config)
    from rubricrl.reward.judges.openai_judge import OpenAIJudge  # late: needs httpx

    return OpenAIJudge(config, policy_model=policy_model)
