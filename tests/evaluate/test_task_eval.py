"""Task evaluation: exact rates and the strict true metric on hand-made responses, deterministic CIs,
parts apart, paired comparisons, and the end-to-end generate + evaluate + write path on a tiny random model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rubricrl.inference.generate import generate_responses, generate_with_stats
from rubricrl.evaluate.task import evaluate_model, evaluate_responses
from rubricrl.inference.generate import load_for_generation
from rubricrl.reward.scoring import RubricScorer
from rubricrl.reward.load import load_rubric
from rubricrl.core.taskfile import Task

RUBRIC = Path(__file__).resolve().parents[2] / "rubricrl" / "reward" / "rubrics" / "json_extraction.yaml"
SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "price": {"type": "number"}, "color": {"type": ["string", "null"]}},
    "required": ["name", "price"],
}
TEXT = "The Acme Lamp costs 25 dollars."
GOLD = {"name": "Acme Lamp", "price": 25, "color": None}
GOLD_JSON = json.dumps(GOLD)


@pytest.fixture(scope="module")
def scorer():
    return RubricScorer(load_rubric(RUBRIC))


def make_task(tid: str, part: str | None, text: str = TEXT, reference=GOLD) -> Task:
    return Task(tid, "Extract the product fields.", text, SCHEMA, reference=reference,
                meta={"part": part} if part else {})


# (task id, part, response, strict fields right of 3)
CASES = [
    ("gold", "in_domain", GOLD_JSON, 3),  # clean, exact
    ("chatty", "in_domain", "Sure, here it is:\n" + GOLD_JSON, 3),  # embedded: extra text
    ("invented", "held_out_domain", '{"name": "Acme Lamp", "price": 25, "color": "red"}', 2),
    ("prose", "held_out_domain", "I cannot find anything.", 0),  # no JSON: extra text, misses
    ("truncated", "val", '{"name": "Acme La', 0),  # broken: not valid, no extra text
]


@pytest.fixture(scope="module")
def hand(scorer):
    tasks = [make_task(tid, part) for tid, part, _, _ in CASES]
    responses = [r for _, _, r, _ in CASES]
    return tasks, responses, evaluate_responses(tasks, responses, scorer, n_boot=500, seed=0)


def test_rates_and_strict_metric_exact(hand, scorer):
    tasks, responses, m = hand
    a = m["all"]
    assert a["n"] == 5
    assert a["json_valid_rate"] == pytest.approx(3 / 5)
    assert a["clean_json_rate"] == pytest.approx(2 / 5)
    assert a["extra_text_rate"] == pytest.approx(2 / 5)
    st = a["strict"]
    assert st["n"] == 5 and st["field_accuracy"] == pytest.approx(8 / 15)
    assert st["exact_object_rate"] == pytest.approx(2 / 5) and st["parsed_rate"] == pytest.approx(3 / 5)
    assert st["invented_rate"] == pytest.approx(1 / 5)  # one of five gold-null colours answered
    assert st["null_for_present_rate"] == 0.0  # unparsed answers are not abstentions
    assert [s["strict"]["right"] for s in m["samples"]] == [c[3] for c in CASES]
    totals = [r.total for r in scorer.score_batch(list(zip(tasks, responses)))]
    assert a["reward_mean"] == pytest.approx(sum(totals) / 5)
    assert set(a["components"]) == {"format", "required_fields", "field_types", "faithfulness",
                                    "extra_text", "invented_values", "missed_values"}
    assert a["components"]["invented_values"] == pytest.approx(1.0 / 5)  # one value at 1.0 per value
    assert a["components"]["format"] == pytest.approx((3 + 2 + 3 + 0 + 1) / 5)


def test_cis_contain_point_and_are_deterministic(hand, scorer):
    tasks, responses, m = hand
    for grp in [m["all"], *m["parts"].values()]:
        lo, hi = grp["reward_ci"]
        assert lo <= grp["reward_mean"] <= hi
        flo, fhi = grp["strict"]["field_accuracy_ci"]
        assert 0.0 <= flo <= grp["strict"]["field_accuracy"] <= fhi <= 1.0
    lo, hi = m["all"]["reward_ci"]
    assert lo < hi  # the totals differ, so the interval has width
    again = evaluate_responses(tasks, responses, scorer, n_boot=500, seed=0)
    assert again == m
    other = evaluate_responses(tasks, responses, scorer, n_boot=500, seed=1)
    assert other["all"]["reward_mean"] == m["all"]["reward_mean"]
    # Seeded per group: dropping a part does not move the other parts' intervals.
    keep = [i for i, (_, part, _, _) in enumerate(CASES) if part != "val"]
    sub = evaluate_responses([tasks[i] for i in keep], [responses[i] for i in keep], scorer, n_boot=500, seed=0)
    assert sub["parts"]["in_domain"] == m["parts"]["in_domain"]


def test_parts_reported_apart(hand):
    _, _, m = hand
    assert list(m["parts"]) == ["in_domain", "held_out_domain", "val"]
    ind, held, val = (m["parts"][p] for p in ("in_domain", "held_out_domain", "val"))
    assert (ind["n"], held["n"], val["n"]) == (2, 2, 1)
    assert ind["json_valid_rate"] == 1.0 and ind["clean_json_rate"] == 0.5 and ind["extra_text_rate"] == 0.5
    assert ind["strict"]["invented_rate"] == 0.0 and ind["strict"]["field_accuracy"] == 1.0
    assert held["json_valid_rate"] == 0.5 and held["extra_text_rate"] == 0.5 and held["strict"]["invented_rate"] == 0.5
    assert held["strict"]["field_accuracy"] == pytest.approx(2 / 6)
    assert val["json_valid_rate"] == 0.0 and val["extra_text_rate"] == 0.0 and val["strict"]["field_accuracy"] == 0.0
    assert val["reward_ci"] == [val["reward_mean"]] * 2  # one task: a degenerate interval
    assert [s["id"] for s in m["samples"]] == [c[0] for c in CASES]
    s = m["samples"][1]
    assert s["part"] == "in_domain" and s["response"] == CASES[1][2]
    assert s["components"]["extra_text"]["score"] > 0 and s["components"]["extra_text"]["reason"]


def test_no_reference_and_no_part(scorer):
    tasks = [make_task("a", None, reference=None), make_task("b", None)]
    m = evaluate_responses(tasks, [GOLD_JSON, GOLD_JSON], scorer, n_boot=50)
    assert list(m["parts"]) == ["unspecified"]
    assert m["all"]["strict"]["n"] == 1 and m["all"]["strict"]["field_accuracy"] == 1.0
    assert evaluate_responses([make_task("a", "x", reference=None)], ["{}"], scorer, n_boot=0)["all"]["strict"] is None
    with pytest.raises(ValueError):
        evaluate_responses(tasks, [GOLD_JSON], scorer)


# --- end to end on a tiny random model ---------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    """The tiny random model with larger random weights: the stock init only ever emits newlines,
    which would make the order and batching checks vacuous."""
    from rubricrl.inference.models import build_tiny_model
    from tests.train_helpers import roughen_weights

    return roughen_weights(build_tiny_model(tmp_path_factory.mktemp("tiny") / "m", seed=2), seed=2)


def tiny_tasks():
    # Different prompt lengths, not in length order, so sorting and left padding both matter.
    return [make_task("short", "in_domain"),
            make_task("long", "held_out_domain", text=TEXT + " It ships in a box." * 6),
            make_task("mid", "in_domain", text=TEXT + " It ships in a box." * 2)]


def test_batching_keeps_greedy_outputs_and_order(tiny_model):
    tasks = tiny_tasks()
    batched = generate_responses(tiny_model, tasks, batch_size=3, max_new_tokens=24)
    pair = load_for_generation(tiny_model)
    single = [generate_with_stats(tiny_model, [t], batch_size=1, max_new_tokens=24, model_and_tokenizer=pair)[0][0]
              for t in tasks]
    assert batched == single
    assert generate_responses(tiny_model, tasks, batch_size=1, max_new_tokens=24) == batched
    assert len(set(batched)) == 3  # the prompts differ, so should the outputs (not a vacuous check)


def test_evaluate_model_end_to_end(tiny_model, scorer, tmp_path):
    tasks = tiny_tasks()
    out = tmp_path / "eval"
    m = evaluate_model(tiny_model, tasks, scorer, out, batch_size=2, max_new_tokens=24, n_samples_table=2, n_boot=100)
    assert sorted(p.name for p in out.iterdir()) == ["metrics.json", "responses.jsonl", "samples.md"]
    saved = json.loads((out / "metrics.json").read_text())
    assert "samples" not in saved and saved["all"] == m["all"] and saved["all"]["n"] == 3
    assert saved["generation"]["new_tokens"] > 0 and saved["generation"]["tokens_per_s"] > 0
    assert set(saved["parts"]) == {"in_domain", "held_out_domain"}
    rows = [json.loads(line) for line in (out / "responses.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["short", "long", "mid"]
    assert [r["response"] for r in rows] == generate_responses(tiny_model, tasks, batch_size=3, max_new_tokens=24)
    assert [r["total"] for r in rows] == [s["total"] for s in m["samples"]]
    md = (out / "samples.md").read_text()
    table = [line for line in md.splitlines() if line.startswith("| ") and not line.startswith("| id ")]
    assert len(table) == 2  # n_samples_table, round-robin over parts: one in-domain, one held-out
    assert table[0].startswith("| short | in_domain |") and table[1].startswith("| long | held_out_domain |")
    assert all("\n" not in line and line.count(" | ") >= 9 for line in table)
    assert "format" in md.splitlines()[4] and "faithfulness" in md.splitlines()[4]


def test_comparison_report_gives_paired_differences(hand, scorer):
    """Paired by task: a model that fixes the invented colour gains exactly that field, with its CI and p."""
    from rubricrl.evaluate.section import comparison_markdown
    from rubricrl.metrics.compare import paired_comparisons

    tasks, responses, base = hand
    better = [GOLD_JSON if tid == "invented" else r for (tid, _, _, _), r in zip(CASES, responses)]
    much_better = [GOLD_JSON] * len(CASES)
    runs = {"base": base, "sft": evaluate_responses(tasks, better, scorer, n_boot=200),
            "grpo": evaluate_responses(tasks, much_better, scorer, n_boot=200)}
    paired = paired_comparisons({k: m["samples"] for k, m in runs.items()}, n_resamples=500)
    row = next(r for r in paired if (r["model"], r["vs"], r["part"], r["metric"]) == ("sft", "base", "all", "field_accuracy"))
    assert row["diff"] == pytest.approx(1 / 15) and row["n"] == 5
    inv = next(r for r in paired if (r["model"], r["vs"], r["part"], r["metric"]) == ("sft", "base", "all", "invented_rate"))
    assert inv["diff"] == pytest.approx(-1 / 5)
    big = next(r for r in paired if (r["model"], r["vs"], r["part"], r["metric"]) == ("grpo", "base", "all", "field_accuracy"))
    # five tasks: the interval brackets the gain but cannot exclude 0 (a 97.5% bound robust to a rare large drop)
    assert big["diff"] == pytest.approx(7 / 15) and big["ci"][0] < 0 < big["diff"] < big["ci"][1]
    assert {(r["model"], r["vs"]) for r in paired} == {("sft", "base"), ("grpo", "base"), ("grpo", "sft")}
    assert {r["part"] for r in paired} == {"all", "in_domain", "held_out_domain", "val"}
    summary = {k: {"all": m["all"], **m["parts"]} for k, m in runs.items()}
    md = comparison_markdown(summary, paired, 15)
    assert "| grpo - base | all |" in md and "overlap" not in md
    assert "Reward is the rubric total of 15." in md
    assert "the rubric total of 15 (extraction tasks) or 10 (free-text tasks)." in comparison_markdown(
        summary, paired, {"extraction": 15, "free_text": 10})  # a mixed rubric's totals differ by kind
    assert "the rubric total of 10." in comparison_markdown(summary, paired, {"free_text": 10})
    assert "| sft | all | 5 |" in md
