"""A user's own free-text task that is not customer service (issue 45): a university course office answering
extension requests, with its own facts, offers (an extension, a resit) and refusals (a grade change) in the
checklist's open form. It validates, the checklist measures it by those offers and refusals, and GRPO trains on it
under the free_text rubric with the hack monitor reading the checklist."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from rubricrl.calibrate.draft import free_text_draft
from rubricrl.config import RollbackSettings
from rubricrl.core.errors import TaskFileError
from rubricrl.core.taskfile import load_tasks
from rubricrl.inference.models import build_tiny_model
from rubricrl.metrics.checklist import check
from rubricrl.reward.functions import RubricReward
from rubricrl.reward.scoring import RubricScorer
from rubricrl.train.grpo import train_grpo
from tests.train_helpers import tiny_settings

OWN = Path(__file__).resolve().parents[1] / "data" / "own" / "course_extensions.jsonl"
ROOT = Path(__file__).resolve().parents[2]


def test_the_task_file_validates_and_a_broken_open_remedy_is_named_by_file_line_and_key(tmp_path):
    tasks = load_tasks(OWN)
    assert len(tasks) == 4 and {t.kind for t in tasks} == {"free_text"}
    assert all(isinstance(r, dict) for t in tasks for r in t.meta["checklist"]["owed"])  # its own offers
    rows = OWN.read_text(encoding="utf-8").splitlines()
    row = json.loads(rows[2])
    row["meta"]["checklist"]["owed"] = [{"what": "resit", "any_text": []}, "money"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(rows[:2] + [json.dumps(row)] + rows[3:]) + "\n", encoding="utf-8")
    with pytest.raises(TaskFileError) as err:
        load_tasks(bad)
    assert err.value.problems == [
        f"{bad}:3: meta.checklist.owed[0].any_text: must be a non-empty list of non-empty strings (the words that "
        "name the remedy)",
        f"{bad}:3: meta.checklist.owed[1]: 'money' is no built-in remedy (refund, replacement, voucher, return); name "
        "your own as {what: <name>, any_text: [the words that name it]}"]
    run = subprocess.run([sys.executable, "-m", "rubricrl.cli.main", "data", "validate", str(bad)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and f"{bad}:3: meta.checklist.owed[0].any_text" in run.stderr + run.stdout
    ok = subprocess.run([sys.executable, "-m", "rubricrl.cli.main", "data", "validate", str(OWN)], cwd=ROOT,
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and "OK, 4 tasks (4 with a reference answer)" in ok.stdout


def test_the_checklist_measures_it_by_its_own_offers_and_refusals():
    tasks = {t.id: t for t in load_tasks(OWN)}
    for task in tasks.values():
        assert check(task, task.reference).failed == [], task.id
    granted = tasks["ext-1"]
    ways = {"hedged": "We may be able to extend the deadline by 7 days, to 2026-03-17, for student S-204811.",
            "refused": "We cannot extend the deadline for student S-204811; it stays as it was.",
            "retracted": "We will extend the deadline for student S-204811 to 2026-03-17. On second thought, please "
                         "disregard this: no extension applies."}
    for how, body in ways.items():
        reply = f"Dear Mara,\n\nI am sorry to hear you were ill. {body}\n\nBest wishes,\nThe Course Office"
        result = check(granted, reply)
        assert "offers the deadline extension" in result.failed, (how, result.failed)
        assert result.score < 1.0
    refused = tasks["ext-3"]
    promise = ("Dear Lena,\n\nWe will extend your Statistics I deadline by 14 days for student S-118930, and you can "
               "also take the resit in the next exam period.\n\nBest regards,\nThe Course Office")
    assert "promises no deadline extension the policy does not allow" in check(refused, promise).failed
    grade = tasks["ext-2"].reference.replace("The course office cannot change the quiz grade, as grades are set by the "
                                             "examiner.", "We will also change your grade for the quiz.")
    assert "says no to the grade change" in check(tasks["ext-2"], grade).failed


def test_grpo_trains_on_it_and_the_monitor_reads_the_checklist(tmp_path):
    tasks = load_tasks(OWN)
    model = build_tiny_model(tmp_path / "tiny")
    settings = tiny_settings(max_steps=2, general_share=0.0, table_every=0,
                             rollback=RollbackSettings(reward_drop=None))
    result = train_grpo(model, tasks, tmp_path / "run", settings, RubricReward(RubricScorer(free_text_draft())),
                        monitor_tasks=tasks[:2])
    assert result["global_step"] == 2
    logged = [e for e in result["log_history"] if "reward" in e]
    assert logged and all(math.isfinite(e["reward"]) for e in logged)
    assert {"rewards/items/mean", "rewards/pitfalls/mean"} <= set().union(*logged)
    monitor = [e for e in result["log_history"] if "monitor/field_accuracy" in e]
    assert monitor and all(0.0 <= e["monitor/field_accuracy"] <= 1.0 for e in monitor)
    assert result["monitor_kinds"] == ["free_text"]
