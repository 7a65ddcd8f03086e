import json

import pytest

from rubricrl.cli.main import main
from rubricrl.core.errors import TaskFileError
from rubricrl.core.taskfile import load_tasks

GOOD = {
    "id": "t1",
    "instruction": "Extract the product and price.",
    "text": "The AirBeat Pro now costs $2,999.",
    "schema": {
        "type": "object",
        "properties": {"product": {"type": "string"}, "price": {"type": ["number", "null"]}},
        "required": ["product", "price"],
    },
    "constraints": ["If the text does not mention a field, use null."],
    "reference": {"product": "AirBeat Pro", "price": 2999},
}


def write_lines(path, rows):
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def test_good_file_loads(tmp_path):
    tasks = load_tasks(write_lines(tmp_path / "t.jsonl", [GOOD, {**GOOD, "id": "t2", "reference": None}]))
    assert [t.id for t in tasks] == ["t1", "t2"]
    assert tasks[0].required == ["product", "price"]


@pytest.mark.parametrize(
    "row, expected",
    [
        ("{not json", ":1: invalid JSON"),
        ({k: v for k, v in GOOD.items() if k != "text"}, ":1: text: missing required key"),
        ({**GOOD, "schema": {"type": "object", "properties": {"a": {"type": "strng"}}}}, ":1: schema.properties.a.type: not a valid JSON Schema"),
        ({**GOOD, "schema": {"type": "array", "items": {}}}, ':1: schema.type: must be "object"'),
        ({**GOOD, "reference": {"product": "AirBeat Pro", "price": "cheap"}}, ":1: reference.price: does not validate"),
        ({**GOOD, "reference": {"price": 1}}, ":1: reference: does not validate against its schema: 'product' is a required property"),
        ({**GOOD, "refernce": {}}, ":1: refernce: unknown key"),
        ({**GOOD, "constraints": "use null"}, ":1: constraints: must be a list of strings"),
        ({**GOOD, "schema": {**GOOD["schema"], "required": ["product", "colour"]}}, ":1: schema.required: 'colour' is not in properties"),
    ],
)
def test_each_problem_names_file_line_and_key(tmp_path, row, expected):
    path = write_lines(tmp_path / "bad.jsonl", [row])
    with pytest.raises(TaskFileError) as err:
        load_tasks(path)
    assert f"{path}{expected}" in str(err.value)


def test_every_problem_is_reported_with_its_line(tmp_path):
    path = write_lines(tmp_path / "bad.jsonl", [GOOD, GOOD, "[1, 2]", {**GOOD, "id": ""}])
    with pytest.raises(TaskFileError) as err:
        load_tasks(path)
    msg = str(err.value)
    assert f"{path}:2: id: duplicate id 't1' (first at line 1)" in msg
    assert f"{path}:3: a task must be a JSON object" in msg
    assert f"{path}:4: id: must be a non-empty string" in msg
    assert len(err.value.problems) == 3


def test_cli_validate_exits_nonzero_with_messages(tmp_path, capsys):
    path = write_lines(tmp_path / "bad.jsonl", [GOOD, {**GOOD, "id": "t2", "reference": {"price": 1}}])
    with pytest.raises(SystemExit) as exit_info:
        main(["data", "validate", str(path)])
    assert exit_info.value.code == 2
    assert f"{path}:2: reference" in capsys.readouterr().err


def test_cli_validate_ok(tmp_path, capsys):
    path = write_lines(tmp_path / "good.jsonl", [GOOD])
    main(["data", "validate", str(path)])
    assert "OK, 1 tasks (1 with a reference answer)" in capsys.readouterr().out
