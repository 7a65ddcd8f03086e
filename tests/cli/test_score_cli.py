"""`rubricrl score`: one output line per input line, fields passed through, summary on stderr."""

import json

import pytest

from rubricrl.cli.main import main
from tests.core.test_taskfile import GOOD, write_lines


def test_score_command_writes_one_line_per_response(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # outside the project: no params.yaml, the shipped rubric is still found
    tasks = write_lines(tmp_path / "tasks.jsonl", [GOOD])
    gold = json.dumps(GOOD["reference"])
    responses = write_lines(tmp_path / "responses.jsonl", [
        {"id": "t1", "response": gold, "model": "sft", "step": 3},
        {"id": "t1", "response": "Sure! " + gold, "model": "grpo"},
        {"id": "t1", "response": "no idea"},
    ])
    out = tmp_path / "scored.jsonl"
    main(["score", "--tasks", str(tasks), "--responses", str(responses), "--out", str(out)])
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r.get("model") for r in rows] == ["sft", "grpo", None]
    assert rows[0]["step"] == 3 and rows[0]["response"] == gold
    assert rows[0]["total"] == 15.0 and rows[1]["total"] < rows[0]["total"] and rows[2]["total"] < rows[1]["total"]
    for cid in ("format", "required_fields", "field_types", "faithfulness", "extra_text", "invented_values"):
        assert {"score", "max", "weight", "reason"} <= set(rows[1][cid])
    err = capsys.readouterr().err
    assert "faithfulness" in err and "3 responses scored" in err and "using the built-in defaults" in err


def test_score_command_bad_responses_file_writes_nothing(tmp_path, capsys):
    tasks = write_lines(tmp_path / "tasks.jsonl", [GOOD])
    responses = write_lines(tmp_path / "responses.jsonl", [{"id": "t1", "response": "{}"}, {"id": "t9", "response": "{}"}, "{oops"])
    out = tmp_path / "scored.jsonl"
    with pytest.raises(SystemExit) as exit_info:
        main(["score", "--tasks", str(tasks), "--responses", str(responses), "--out", str(out)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"{responses}:2: id: unknown task id 't9'" in err and f"{responses}:3: invalid JSON" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["responses.jsonl", "tasks.jsonl"]  # no partial output


def test_score_command_bad_task_file_writes_nothing(tmp_path, capsys):
    tasks = write_lines(tmp_path / "tasks.jsonl", [GOOD, {**GOOD, "reference": {"product": 1, "price": 2}}])
    responses = write_lines(tmp_path / "responses.jsonl", [{"id": "t1", "response": "{}"}])
    out = tmp_path / "scored.jsonl"
    with pytest.raises(SystemExit):
        main(["score", "--tasks", str(tasks), "--responses", str(responses), "--out", str(out)])
    err = capsys.readouterr().err
    assert f"{tasks}:2: id: duplicate id" in err and f"{tasks}:2: reference.product" in err
    assert not out.exists()


def test_score_command_scores_extraction_and_free_text_tasks_in_one_file(tmp_path, capsys, monkeypatch):
    from tests.reward.test_items import GOLD, free_task, mixed_rubric

    monkeypatch.chdir(tmp_path)
    rubric = tmp_path / "mixed.yaml"
    rubric.write_text(mixed_rubric().to_yaml(), encoding="utf-8")
    tasks = write_lines(tmp_path / "tasks.jsonl", [GOOD, free_task(tid="f1").to_dict()])
    responses = write_lines(tmp_path / "responses.jsonl", [
        {"id": "t1", "response": json.dumps(GOOD["reference"])}, {"id": "f1", "response": GOLD},
        {"id": "f1", "response": "We will refund the shipping and 50 EUR."}])
    out = tmp_path / "scored.jsonl"
    main(["score", "--tasks", str(tasks), "--responses", str(responses), "--rubric", str(rubric), "--out", str(out)])
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["total"], r["max_total"]) for r in rows[:2]] == [(15.0, 15.0), (10.0, 10.0)]
    assert "items" not in rows[0] and "format" not in rows[1]
    assert rows[2]["pitfalls"]["score"] == 6.0 and "fell into 2: shipping" in rows[2]["pitfalls"]["reason"], rows[2]["pitfalls"]
    err = capsys.readouterr().err
    assert "3 responses scored" in err and "items" in err and "format" in err


ITEMLESS = {"id": "cs1", "instruction": "Write the reply to the customer in at most 80 words.",
            "text": "Order A-1042 (kettle, 45.00 EUR) arrived with a cracked lid. Policy: damage reported within 14 "
                    "days gets a full refund.", "items": []}


def test_rubric_items_drafts_items_for_free_text_tasks_written_without_them(tmp_path, capsys):
    tasks = write_lines(tmp_path / "tasks.jsonl", [GOOD, ITEMLESS])
    out = tmp_path / "filled.jsonl"
    main(["rubric", "items", "--tasks", str(tasks), "--out", str(out)])
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows[0] == json.loads(json.dumps(GOOD)) | {"constraints": GOOD.get("constraints", [])}
    items = {i["id"]: i for i in rows[1]["items"]}
    assert items["names_1"]["check"] == {"kind": "contains", "text": "A-1042"}
    assert items["length"]["check"] == {"kind": "length", "max_words": 80}
    assert {"language", "invented", "grader"} <= set(items) and rows[1]["meta"]["items_drafted"] == "draft"
    assert "items drafted for 1 of 2 task(s)" in capsys.readouterr().out
    main(["data", "validate", str(out)])  # the written file is a valid task file


def test_rubric_items_with_llm_and_no_endpoint_says_which_key_and_writes_nothing(tmp_path, capsys):
    tasks = write_lines(tmp_path / "tasks.jsonl", [ITEMLESS])
    out = tmp_path / "filled.jsonl"
    with pytest.raises(SystemExit):
        main(["rubric", "items", "--tasks", str(tasks), "--out", str(out), "--llm"])
    assert "scoring.openai_judge" in capsys.readouterr().err and not out.exists()
