"""The prompt's compact schema notation: shorter than the JSON, and nothing the model should follow is lost."""

import json

from hypothesis import given, settings, strategies as st

from rubricrl.data.generate import generate_dataset
from rubricrl.core.prompt import task_user_message
from rubricrl.core.schema_text import render


def test_the_embedded_example_reads_as_documented():
    schema = {"type": "object", "properties": {
        "price": {"type": ["string", "null"], "pattern": "^\\d+$"},
        "tags": {"type": "array", "items": {"type": "string"}, "description": "Tags"},
        "rating": {"type": "number", "minimum": 0, "maximum": 5},
        "status": {"type": ["string", "null"], "enum": ["open", "closed"]},
        "size": {"type": "integer", "exclusiveMinimum": 0},
        "names": {"type": "array", "items": {"type": ["string", "null"]}, "minItems": 1},
        "when": {"type": "string", "format": "date"},
        "owner": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]},
    }, "required": ["price", "rating"]}
    assert render(schema) == (
        '{price: string|null /^\\d+$/, tags?: string[] "Tags", rating: number 0..5, '
        'status?: "open"|"closed"|null, size?: integer >0, names?: (string|null)[] items >=1, '
        'when?: string format: date, owner?: {id: integer}}')


def test_unknown_keywords_fall_back_to_json_for_that_subschema_only():
    sub = {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    schema = {"type": "object", "properties": {"a": sub, "b": {"type": "string"}}, "required": ["a", "b"]}
    assert render(schema) == '{a: ' + json.dumps(sub, separators=(",", ":")) + ', b: string}'
    odd = {"type": "object", "properties": {}, "required": ["ghost"]}  # only the JSON can say this
    assert render(odd) == json.dumps(odd, separators=(",", ":"))
    assert render({"$ref": "#/$defs/x"}) == '{"$ref":"#/$defs/x"}'


def test_the_prompt_is_shorter_and_keeps_every_field_and_pattern():
    tasks = generate_dataset(seed=3, n_train=60, n_test=0)["train"]
    for t in tasks:
        text = task_user_message(t)
        compact_json = json.dumps(t.schema, ensure_ascii=False, separators=(",", ":"))
        assert compact_json not in text
        assert len(render(t.schema)) < 0.7 * len(compact_json)
        for name, sub in t.schema["properties"].items():
            assert f"{name}: " in text or f"{name}?: " in text
            if "pattern" in sub:
                assert f"/{sub['pattern']}/" in text
            if "description" in sub:
                assert json.dumps(sub["description"], ensure_ascii=False) in text
            for v in sub.get("enum") or []:
                assert json.dumps(v, ensure_ascii=False) in text


_leaf = st.fixed_dictionaries(
    {"type": st.sampled_from(["string", "number", "integer", "boolean", ["string", "null"], ["number", "null"]])},
    optional={"description": st.text(max_size=12), "pattern": st.from_regex(r"\^[a-z\\d]{1,4}\$", fullmatch=True),
              "minimum": st.integers(-5, 5), "maximum": st.integers(6, 99), "title": st.text(max_size=5),
              "anyOf": st.just([{"type": "string"}])})
_schema = st.recursive(_leaf, lambda inner: st.one_of(
    st.builds(lambda items: {"type": "array", "items": items}, inner),
    st.builds(lambda props: {"type": "object", "properties": props, "required": sorted(props)[:1]},
              st.dictionaries(st.from_regex(r"[a-z_]{1,6}", fullmatch=True), inner, max_size=3))), max_leaves=6)


@settings(max_examples=150, deadline=None)
@given(_schema)
def test_every_value_a_schema_states_reaches_the_text(schema):
    """Property: each pattern, bound, description and property name of any schema appears in the text."""
    text = render(schema)

    def walk(s):
        if not isinstance(s, dict):
            return
        if "anyOf" in s:  # fell back to JSON: all of it is there verbatim
            assert json.dumps(s, ensure_ascii=False, separators=(",", ":")) in text
            return
        for key in ("minimum", "maximum"):
            if key in s:
                assert json.dumps(s[key]) in text
        if s.get("pattern"):
            assert s["pattern"] in text
        note = s.get("description") or s.get("title")
        if note:
            assert json.dumps(note, ensure_ascii=False) in text
        for name, sub in (s.get("properties") or {}).items():
            assert (name if name.isidentifier() else json.dumps(name)) in text
            walk(sub)
        walk(s.get("items"))

    walk(schema)
