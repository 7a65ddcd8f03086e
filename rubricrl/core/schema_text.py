"""A task's JSON Schema as compact, TypeScript-like text for the prompt.

Every stage is compute-bound on the prompt's tokens (SFT, GRPO's rollouts, reference and policy passes, the
eval), and the schema as compact JSON was the largest part of the prompt: ~200 of ~550 tokens on the embedded
data. This notation says the same in about half the tokens:

    {"type":"object","properties":{"price":{"type":["string","null"],"pattern":"^\\d+$"},"tags":{"type":"array",
    "items":{"type":"string"},"description":"Tags"}},"required":["price"]}
    ->
    {price: string|null /^\\d+$/, tags?: string[] "Tags"}

Rules: `key?` is a property not listed in `required`; `A|B` a union of types; `T[]` an array of T; a range
`0..5` (`>0`, `<=9` for the exclusive and one-sided bounds); `/re/` a pattern; `len 1..8` / `items 1..8` the
length bounds; `format: date`; `"text"` the description (or title); enum and const values as JSON. A
subschema with any keyword not listed here (anyOf, $ref, patternProperties, ...) is written as compact JSON,
so nothing the model should follow is dropped. Schemas are the task's business: the data is unchanged and
answers are still validated against the real JSON Schema.
"""

from __future__ import annotations

import json

_META = {"$schema", "$id", "$comment", "examples", "default"}  # documentation only: left out
_ANNOT = {"description", "title"}
_SIMPLE = {"type", "enum", "const", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength",
           "maxLength", "minItems", "maxItems", "pattern", "format", "items", "properties", "required",
           "additionalProperties"} | _ANNOT | _META


def _json(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _num(x) -> str:
    return _json(x)


def _range(lo, hi, xlo, xhi) -> str:
    """Bounds as `lo..hi`, or `>x` / `>=x` / `<x` / `<=x` when one side or an exclusive bound is given."""
    if lo is not None and hi is not None and xlo is None and xhi is None:
        return f"{_num(lo)}..{_num(hi)}"
    parts = []
    if xlo is not None:
        parts.append(f">{_num(xlo)}")
    elif lo is not None:
        parts.append(f">={_num(lo)}")
    if xhi is not None:
        parts.append(f"<{_num(xhi)}")
    elif hi is not None:
        parts.append(f"<={_num(hi)}")
    return " ".join(parts)


def _compact(schema) -> bool:
    if not isinstance(schema, dict) or set(schema) - _SIMPLE:
        return False
    ap = schema.get("additionalProperties", False)
    if not isinstance(ap, bool):
        return False
    if "properties" in schema and not isinstance(schema["properties"], dict):
        return False
    if "required" in schema and not (isinstance(schema["required"], list)
                                     and all(isinstance(r, str) for r in schema["required"])):
        return False
    for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength",
                "minItems", "maxItems"):
        if key in schema and (isinstance(schema[key], bool) or not isinstance(schema[key], (int, float))):
            return False
    if "pattern" in schema and not isinstance(schema["pattern"], str):
        return False
    if any(k in schema and not isinstance(schema[k], str) for k in ("format", "description", "title")):
        return False
    types = schema.get("type")
    if types is not None and not (isinstance(types, str) or (isinstance(types, list) and types
                                                             and all(isinstance(t, str) for t in types))):
        return False
    if "items" in schema and not isinstance(schema["items"], dict):
        return False
    if set(schema.get("required") or []) - set(schema.get("properties") or {}):
        return False  # a required key the schema does not describe: only the JSON says it
    return True


def _type_text(schema) -> str:
    types = schema.get("type")
    types = [types] if isinstance(types, str) else list(types or [])
    if "enum" in schema:
        base = "|".join(_json(v) for v in schema["enum"]) if isinstance(schema["enum"], list) else _json(schema["enum"])
        rest = [t for t in types if t == "null" and None not in (schema["enum"] or [])]
        return "|".join([base] + rest) if rest else base
    if "const" in schema:
        return _json(schema["const"])
    out = []
    for t in types or (["object"] if "properties" in schema else ["any"]):
        if t == "array":
            inner = render(schema["items"]) if "items" in schema else "any"
            out.append(f"({inner})[]" if ("|" in inner or " " in inner) and not inner.startswith("{") else f"{inner}[]")
        elif t == "object" and "properties" in schema:
            out.append(_object(schema))
        else:
            out.append(t)
    return "|".join(out)


def _object(schema) -> str:
    required = set(schema.get("required") or [])
    fields = []
    for name, sub in schema["properties"].items():
        key = name if name.isidentifier() else _json(name)
        fields.append(f"{key}{'' if name in required else '?'}: {render(sub)}")
    return "{" + ", ".join(fields) + "}"


def render(schema) -> str:
    """One subschema in the compact notation (compact JSON where the notation has no word for a keyword)."""
    if schema is True or schema == {}:
        return "any"
    if not _compact(schema):
        return _json(schema)
    parts = [_type_text(schema)]
    if any(k in schema for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")):
        parts.append(_range(schema.get("minimum"), schema.get("maximum"), schema.get("exclusiveMinimum"),
                            schema.get("exclusiveMaximum")))
    if "minLength" in schema or "maxLength" in schema:
        parts.append("len " + _range(schema.get("minLength"), schema.get("maxLength"), None, None))
    if "minItems" in schema or "maxItems" in schema:
        parts.append("items " + _range(schema.get("minItems"), schema.get("maxItems"), None, None))
    if "pattern" in schema:
        parts.append(f"/{schema['pattern']}/")
    if "format" in schema:
        parts.append(f"format: {schema['format']}")
    note = schema.get("description") or schema.get("title")
    if note:
        parts.append(_json(note))
    return " ".join(parts)
