"""GRPO on a mixed batch: extraction and free-text tasks under one rubric (each scored by its kind's criteria; TRL gets
None for the other kind's and leaves it out of the sum), and the monitor's true metric on both kinds."""

from __future__ import annotations

import math

from rubricrl.calibrate.draft import combine, derive_rubric, free_text_draft
from rubricrl.config import RollbackSettings
from rubricrl.data.replies import generate_replies
from rubricrl.inference.models import build_tiny_model
from rubricrl.reward.functions import RubricReward
from rubricrl.reward.scoring import RubricScorer
from rubricrl.train.grpo import train_grpo
from rubricrl.train.section import training_markdown
from tests.train_helpers import tiny_settings, tiny_tasks


def test_grpo_trains_on_extraction_and_free_text_tasks_together(tmp_path):
    model = build_tiny_model(tmp_path / "tiny")
    extraction = tiny_tasks()
    replies = generate_replies(seed=0, n_train=3, n_test=0)["train"]
    rubric = combine(derive_rubric(extraction), free_text_draft())
    tasks = extraction + replies
    settings = tiny_settings(max_steps=3, general_share=0.0, table_every=0,
                             rollback=RollbackSettings(reward_drop=None))
    result = train_grpo(model, tasks, tmp_path / "run", settings, RubricReward(RubricScorer(rubric)),
                        monitor_tasks=[extraction[0], replies[0]])
    assert result["global_step"] == 3
    logged = [e for e in result["log_history"] if "reward" in e]
    assert logged and all(math.isfinite(e["reward"]) for e in logged)
    keys = set().union(*logged)
    # Both kinds' criteria logged (TRL's nanmean over the rows of their kind).
    assert {"rewards/items/mean", "rewards/faithfulness/mean", "rewards/pitfalls/mean"} <= keys
    monitor = [e for e in result["log_history"] if "monitor/field_accuracy" in e]
    assert monitor and all(0.0 <= e["monitor/field_accuracy"] <= 1.0 for e in monitor)
    # The report says how the strict columns read for the free-text tasks it monitored.
    assert result["monitor_kinds"] == ["extraction", "free_text"]
    report = training_markdown(result)
    assert "the held-out checklist for free text" in report and "null for present a fact not stated" in report
    assert "null for present a fact" not in training_markdown({**result, "monitor_kinds": ["extraction"]})
