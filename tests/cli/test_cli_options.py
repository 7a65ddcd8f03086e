"""The CLI's setting options come from the typed models: their types, bounds and choices, and their defaults are
the values of the params file the command reads, never numbers restated in the CLI."""

from __future__ import annotations

import argparse

import pytest

from rubricrl.cli.main import build_parser
from rubricrl.cli.options import DEST, settings
from rubricrl.config import Params


def subparsers(parser: argparse.ArgumentParser, prefix=()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*prefix, name), sub
                yield from subparsers(sub, (*prefix, name))


COMMANDS = dict(subparsers(build_parser()))


def test_every_setting_option_names_a_field_and_restates_no_default():
    found = 0
    for command, parser in COMMANDS.items():
        for dest, section, field, flag in parser.get_default(DEST) or []:
            found += 1
            model = Params.model_fields[section].annotation
            assert field in model.model_fields, f"{' '.join(command)} {flag}: no field {section}.{field}"
            action = next(a for a in parser._actions if a.dest == dest)
            assert action.default is None, f"{' '.join(command)} {flag}: a default restated in the CLI"
            assert f"{section}.{field}" in action.help
    assert found >= 8  # data generate (5), score --judge, eval (3)


def test_an_option_left_out_takes_the_params_files_value():
    args = build_parser().parse_args(["eval", "--model", "m", "--tasks", "t.jsonl"])
    params = Params(eval={"max_new_tokens": 96, "batch_size": 3})
    got = settings(args, params).eval
    assert (got.max_new_tokens, got.batch_size) == (96, 3)
    args = build_parser().parse_args(["eval", "--model", "m", "--tasks", "t.jsonl", "--max-new-tokens", "64"])
    assert settings(args, params).eval.max_new_tokens == 64 and settings(args, params).eval.batch_size == 3


@pytest.mark.parametrize("argv, says", [
    (["eval", "--model", "m", "--tasks", "t", "--max-new-tokens", "4"], "must be at least 8, got 4"),  # ge=8 in EvalParams
    (["eval", "--model", "m", "--tasks", "t", "--engine", "vllm"], "invalid choice: 'vllm'"),
    (["score", "--tasks", "t", "--responses", "r", "--judge", "gpt"], "invalid choice: 'gpt'"),
    (["data", "generate", "--n-train", "0"], "must be at least 1, got 0"),
])
def test_the_models_bounds_and_choices_are_usage_errors(argv, says, capsys):
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(argv)
    assert exit_info.value.code == 2 and says in capsys.readouterr().err


def test_a_setting_the_model_rejects_names_the_option():
    from rubricrl.core.errors import ConfigError

    args = build_parser().parse_args(["score", "--tasks", "t", "--responses", "r", "--judge", "openai"])
    with pytest.raises(ConfigError, match="--judge: .*openai_judge: required"):
        settings(args, Params())
