"""Regressions of the hostile-input probe: every reader returns a value or raises TaskFileError with
file:line; the response parser never raises; strict JSON everywhere; schema $ref and pattern bounded."""

import json
import time

import pytest

from rubricrl.core import jsonio, taskfile
from rubricrl.core.atomic import write_jsonl
from rubricrl.core.errors import TaskFileError
from rubricrl.core.jsonio import JSONError, loads_strict
from rubricrl.reward.parse import MAX_ITEMS, Shape, parse_response
from rubricrl.reward.scoring import RubricScorer
from rubricrl.reward.load import load_rubric
from rubricrl.core.taskfile import Task, load_responses, load_tasks

from tests.reward.test_scoring import RUBRIC
from tests.core.test_taskfile import GOOD, write_lines

DEEP_ARRAY = "[" * 100_000
DEEP_OBJECT = '{"a":' * 100_000
HUGE_INT = "1" * 5000
NOT_STRICT = ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", HUGE_INT, "1" * 400]


@pytest.fixture(scope="module")
def scorer():
    return RubricScorer(load_rubric(RUBRIC))


def task_with(schema_props, reference=None, **extra) -> Task:
    schema = {"type": "object", "properties": schema_props, **extra}
    return Task("t", "Extract.", "The AirBeat Pro costs $2,999.", schema, reference=reference)


# --- the strict loader --------------------------------------------------------------------------

@pytest.mark.parametrize("number", NOT_STRICT)
def test_strict_loader_rejects_non_finite_and_out_of_range_numbers(number):
    with pytest.raises(JSONError, match="not a JSON number|out of range"):
        loads_strict(f'{{"a": [1, {number}]}}')


@pytest.mark.parametrize("text", [DEEP_ARRAY, DEEP_OBJECT, "[" * 65 + "]" * 65, '"\\ud800"', '"\\udc00x"', "{} {}"])
def test_strict_loader_raises_only_its_own_error(text):
    with pytest.raises(JSONError):
        loads_strict(text)


def test_strict_loader_keeps_what_json_allows():
    assert loads_strict(' {"a": [1.5, -0, 1e300, "\\ud83d\\ude00", "\u2028"]} ') == {"a": [1.5, 0, 1e300, "😀", "\u2028"]}
    assert loads_strict("[" * 64 + "]" * 64) is not None  # MAX_DEPTH levels are fine
    assert loads_strict("1" * 300) == int("1" * 300)  # a big integer within the double range


# --- model answers --------------------------------------------------------------------------------

@pytest.mark.parametrize("raw, shape", [
    (DEEP_ARRAY, Shape.BROKEN),
    (DEEP_OBJECT, Shape.BROKEN),
    ('{"a": ' + HUGE_INT + "}", Shape.BROKEN),
    ('{"a": NaN}', Shape.BROKEN),
    ('{"a": Infinity}', Shape.BROKEN),
    ('{"a": 1e400}', Shape.BROKEN),
    ("Here: " + DEEP_OBJECT, Shape.NO_JSON),
    ('Here: {"a": -Infinity}', Shape.NO_JSON),
    (HUGE_INT, Shape.NO_JSON),
    ('{"a": [' + ", ".join(["1"] * (MAX_ITEMS + 1)) + "]}", Shape.BROKEN),
])
def test_unreadable_answers_have_no_object_and_say_why(raw, shape):
    parsed = parse_response(raw)
    assert (parsed.obj, parsed.shape) == (None, shape)
    if raw.startswith("{"):
        assert parsed.error


def test_the_lenient_search_still_finds_an_answer_after_braces_in_chatter():
    for raw in ['Use {curly} braces. {"a": 1}', ':-{ here {"a": 1} bye', '{"a" {"a": 1}', 'x {"a": NaN} {"a": 1}']:
        parsed = parse_response(raw)
        assert (parsed.obj, parsed.shape) == ({"a": 1}, Shape.EMBEDDED), raw
    assert parse_response('{"a": {"b": 1}, "c": ').shape == Shape.BROKEN  # truncated: no inner object


def test_a_hostile_answer_does_not_kill_the_batch(scorer):
    task = task_with({"product": {"type": "string"}, "price": {"type": "number"}},
                     reference={"product": "AirBeat Pro", "price": 2999}, required=["product", "price"])
    gold = json.dumps(task.reference)
    hostile = [DEEP_ARRAY, DEEP_OBJECT, '{"price": NaN}', '{"price": ' + HUGE_INT + "}", "\x00\ud800", ""]
    results = scorer.score_batch([(task, gold)] + [(task, r) for r in hostile])
    assert results[0].total == results[0].max_total
    for r in results[1:]:
        assert r.component("format").score < 3 and r.component("faithfulness").score == 0


# --- task and responses files -------------------------------------------------------------------

@pytest.mark.parametrize("number", NOT_STRICT)
def test_task_file_rejects_non_strict_numbers_naming_the_line(tmp_path, number):
    row = json.dumps({**GOOD, "reference": {"product": "AirBeat Pro", "price": 1}}).replace('"price": 1}', f'"price": {number}}}')
    path = write_lines(tmp_path / "t.jsonl", [GOOD | {"id": "ok"}, row])
    with pytest.raises(TaskFileError) as err:
        load_tasks(path)
    assert err.value.problems[0].startswith(f"{path}:2: invalid JSON: ")


@pytest.mark.parametrize("line", [DEEP_ARRAY, DEEP_OBJECT, HUGE_INT, '{"id": "\\ud800"}'])
def test_task_file_hostile_lines_are_problems(tmp_path, line):
    path = write_lines(tmp_path / "t.jsonl", [GOOD, line])
    with pytest.raises(TaskFileError) as err:
        load_tasks(path)
    assert err.value.problems[0].startswith(f"{path}:2: invalid JSON: ")


@pytest.mark.parametrize("number", NOT_STRICT)
def test_responses_file_rejects_non_strict_numbers_naming_the_line(tmp_path, number):
    path = write_lines(tmp_path / "r.jsonl", [{"id": "t1", "response": "{}"}, f'{{"id": "t1", "response": "x", "n": {number}}}'])
    with pytest.raises(TaskFileError) as err:
        load_responses(path, {"t1"})
    [problem] = err.value.problems
    assert problem.startswith(f"{path}:2: invalid JSON: ")


def test_unicode_line_separators_inside_strings_round_trip(tmp_path):
    weird = "a\u2028b\u2029c\x85d\x1ce\x1df\x1eg\x0bh\x0ci"
    task = {**GOOD, "text": GOOD["text"] + weird, "constraints": [weird]}
    path = tmp_path / "t.jsonl"
    write_jsonl(path, [task, {**task, "id": "t2"}])
    assert "\u2028" in path.read_text(encoding="utf-8")  # written raw, not escaped
    loaded = load_tasks(path)
    assert [t.text for t in loaded] == [task["text"]] * 2 and loaded[0].constraints == (weird,)
    responses = tmp_path / "r.jsonl"
    write_jsonl(responses, [{"id": "t1", "response": weird}])
    assert load_responses(responses, {"t1"})[0]["response"] == weird


def test_crlf_line_endings_still_load(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes((json.dumps(GOOD) + "\r\n" + json.dumps({**GOOD, "id": "t2"}) + "\r\n").encode())
    assert [t.id for t in load_tasks(path)] == ["t1", "t2"]


def test_a_huge_line_is_reported_not_parsed(tmp_path, monkeypatch):
    monkeypatch.setattr(jsonio, "MAX_LINE_CHARS", 1000)  # the one JSONL reader (rubricrl.core.jsonio) holds the limit
    path = write_lines(tmp_path / "t.jsonl", [GOOD, {**GOOD, "id": "t2", "text": "x" * 2000}])
    with pytest.raises(TaskFileError) as err:
        load_tasks(path)
    assert err.value.problems[0].startswith(f"{path}:2: line is ") and "limit 1,000" in err.value.problems[0]


def test_not_utf8_names_the_line(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(json.dumps(GOOD).encode() + b"\n" + b'{"id": "\xff"}\n')
    with pytest.raises(TaskFileError, match=f"{path}:2: not UTF-8 text"):
        load_tasks(path)


@pytest.mark.parametrize("row, expected", [
    ({**GOOD, "reference": {"product": "AirBeat Pro", "price": "2999"}}, ":1: reference.price: does not validate"),
    ({**GOOD, "schema": {**GOOD["schema"], "maxProperties": "5"}}, ":1: schema.maxProperties: not a valid JSON Schema"),
    ({**GOOD, "schema": {**GOOD["schema"], "properties": {"product": {"type": "string", "pattern": "(unclosed"}}}},
     ":1: schema.properties.product.pattern: not a valid JSON Schema: '(unclosed' is not a 'regex'"),
    ({**GOOD, "schema": {**GOOD["schema"], "$schema": ["x"]}}, ":1: schema.$schema: must be a string"),
    ({**GOOD, "schema": {**GOOD["schema"], "$schema": "http://example.com/mine"}}, ":1: schema.$schema: unsupported dialect"),
    ({**GOOD, "constraints": [1]}, ":1: constraints: must be a list of strings"),
    ({**GOOD, "id": 5}, ":1: id: must be a non-empty string"),
])
def test_wrong_types_and_bad_schemas_are_clean_problems(tmp_path, row, expected):
    path = write_lines(tmp_path / "bad.jsonl", [row])
    with pytest.raises(TaskFileError) as err:
        load_tasks(path)
    assert f"{path}{expected}" in str(err.value)


# --- $ref ---------------------------------------------------------------------------------------------

LOCAL_REF_SCHEMA = {
    "type": "object",
    "$defs": {"money": {"type": "number", "minimum": 0}},
    "properties": {"product": {"type": "string"}, "price": {"$ref": "#/$defs/money"}},
    "required": ["product", "price"],
}


def test_local_refs_load_and_validate_answers(tmp_path, scorer):
    path = write_lines(tmp_path / "t.jsonl", [{**GOOD, "schema": LOCAL_REF_SCHEMA}])
    [task] = load_tasks(path)
    good = scorer.score(task, json.dumps(task.reference))
    assert good.total == good.max_total
    bad = scorer.score(task, json.dumps({**task.reference, "price": -5}))
    assert bad.component("field_types").score < 3 and "price" in bad.component("field_types").reason


def test_a_local_ref_checks_the_reference(tmp_path):
    path = write_lines(tmp_path / "t.jsonl", [{**GOOD, "schema": LOCAL_REF_SCHEMA, "reference": {"product": "x", "price": -1}}])
    with pytest.raises(TaskFileError, match=r":1: reference\.price: does not validate"):
        load_tasks(path)


@pytest.mark.parametrize("ref, expected", [
    ("https://example.com/money.json", "is not a local reference"),
    ("money.json#/x", "is not a local reference"),
    ("#/$defs/missing", "cannot resolve '#/$defs/missing'"),
])
def test_remote_and_dangling_refs_are_rejected_without_fetching(tmp_path, monkeypatch, ref, expected):
    def no_network(*args, **kwargs):
        raise AssertionError("a schema reference was fetched")
    monkeypatch.setattr("urllib.request.urlopen", no_network)
    schema = {**LOCAL_REF_SCHEMA, "properties": {**LOCAL_REF_SCHEMA["properties"], "price": {"$ref": ref}}}
    path = write_lines(tmp_path / "t.jsonl", [{**GOOD, "schema": schema}])
    with pytest.raises(TaskFileError) as err:
        load_tasks(path)
    assert f"{path}:1: schema.properties.price.$ref: " in str(err.value) and expected in str(err.value)


def test_a_reference_cycle_is_a_problem_and_never_crashes_the_scorer(tmp_path, scorer):
    schema = {"type": "object", "$defs": {"a": {"$ref": "#/$defs/a"}}, "properties": {"x": {"$ref": "#/$defs/a"}}}
    path = write_lines(tmp_path / "t.jsonl", [{**GOOD, "schema": schema, "reference": None}])
    with pytest.raises(TaskFileError, match=":1: schema.properties.x: the schema's references recurse without end"):
        load_tasks(path)
    result = scorer.score(task_with(schema["properties"], **{"$defs": schema["$defs"]}), '{"x": 1}')
    assert "recurse" in result.component("field_types").reason


# --- patterns -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("pattern", ["^(a|aa)+$", "^(a+)+$", "^(a|a)*$"])
def test_a_catastrophic_pattern_is_bounded(scorer, pattern):
    task = task_with({"code": {"type": "string", "pattern": pattern}, "tags": {"type": "array", "items": {"pattern": pattern}}})
    hostile = "a" * 40 + "!"
    start = time.monotonic()
    result = scorer.score(task, json.dumps({"code": hostile, "tags": [hostile + str(i) for i in range(50)]}))
    assert time.monotonic() - start < 30  # a generous bound: without the time limit this runs for hours
    assert result.component("field_types").score == 0
    assert "does not match" in result.component("field_types").reason or "time limit" in result.component("field_types").reason


def test_a_pattern_timeout_reads_as_no_match():
    validator = taskfile.SchemaValidator({"type": "object", "properties": {}}).at({"pattern": "^(a|aa)+$"})
    assert validator.first_error("a" * 40 + "!").startswith(taskfile.TIMED_OUT)
    assert validator.is_valid("aaaa")


def test_schema_patterns_use_the_regex_module_everywhere(tmp_path):
    schema = {"type": "object", "properties": {"name": {"type": "string", "pattern": r"^\p{Lu}\p{Ll}+$"}}}
    path = write_lines(tmp_path / "t.jsonl", [{**GOOD, "schema": schema, "reference": {"name": "Éva"}}])
    assert load_tasks(path)[0].reference == {"name": "Éva"}


def test_decimal_places_reads_only_the_answer_object():
    from rubricrl.reward.rules import TaskContext, decimal_places

    task = Task("d", "Extract.", "It costs 12.50 euros.", {"type": "object", "properties": {"price": {"type": "number"}}},
                constraints=("Give price with two decimals.",))
    ctx = TaskContext.build(task)
    assert ctx.decimals == {"price": 2}
    for raw, units in [('{"price": 12.5}', 1), ('{"price": 12.50}', 0), ('I guess "price": 1.5 but {"price": 12.50}', 0),
                       ('{"note": "\\"price\\": 1.5", "price": 12.5}', 1), ('"' + '\\"' * 50_000 + ' {"price": 12.50}', 0)]:
        assert decimal_places(ctx, parse_response(raw), None)[0] == units, raw


SEPARATORS = "\u2028\u2029\u0085"  # legal inside JSON strings; str.splitlines() cuts a line at each


def test_unicode_line_separators_round_trip_through_every_reader(tmp_path, monkeypatch):
    """A model answer (or a task text) holding U+2028, U+2029 and U+0085 is written raw by write_jsonl and reads
    back whole through every JSONL reader of the project."""
    from rubricrl.core.jsonio import read_jsonl
    from rubricrl.general import ifeval, qa
    from rubricrl.stages import export

    answer = json.dumps({"name": f"Ada{SEPARATORS}Lovelace"}, ensure_ascii=False)
    task = {**GOOD, "text": f"First line{SEPARATORS}second line", "id": f"t{SEPARATORS}1"}
    write_jsonl(tmp_path / "tasks.jsonl", [task])
    assert SEPARATORS in (tmp_path / "tasks.jsonl").read_text(encoding="utf-8")  # written raw, not escaped
    assert load_tasks(tmp_path / "tasks.jsonl")[0].text == task["text"]
    write_jsonl(tmp_path / "responses.jsonl", [{"id": task["id"], "response": answer}])
    assert load_responses(tmp_path / "responses.jsonl", {task["id"]})[0]["response"] == answer
    row = {"id": task["id"], "part": "in_domain", "response": answer, "total": 7.5,
           "strict": {"right": 1, "fields": 2, "present": 2, "present_right": 1, "null_for_present": 0,
                      "absent": 0, "invented": 0, "exact": 0}}
    write_jsonl(tmp_path / "eval.jsonl", [row, row | {"id": "t2"}])
    assert read_jsonl(tmp_path / "eval.jsonl") == [row, row | {"id": "t2"}]  # eval rows, teacher and suite rows
    numbers = export.source_numbers(str(tmp_path / "eval.jsonl"), load_tasks(tmp_path / "tasks.jsonl"))
    assert (numbers["field_accuracy"], numbers["reward"], numbers["valid_json"]) == (0.5, 7.5, 1.0)
    item = {"id": "q1", "lang": "en", "question": f"Who wrote{SEPARATORS} the first program?", "answers": ["Ada"]}
    write_jsonl(tmp_path / "qa.jsonl", [item])
    assert qa.load(path=tmp_path / "qa.jsonl")[0]["prompt"].startswith(item["question"])
    prompt = f"Write one sentence.{SEPARATORS}Answer in lowercase letters only."
    write_jsonl(tmp_path / "if.jsonl", [{"id": "i1", "lang": "en", "prompt": prompt,
                                         "instruction_id_list": ["change_case:english_lowercase"], "kwargs": [{}]}])
    assert ifeval.load(path=tmp_path / "if.jsonl")[0]["prompt"] == prompt


def test_no_module_splits_jsonl_with_splitlines():
    """The one reader is rubricrl.core.jsonio: no other module reads JSON lines with str.splitlines()."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    found = [f"{p.relative_to(root)}:{n}" for p in (root / "rubricrl").rglob("*.py")
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if "splitlines()" in line and re.search(r"json|loads", line)]
    assert not found, f"JSONL read with splitlines (use rubricrl.core.jsonio.read_jsonl): {found}"


def test_a_stalled_pattern_match_is_tried_again_and_a_working_one_is_not(monkeypatch):
    """The regex module's timeout is wall-clock: a timeout in which the thread did little work is a stall (a loaded
    host) and is retried; one spent computing is a pattern that backtracks, and fails."""
    calls = []

    class Stalled:
        def search(self, text, timeout):
            calls.append(timeout)
            if len(calls) == 1:
                raise TimeoutError  # no CPU time spent: the process waited
            return True

    assert taskfile.timed_search(Stalled(), "420.00", 0.1) is True and len(calls) == 2
    compiled = taskfile.compiled_pattern("^(a|aa)+$")
    assert taskfile.timed_search(compiled, "a" * 40 + "!", 0.05) is None  # computing all along: no retry helps
