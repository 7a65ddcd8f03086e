"""The true metric of any task: strict fields for extraction, the checklist for free text, read alike."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from rubricrl.calibrate.reply_corruptions import corrupt_reply
from rubricrl.data.replies import generate_replies
from rubricrl.evaluate.task import evaluate_responses, samples_markdown, strict_row
from rubricrl.metrics.checklist import checklist_counts
from rubricrl.metrics.compare import PAIRED_METRICS, paired_comparisons
from rubricrl.metrics.strict import strict_counts, summarize
from rubricrl.metrics.true_metric import scorable, true_counts
from rubricrl.reward.scoring import RubricScorer
from tests.reward.test_items import extraction_task, mixed_rubric


def test_free_text_reads_as_fields_omissions_and_inventions():
    task = generate_replies(seed=4, n_train=1, n_test=0)["train"][0]
    gold = true_counts(task, task.reference)
    assert gold.exact and gold.right == gold.fields and gold.null_for_present == gold.invented == 0
    dropped = true_counts(task, corrupt_reply(task)["drop_essential"])
    assert dropped.null_for_present >= 1 and not dropped.exact  # a fact not stated reads as an omission
    broken = true_counts(task, corrupt_reply(task)["break_policy"])
    assert broken.invented >= 1  # a broken guard reads as an invention
    assert scorable(task) and not scorable(dataclasses.replace(task, meta={}))


def test_the_hack_monitor_reads_free_text_through_the_checklist():
    """GRPO's hack monitor takes its true metric from true_counts (through true_counts_each; read from its source:
    importing the trainer would load transformers), which gives a free-text reply the checklist's counts: a bag of
    the facts' tokens is caught."""
    tree = ast.parse((Path(__file__).resolve().parents[2] / "rubricrl/train/monitor.py").read_text(encoding="utf-8"))
    assert any(isinstance(n, ast.ImportFrom) and n.module == "rubricrl.metrics.true_metric"
               and {"true_counts", "true_counts_each"} & {a.name for a in n.names} for n in ast.walk(tree))
    task = generate_replies(seed=4, n_train=1, n_test=0)["train"][0]
    stuffed = corrupt_reply(task)["stuffed"]
    assert true_counts(task, stuffed) == checklist_counts(task, stuffed)
    assert true_counts(task, stuffed).right <= true_counts(task, task.reference).right - 3


def test_an_empty_free_text_reply_leaves_every_fact_unstated_once():
    """The task gate's abstention rate: an empty reply states none of the facts, a rate of 1, not 2 (its checklist
    already counts every fact as not stated; counting "no answer" on top made the paired interval raise)."""
    task = generate_replies(seed=4, n_train=1, n_test=0)["train"][0]
    rows = {m: [{"id": task.id, "part": "in_domain", "total": 0.0,
                 "strict": strict_row(true_counts(task, reply))}] for m, reply in
            (("sft", task.reference), ("grpo", ""))}
    assert rows["grpo"][0]["strict"]["parsed"] == 0
    rate = {m: PAIRED_METRICS["unstated_rate"][0](r[0]) / PAIRED_METRICS["unstated_rate"][1](r[0])
            for m, r in rows.items()}
    assert rate == {"sft": 0.0, "grpo": 1.0}
    unstated = [r for r in paired_comparisons(rows, n_resamples=50) if r["metric"] == "unstated_rate"]
    assert unstated and all(r["model"] == "grpo" for r in unstated)


def test_extraction_is_the_strict_metric_unchanged():
    task = extraction_task()
    answer = '{"order": "A-1042", "amount": 45.0}'
    assert true_counts(task, answer) == strict_counts(task, answer)


def test_one_evaluation_reports_both_kinds_per_part():
    ex, ft = extraction_task(), generate_replies(seed=4, n_train=1, n_test=0)["train"][0]
    ex = dataclasses.replace(ex, meta={"part": "extraction"})
    ft = dataclasses.replace(ft, meta={**ft.meta, "part": "free_text"})
    rubric = mixed_rubric()
    metrics = evaluate_responses([ex, ft, ft], ['{"order": "A-1042", "amount": 45.0}', ft.reference, "No."],
                                 RubricScorer(rubric), n_boot=50)
    assert metrics["parts"]["extraction"]["strict"]["field_accuracy"] == 1.0
    assert metrics["parts"]["free_text"]["strict"]["exact_object_rate"] == 0.5
    assert metrics["parts"]["extraction"]["components"]["items"] is None  # not a component of that kind
    no = RubricScorer(rubric).score(ft, "No.").component("items").score
    assert metrics["all"]["components"]["items"] == (10.0 + no) / 2  # over the two free-text replies only
    table = samples_markdown(metrics["samples"])
    assert "items" in table and "format" in table
    assert summarize([true_counts(ft, ft.reference), true_counts(ex, "{}")])["n"] == 2
