"""Command-line options that are settings: each one is a field of a params section, with its type, bounds and
choices read from the typed model, and its default the value of the params file the command reads (never a
number restated here). `settings(args, params)` lays the options given over that file's sections."""

from __future__ import annotations

import argparse
import types
import typing

import annotated_types
from pydantic import ValidationError

from rubricrl.config import Params
from rubricrl.core.errors import ConfigError

DEST = "_settings"  # on the parser's namespace: [(dest, section, field, flag)]


def _section_model(section: str):
    return Params.model_fields[section].annotation


def _converter(annotation, metadata, flag: str):
    """str -> value of the field's type, checking its bounds as argparse usage errors."""
    base = annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):  # X | None: the X
        base = next(a for a in typing.get_args(annotation) if a is not type(None))
    if typing.get_origin(base) is typing.Literal:
        return str, list(typing.get_args(base))
    if typing.get_origin(base) is list:  # a comma-separated list
        return (lambda text: [x for x in text.split(",") if x]), None
    kind = base if base in (int, float, str) else str
    lower = next(((m.ge, "at least") for m in metadata if isinstance(m, annotated_types.Ge)),
                 next(((m.gt, "above") for m in metadata if isinstance(m, annotated_types.Gt)), None))

    def convert(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {'an integer' if kind is int else 'a number'}: {text!r}") from None
        if lower is not None and not (value >= lower[0] if lower[1] == "at least" else value > lower[0]):
            raise argparse.ArgumentTypeError(f"must be {lower[1]} {lower[0]}, got {value}")
        return value

    return convert, None


def setting(parser: argparse.ArgumentParser, flag: str, section: str, field: str, what: str) -> None:
    """--flag for params.<section>.<field>: its type, bounds and choices from the model, its default the file's."""
    info = _section_model(section).model_fields[field]
    convert, choices = _converter(info.annotation, info.metadata, flag)
    dest = f"{section}__{field}"
    parser.add_argument(flag, dest=dest, type=convert, choices=choices, default=None, metavar=None if choices else field.upper(),
                        help=f"{what} (default: {section}.{field} of the params file; CPU default {info.default!r})")
    known = parser.get_default(DEST) or []
    parser.set_defaults(**{DEST: known + [(dest, section, field, flag)]})


def settings(args: argparse.Namespace, params: Params) -> Params:
    """`params` with every setting option given on the command line laid over it, validated again."""
    given: dict[str, dict] = {}
    flags = {}
    for dest, section, field, flag in getattr(args, DEST, None) or []:
        value = getattr(args, dest)
        if value is not None:
            given.setdefault(section, {})[field] = value
            flags[(section, field)] = flag
    out = params
    for section, values in given.items():
        model = _section_model(section)
        try:
            updated = model.model_validate({**getattr(params, section).model_dump(), **values})
        except ValidationError as err:
            e = err.errors()[0]
            flag = flags.get((section, str(e["loc"][0])) if e["loc"] else None) or "/".join(
                flags[(section, f)] for f in values)
            raise ConfigError(f"{flag}: {e['msg']}") from None
        out = out.model_copy(update={section: updated})
    return out
