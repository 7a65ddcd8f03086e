"""Free text through the pipeline's own entries: data.task_family, the rubric stage's draft for each family, the
calibration on reply corruptions (and mixed sets), stratified slices by kind, and the reward functions TRL gets."""

import json
import math
import random

import pytest

from rubricrl.calibrate.calibrate import calibration_set
from rubricrl.calibrate.gate import gate_failures
from rubricrl.calibrate.reply_corruptions import EXPECTED, MODES
from rubricrl.calibrate.section import markdown
from rubricrl.calibrate.workflow import generate_draft, run_calibration
from rubricrl.config import DataParams, Params
from rubricrl.core.errors import ConfigError
from rubricrl.core.slices import stratified
from rubricrl.data.prepare import generate_family, prepare_splits, split_stats
from rubricrl.reward.functions import RubricReward
from rubricrl.reward.scoring import RubricScorer


def _params(family: str, **data) -> Params:
    p = Params()
    return p.model_copy(update={"data": DataParams(task_family=family, **data),
                                "rubric": p.rubric.model_copy(update={"policy_samples": 0})})


@pytest.fixture(scope="module")
def splits():
    return {fam: prepare_splits(_params(fam, n_train=120, n_val=30, n_test=40).data)
            for fam in ("extraction", "free_text", "mixed")}


def test_each_family_gives_its_kinds_and_mixed_gives_half_of_every_split(splits):
    stats = {fam: split_stats(s) for fam, s in splits.items()}
    assert stats["extraction"]["train"]["kinds"] == {"extraction": 120}
    assert stats["free_text"]["train"]["kinds"] == {"free_text": 120}
    assert stats["free_text"]["test"]["parts"] == {"held_out_domain": 16, "in_domain": 24}
    held = {t.meta["domain"] for t in splits["free_text"]["test"] if t.meta["part"] == "held_out_domain"}
    assert held == {"customer_reply/double_charge"}
    assert not any("double_charge" in t.id for t in splits["free_text"]["train"] + splits["free_text"]["val"])
    mixed = stats["mixed"]
    assert mixed["test"]["kinds"] == {"extraction": 20, "free_text": 20}
    assert sum(mixed["train"]["kinds"].values()) == 120 and sum(mixed["val"]["kinds"].values()) == 30
    assert sum(mixed["train"]["kinds"].values()) + sum(mixed["val"]["kinds"].values()) == 150
    assert mixed["train"]["kinds"]["free_text"] + mixed["val"]["kinds"]["free_text"] == 75
    # The extraction half is the extraction family's own tasks (the same generator and seed).
    assert [t.id for t in splits["mixed"]["test"] if t.kind == "extraction"] == \
        [t.id for t in prepare_splits(_params("extraction", n_train=60, n_val=15, n_test=20).data)["test"]]


def test_held_out_scenarios_are_a_setting_and_unknown_ones_are_named():
    s = prepare_splits(_params("free_text", n_train=40, n_val=10, n_test=20, heldout_scenarios=["wrong_item"]).data)
    assert {t.meta["domain"] for t in s["test"] if t.meta["part"] == "held_out_domain"} == {"customer_reply/wrong_item"}
    with pytest.raises(ConfigError, match="params: data: unknown held-out scenario.*refund_please"):
        prepare_splits(_params("free_text", heldout_scenarios=["refund_please"]).data)


def test_the_draft_follows_the_kinds_in_the_data(splits):
    p = _params("extraction")
    ext, _ = generate_draft(splits["extraction"]["train"], p)
    free, _ = generate_draft(splits["free_text"]["train"], p)
    both, _ = generate_draft(splits["mixed"]["train"], p)
    assert ext.kinds == ["extraction"] and free.kinds == ["free_text"] and both.kinds == ["extraction", "free_text"]
    assert {c.id for c in free.criteria} == {"items"} and {x.id for x in free.penalties} == {"pitfalls"}
    assert {c.id for c in both.criteria} == {c.id for c in ext.criteria} | {"items"}
    assert both.max_total_for("extraction") == ext.max_total and both.max_total_for("free_text") == 10
    assert free.item_judge is None  # the embedded data's items are all checked: no judge needed on the CPU


def test_free_text_calibration_puts_gold_above_every_reply_corruption_and_passes_its_gate(splits):
    p = _params("free_text")
    draft, _ = generate_draft(splits["free_text"]["train"], p)
    cal = run_calibration(draft, splits["free_text"]["val"], p)
    report = cal.report
    assert set(report["probes"]) == set(MODES) and report["dropped"] == []
    for mode, row in report["probes"].items():
        assert row["pass"] and row["worst_margin"] >= p.rubric.min_margin, (mode, row)
    assert report["reward"]["pairwise_accuracy"] == 1.0 and report["reward"]["spearman_accuracy"] > 0.5
    assert report["components"]["items"]["auc"] > 0.9 and report["components"]["pitfalls"]["auc"] > 0.9
    assert report["economics"]["cost"] == {}  # extraction's ways to miss a field do not apply to replies
    assert gate_failures(report, p.rubric) == []
    # The report speaks of the checklist and leaves out what only extraction has (prices of a missed JSON field,
    # the faithfulness judge, an empty judge table).
    text = markdown({**report, "gate_on": "referenced"}, [])
    assert report["kinds"] == ["free_text"] and "Spearman vs checklist score" in text
    # Issue 37's hacks are probes of their own, in the table and under the gate's margin like every other one.
    # ... and the checklist (an independent reading of the reply) puts stuffed, negated and refusing well below gold
    # too; the table shows it beside gold's.
    assert "| checklist score (gold) |" in text
    for mode in ("stuffed", "negated", "refusing", "word_salad"):
        row = report["probes"][mode]
        assert row["worst_margin"] >= 3.0 and f"| {mode} | " in text, mode
        # the hacks' gap in tests/data: a fifth of the checklist (issue 45 gave it 3 more entries: two guards and
        # padding; a hack's 3 failed entries are 0.21 of 14 where they were 0.27 of 11)
        assert row["true_metric_gold"] == 1.0 and row["true_metric"] <= 0.8, row
    for extraction_only in ("field accuracy", "Price of a missed field", "null vs distractor", "faithfulness",
                            "abstaining", "| criterion | judge |"):
        assert extraction_only not in text, extraction_only
    assert "No judge criterion in this rubric" in text and "items read its source, not its gold reply" in text


def test_a_mixed_calibration_scores_each_component_on_its_own_kind(splits):
    p = _params("mixed")
    draft, _ = generate_draft(splits["mixed"]["train"], p)
    cal = run_calibration(draft, splits["mixed"]["val"], p)
    comps = cal.report["components"]
    assert {"faithfulness", "items", "pitfalls", "missed_values"} <= set(comps)
    assert all(row["keep"] for row in comps.values())
    # items is scored on the free-text items only, faithfulness on the extraction ones.
    signed = cal.points["signed"]
    kinds = [it.task.kind for it in calibration_set(
        [t for t in splits["mixed"]["val"] if t.reference is not None], p.rubric.seed)]
    assert [v is not None for v in signed["items"]] == [k == "free_text" for k in kinds]
    assert [v is not None for v in signed["faithfulness"]] == [k == "extraction" for k in kinds]
    assert {"drop_essential", "null_for_present"} <= set(cal.report["probes"])
    assert gate_failures(cal.report, p.rubric) == []
    text = markdown({**cal.report, "gate_on": "referenced"}, [])
    assert "Spearman vs strict field accuracy / checklist score" in text and "Price of a missed field" in text
    assert "faithfulness judge can only check" in text and "items read its source" in text


def test_reply_corruptions_name_components_the_free_text_rubric_has(splits):
    draft, _ = generate_draft(splits["free_text"]["train"], _params("free_text"))
    ids = {c.id for c in draft.criteria} | {x.id for x in draft.penalties}
    assert set(EXPECTED) == set(MODES)
    assert all(set(targets) <= ids and 0 <= level < 3 for targets, level in EXPECTED.values())


def test_short_slices_take_both_kinds_of_a_mixed_split(splits):
    val = splits["mixed"]["val"]
    assert [t.kind for t in val[:6]] == ["extraction"] * 6  # file order: extraction first
    assert {t.kind for t in stratified(val, 6)} == {"extraction", "free_text"}
    assert sum(t.kind == "free_text" for t in stratified(val, 6)) == 3


def test_reward_functions_give_none_for_criteria_of_the_other_kind(splits):
    draft, _ = generate_draft(splits["mixed"]["train"], _params("mixed"))
    tasks = [next(t for t in splits["mixed"]["val"] if t.kind == k) for k in ("extraction", "free_text")]
    reward = RubricReward(RubricScorer(draft), {t.id: t for t in tasks})
    answers = [json.dumps(tasks[0].reference, ensure_ascii=False), tasks[1].reference]
    funcs, weights = reward.component_funcs()
    by_name = {f.__name__: f(completions=answers, task_id=[t.id for t in tasks]) for f in funcs}
    assert by_name["items"][0] is None and by_name["items"][1] == 10.0
    assert by_name["format"][1] is None and by_name["format"][0] == 3.0
    # What TRL sums (None left out) is each task's own total.
    totals = reward(completions=answers, task_id=[t.id for t in tasks])
    for i, total in enumerate(totals):
        summed = sum(w * v[i] for (name, v), w in zip(by_name.items(), weights) if v[i] is not None)
        assert math.isclose(summed, total, abs_tol=1e-6)


def test_the_data_stage_drafts_items_for_user_tasks_written_without_them(tmp_path, monkeypatch):
    from rubricrl.stages import data as stage
    from rubricrl.core.taskfile import load_tasks

    rows = user_reply_rows(10)
    src = tmp_path / "mine.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = stage.run(file_params(src))
    assert result.items_drafted["drafted"] == 10
    tasks = [t for split in ("train", "val", "test") for t in load_tasks(f"data/{split}.jsonl")]
    assert len(tasks) == 10 and all(t.items and t.meta["items_drafted"] == "draft" for t in tasks)
    assert "Items drafted for 10 free-text task(s)" in (tmp_path / "outputs/sections/data.md").read_text()


def user_reply_rows(n: int, checklist: bool = True) -> list[dict]:
    return [{"id": f"cs{i}", "instruction": "Reply to the customer in at most 90 words.",
             "text": f"Order A-{1000 + i} arrived late. Policy: a voucher of 10 EUR after 3 days.", "items": [],
             "reference": f"Sorry about order A-{1000 + i}: here is a voucher of 10 EUR.",
             **({"meta": {"checklist": {"lang": "en", "facts": [{"what": "order", "text": f"A-{1000 + i}"},
                                                                {"what": "voucher", "number": 10}]}}}
                if checklist else {})} for i in range(n)]


def file_params(src) -> Params:
    p = Params()
    return p.model_copy(update={"data": DataParams(source="file", tasks_file=str(src), n_val=2),
                                "tracking": p.tracking.model_copy(update={"enabled": False})})


def test_user_free_text_tasks_without_a_checklist_in_val_or_test_are_refused_before_anything_is_written(
        tmp_path, monkeypatch):
    from rubricrl.stages import data as stage

    rows = user_reply_rows(10)
    for r in rows[1:]:
        del r["meta"]  # only cs0 keeps its checklist
    src = tmp_path / "mine.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"mine.jsonl: meta.checklist: missing in 4 free-text task\(s\) that land "
                                          r"in val or test, e.g. cs\d \(val\)"):
        stage.run(file_params(src))
    assert not (tmp_path / "data").exists()


def test_a_mixed_validation_split_takes_each_kind_in_its_share():
    for n_val in (5, 9, 30):
        val = prepare_splits(_params("mixed", n_train=60, n_val=n_val, n_test=10).data)["val"]
        counts = [sum(t.kind == k for t in val) for k in ("extraction", "free_text")]
        assert sorted(counts) == [n_val // 2, n_val - n_val // 2], (n_val, counts)
    # one family alone: the validation sample is the one it always was (one seeded draw over the pool)
    data = _params("extraction", n_train=60, n_val=9, n_test=10).data
    pool = generate_family(data)["train"]
    picked = sorted(random.Random(f"val:{data.seed}").sample(range(len(pool)), 9))
    assert [t.id for t in prepare_splits(data)["val"]] == [pool[i].id for i in picked]


def test_a_kind_whose_every_criterion_is_weak_keeps_them_and_fails_the_gate(splits):
    from rubricrl.calibrate.calibrate import calibrate
    from rubricrl.calibrate.calibrate import calibration_set as cal_set

    p = _params("mixed")
    draft, _ = generate_draft(splits["mixed"]["train"], p)
    items = cal_set([t for t in splits["mixed"]["val"] if t.reference is not None], p.rubric.seed)
    cal = calibrate(draft, RubricScorer(draft), items, min_auc=1.01)  # no component can reach an AUC above 1
    assert cal.report["kinds_all_weak"]["free_text"] == ["items"]
    assert "items" not in cal.report["dropped"] and "items" in cal.report["weak_kept"]
    assert cal.rubric.kinds == ["extraction", "free_text"]  # free-text tasks still have something to score them
    assert any(f.startswith("criteria: every criterion that scores free_text tasks (items)")
               for f in gate_failures(cal.report, p.rubric))
