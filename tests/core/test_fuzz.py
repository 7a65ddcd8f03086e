"""Property-based fuzzing of every reader and the scorer on hostile input (hypothesis).

Properties: only the project's errors (RubricRLError) ever escape; every problem names its file;
a task the reader accepts can be scored; totals stay within the rubric's [min, max]; scoring is
deterministic; nothing is written by a reader, or by a write that fails. Derandomized (a fixed seed
per test) and bounded by the "rubricrl-fuzz" profile, so CI runs the same cases every time.
"""

import json
import os

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from rubricrl.core.atomic import write_jsonl
from rubricrl.data.generate import generate_dataset
from rubricrl.core.errors import RubricRLError, TaskFileError
from rubricrl.reward.parse import ParsedResponse, Shape, parse_response
from rubricrl.reward.scoring import RubricScorer
from rubricrl.reward.load import load_rubric
from rubricrl.core.taskfile import Task, check_schema, load_responses, load_tasks, parse_task_lines

from tests.reward.test_scoring import RUBRIC
from tests.core.test_taskfile import GOOD

settings.register_profile(
    "rubricrl-fuzz", deadline=None, derandomize=True, database=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
FUZZ = settings.get_profile("rubricrl-fuzz")

# Pieces that broke (or could break) a reader: deep nesting, huge and non-finite numbers, lone
# surrogates, the line separators str.splitlines() cuts at, braces, quotes, fences.
NASTY = [
    "[" * 3000, '{"a":' * 3000, "]" * 50, "1" * 5000, "-" + "9" * 400, "NaN", "Infinity", "-Infinity", "1e400",
    "-1e999", "1e-400", "\u2028", "\u2029", "\x85", "\x1c", "\x1d", "\x1e", "\x0b", "\x0c", "\x00", "\r", "\n",
    "\r\n", '"\\ud800"', "\\ud800", "\\udc00", "\ud800", "\udfff", "{", "}", "[", "]", '"', "\\", ",", ":",
    "```json\n", "```", '{"', '"}', "{}", "null", "true", "1.5", "-0", "0e5", '{"a": 1}', "😀", "\ufeff",
]
PATTERNS = ["^(a|aa)+$", "^(a+)+$", "(", "[", "\\p{L}+", "a{99999999999}", "(?<=a+)b", r"^\d{4}-\d{2}-\d{2}$",
            "(?P<x>", "\\", "*", "a**", "(?i)x", "[[:alpha:]]", "", "^$", "(a*)*b"]
REFS = ["#", "#/$defs/a", "#/$defs/missing", "#/properties/x", "https://example.com/x.json", "x.json", "#foo",
        "#/%24defs/a", "#/$defs/a~1b", "urn:x", "http://[", "", "#/definitions/a", "#/$defs/loop"]

nasty = st.sampled_from(NASTY)
hostile_text = st.lists(st.one_of(nasty, st.text(max_size=12)), max_size=10).map("".join)
scalars = (st.none() | st.booleans() | st.integers(min_value=-10**400, max_value=10**400)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=20) | nasty)
json_values = st.recursive(
    scalars, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=6) | nasty, kids, max_size=4),
    max_leaves=12)


def dumps(value, ascii_only: bool) -> str:
    return json.dumps(value, ensure_ascii=ascii_only)  # NaN/Infinity written as such: the reader must refuse them


property_schemas = st.one_of(
    st.just({"type": "string"}),
    st.just({"type": ["number", "null"], "minimum": 0}),
    st.just({"type": "array", "items": {"type": "string"}, "uniqueItems": True}),
    st.builds(lambda p: {"type": "string", "pattern": p}, st.sampled_from(PATTERNS) | st.text(max_size=8)),
    st.builds(lambda r: {"$ref": r}, st.sampled_from(REFS)),
    st.builds(lambda v: {"enum": v}, st.lists(scalars, max_size=3)),
    st.builds(lambda k, v: {"type": "string", k: v},
              st.sampled_from(["maxLength", "minimum", "format", "items", "required", "$schema", "$id", "$defs"]),
              json_values),
    json_values,
)
object_schemas = st.builds(
    lambda props, extra: {"type": "object", "properties": props, **extra},
    st.dictionaries(st.text(min_size=1, max_size=6), property_schemas, min_size=1, max_size=3),
    st.fixed_dictionaries({}, optional={
        "$defs": st.fixed_dictionaries({"a": property_schemas, "loop": st.just({"$ref": "#/$defs/loop"})}),
        "$schema": st.sampled_from(["https://json-schema.org/draft/2020-12/schema",
                                    "http://json-schema.org/draft-07/schema#", "http://x", "http://["]) | json_values,
        "required": st.lists(st.text(max_size=4), max_size=2) | json_values,
        "patternProperties": st.dictionaries(st.sampled_from(PATTERNS), property_schemas, max_size=1),
    }))
schemas = object_schemas | json_values


@st.composite
def task_rows(draw):
    """A row near the public format: GOOD with some keys replaced by hostile values."""
    row = json.loads(json.dumps(GOOD))
    for key in draw(st.sets(st.sampled_from(["id", "text", "instruction", "schema", "constraints", "reference",
                                             "meta", "extra"]), max_size=3)):
        row[key] = draw(schemas if key == "schema" else json_values)
    return row


@st.composite
def task_lines(draw):
    kind = draw(st.sampled_from(["row", "row", "value", "text", "cut"]))
    if kind == "text":
        return draw(hostile_text)
    line = dumps(draw(task_rows()) if kind != "value" else draw(json_values), draw(st.booleans()))
    if kind == "cut":
        at = draw(st.integers(0, len(line)))
        line = line[:at] + draw(hostile_text) + line[at:]
    return line


def line_bytes(draw_lines, crlf: bool) -> bytes:
    sep = "\r\n" if crlf else "\n"
    # 'surrogatepass' keeps a lone surrogate as (invalid) bytes: the reader must report the line.
    return sep.join(draw_lines).encode("utf-8", "surrogatepass")


@pytest.fixture(scope="module")
def scorer():
    return RubricScorer(load_rubric(RUBRIC))


@pytest.fixture(scope="module")
def tasks():
    generated = generate_dataset(seed=0, n_train=4, n_test=2)["train"][:2]
    ref_task = Task("ref", "Extract.", "The AirBeat Pro costs $2,999 (code aaaa).", {
        "type": "object",
        "$defs": {"money": {"type": ["number", "null"], "minimum": 0}},
        "properties": {"price": {"$ref": "#/$defs/money"}, "code": {"type": "string", "pattern": "^(a|aa)+$"},
                       "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}},
        "required": ["price", "code"]}, reference={"price": 2999, "code": "aaaa", "tags": None})
    no_ref = Task(generated[0].id + "-noref", generated[0].instruction, generated[0].text, generated[0].schema,
                  generated[0].constraints, None)
    return generated + [ref_task, no_ref]


def bounds(rubric, tasks):
    """Every criterion at its minimum and every penalty at its cap; an uncapped one (missed_values) charges at most
    per + type_share / N for each of a task's N fields."""
    n = max((len(t.properties) for t in tasks), default=0)
    most = sum(p.cap if p.cap is not None else p.per * n + p.params.get("type_share", 0.0) for p in rubric.penalties)
    return sum(c.weight * c.range[0] for c in rubric.criteria) - most, rubric.max_total


def check_tasks_score(scorer, loaded):
    lo, hi = bounds(scorer.rubric, loaded)
    for task in loaded:
        answer = json.dumps(task.reference if task.reference is not None else {})
        for result in scorer.score_batch([(task, answer), (task, "{")]):
            assert lo - 1e-9 <= result.total <= hi + 1e-9


# --- readers ---------------------------------------------------------------------------------------

@settings(FUZZ, max_examples=600)
@given(lines=st.lists(task_lines(), max_size=4))
def test_task_lines_give_tasks_or_file_line_problems(scorer, lines):
    loaded, problems = parse_task_lines(lines, "f.jsonl")
    event(f"tasks accepted: {min(len(loaded), 2)}{'+' if len(loaded) > 2 else ''}")
    assert all(isinstance(t, Task) for t in loaded)
    assert all(p.startswith("f.jsonl:") for p in problems)
    check_tasks_score(scorer, loaded)  # what the reader accepts, the scorer can score


@settings(FUZZ, max_examples=300)
@given(lines=st.lists(task_lines(), max_size=4), crlf=st.booleans(), junk=st.binary(max_size=12))
def test_load_tasks_raises_only_task_file_errors_and_writes_nothing(tmp_path_factory, lines, crlf, junk):
    folder = tmp_path_factory.mktemp("tasks")
    path = folder / "t.jsonl"
    path.write_bytes(line_bytes(lines, crlf) + junk)
    before = sorted(os.listdir(folder))
    try:
        loaded = load_tasks(path)
    except TaskFileError as err:
        event("rejected")
        assert err.problems and all(p.startswith(str(path)) for p in err.problems)
    else:
        event("loaded")
        assert loaded and all(isinstance(t, Task) for t in loaded)
    assert sorted(os.listdir(folder)) == before
    with pytest.raises(TaskFileError):
        load_tasks(folder / "missing.jsonl")
    assert not (folder / "missing.jsonl").exists()


@settings(FUZZ, max_examples=300)
@given(rows=st.lists(st.one_of(
    st.builds(lambda i, r: {"id": i, "response": r}, st.sampled_from(["t1", "t2"]) | json_values, hostile_text | json_values),
    json_values), max_size=4), ascii_only=st.booleans(), crlf=st.booleans())
def test_load_responses_raises_only_task_file_errors(tmp_path_factory, rows, ascii_only, crlf):
    path = tmp_path_factory.mktemp("responses") / "r.jsonl"
    path.write_bytes(line_bytes([dumps(r, ascii_only) for r in rows], crlf))
    try:
        loaded = load_responses(path, {"t1", "t2"})
    except TaskFileError as err:
        event("rejected")
        assert err.problems and all(p.startswith(f"{path}:") for p in err.problems)
    else:
        event("loaded")
        assert all(r["id"] in ("t1", "t2") and isinstance(r["response"], str) for r in loaded)


@settings(FUZZ, max_examples=150)
@given(rows=st.lists(json_values, max_size=5), fail_at=st.integers(0, 5))
def test_a_failing_write_leaves_nothing(tmp_path_factory, rows, fail_at):
    folder = tmp_path_factory.mktemp("out")

    def generate():
        for i, row in enumerate(rows):
            if i == fail_at:
                raise RubricRLError("the generator failed")
            yield {"row": row, "bad": "\ud800"} if i == fail_at - 1 and i % 2 else {"row": row}

    try:
        write_jsonl(folder / "out.jsonl", generate())
    except (RubricRLError, UnicodeEncodeError):
        assert os.listdir(folder) == []
    else:
        assert os.listdir(folder) == ["out.jsonl"]


# --- the response parser and the scorer -------------------------------------------------------------

@st.composite
def responses(draw, tasks):
    task = draw(st.sampled_from(tasks))
    gold = json.dumps(task.reference or {}, ensure_ascii=draw(st.booleans()))
    kind = draw(st.sampled_from(["gold", "value", "text", "bytes", "object"]))
    if kind == "gold":
        at = draw(st.integers(0, len(gold)))
        text = gold[:at] + draw(hostile_text) + gold[at:]
    elif kind == "value":
        text = dumps(draw(json_values), draw(st.booleans()))
    elif kind == "object":
        fields = st.sampled_from(sorted(task.properties)) | st.text(max_size=5)
        text = draw(hostile_text) + dumps(draw(st.dictionaries(fields, json_values, max_size=5)), False) + draw(hostile_text)
    elif kind == "bytes":
        text = draw(st.binary(max_size=64)).decode("utf-8", draw(st.sampled_from(["replace", "surrogateescape"])))
    else:
        text = draw(hostile_text)
    return task, text


@settings(FUZZ, max_examples=800)
@given(raw=st.one_of(hostile_text, json_values.map(lambda v: dumps(v, False)),
                     st.binary(max_size=64).map(lambda b: b.decode("utf-8", "surrogateescape"))))
def test_parse_response_never_raises(raw):
    parsed = parse_response(raw)
    event(parsed.shape.name)
    assert isinstance(parsed, ParsedResponse) and parsed.raw is raw
    assert (parsed.obj is not None) == (parsed.shape in (Shape.CLEAN, Shape.EMBEDDED))
    assert parsed.obj is None or isinstance(parsed.obj, dict)
    assert 0 <= parsed.extra_chars <= len(raw)
    assert parse_response(raw) == parsed


@settings(FUZZ, max_examples=300)
@given(data=st.data())
def test_scores_stay_in_range_and_are_deterministic(scorer, tasks, data):
    pairs = data.draw(st.lists(responses(tasks), min_size=1, max_size=4))
    lo, hi = bounds(scorer.rubric, tasks)
    first = scorer.score_batch(pairs)
    assert len(first) == len(pairs)
    for _, raw in pairs:
        event(parse_response(raw).shape.name)
    for result in first:
        assert lo - 1e-9 <= result.total <= hi + 1e-9
        assert result.max_total == hi
    again = RubricScorer(scorer.rubric).score_batch(pairs)  # a fresh scorer: no per-task context shared
    assert [r.to_dict() for r in again] == [r.to_dict() for r in first]


@settings(FUZZ, max_examples=300)
@given(schema=object_schemas, data=st.data())
def test_any_accepted_schema_scores_any_answer(scorer, schema, data):
    """Valid but hostile schemas (patterns, $ref, uniqueItems, patternProperties) never crash the rules."""
    problems = check_schema(schema)
    event("schema accepted" if not problems else "schema rejected")
    if problems:
        return
    task = Task("s", "Extract.", "The AirBeat Pro costs $2,999 on 2024-03-05.", schema)
    keys = st.sampled_from(sorted(schema["properties"])) | st.text(max_size=4)
    answers = data.draw(st.lists(st.dictionaries(keys, json_values, max_size=4).map(lambda v: dumps(v, False)),
                                 min_size=1, max_size=3))
    lo, hi = bounds(scorer.rubric, [task])
    for result in scorer.score_batch([(task, a) for a in answers]):
        assert lo - 1e-9 <= result.total <= hi + 1e-9
