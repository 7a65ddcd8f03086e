"""Instruction following (IFEval-style) for the eval_general stage: 304 project-written prompts, EN and ZH.

The verdicts come from the `if-verifiable` package's IFEval checkers (the reference implementation),
never from checkers written here. The data file `data/ifeval.jsonl` interleaves English and Chinese
items, so any even-length prefix (`load(n)`) is balanced between the two languages. The 240 short-answer
prompts come first (if-*-033 to 152: each is satisfied by one to three sentences, a few bullets or a tiny JSON
object, so a prefix of them decides with short generations, as the CPU default's does), then the 64 that ask
for longer replies (if-*-001 to 032: paragraphs, sections, word minimums).

Chinese items use only checkers that are correct on Chinese text. Avoided for Chinese, because the
package gets them wrong there: `keywords:forbidden_words` (its `\\b` regex never matches inside a run
of CJK characters, so a forbidden word always "passes"), `punctuation:no_comma` (ASCII ',' only, the
full-width '，' passes), `length_constraints:number_words` and `nth_paragraph_first_word` (they
split words on whitespace / `\\w+`), `startend:quotation` (ASCII '"' only), and
`language:response_language` (its language table has no "zh" and langdetect answers "zh-cn").
`length_constraints:number_sentences` and `change_case:capital_word_frequency` are used in no item:
they need NLTK tokenizer data that is not installed, and `load` rejects them.

Known false negatives kept as in IFEval: `change_case:english_capital` also requires langdetect to
say "en", and langdetect misreads some ALL-CAPS English (e.g. as Somali), so a compliant answer can
fail it. langdetect on very short text is unreliable too (the English `response_language` item asks
for three sentences). When langdetect cannot decide at all, the package counts the check as passed.

Scores are prompt-level and instruction-level *strict* accuracy (IFEval's headline metrics): the
response is checked as is, without the "loose" variants that drop its first or last line.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import langdetect
from if_verifiable import IFEvalSample, evaluate_output_for_sample
from if_verifiable.ifeval.instructions_registry import INSTRUCTION_DICT

from rubricrl.core.jsonio import scan_jsonl

NAME = "ifeval"

# langdetect (used by the language and english_* checkers) samples at random unless seeded: without
# this, the same response could pass in one run and fail in the next.
langdetect.DetectorFactory.seed = 0

_LANGS = ("en", "zh")


def _data_file() -> Path:
    """The packaged data file (shipped as package data, so it works from an installed wheel too)."""
    return Path(str(resources.files(__package__).joinpath("data", "ifeval.jsonl")))


def _check_item(item: Any) -> None:
    """Raise ValueError (without location) if `item` is not a usable IFEval item.

    Every checker is built with the item's kwargs and run once on the prompt, so that anything that
    would crash while scoring (an unknown kwarg, a bad type, a keyword that is not a valid regex, a
    checker needing NLTK data that is not installed) fails here, at load time, instead of mid-stage.
    """
    if not isinstance(item, dict):
        raise ValueError("not a JSON object")
    for key in ("id", "lang", "prompt", "instruction_id_list", "kwargs"):
        if key not in item:
            raise ValueError(f"missing key {key!r}")
    if not isinstance(item["id"], str) or not item["id"]:
        raise ValueError("'id' must be a non-empty string")
    if item["lang"] not in _LANGS:
        raise ValueError(f"'lang' must be one of {_LANGS}, got {item['lang']!r}")
    if not isinstance(item["prompt"], str) or not item["prompt"].strip():
        raise ValueError("'prompt' must be a non-empty string")
    ids, kwargs_list = item["instruction_id_list"], item["kwargs"]
    if not isinstance(ids, list) or not ids:
        raise ValueError("'instruction_id_list' must be a non-empty list")
    if not isinstance(kwargs_list, list) or len(kwargs_list) != len(ids):
        raise ValueError("'kwargs' must be a list with one object per instruction")
    for instruction_id, kwargs in zip(ids, kwargs_list):
        if instruction_id not in INSTRUCTION_DICT:
            raise ValueError(f"unknown instruction id {instruction_id!r}")
        if not isinstance(kwargs, dict):
            raise ValueError(f"kwargs of {instruction_id!r} must be an object")
        checker = INSTRUCTION_DICT[instruction_id](instruction_id)
        try:
            checker.build_description(**kwargs)
            # The checkers draw any argument left out (or None) at random: require all of them.
            expected = set(checker.get_instruction_args_keys())
            given = {k for k, v in kwargs.items() if v is not None}
            if given != expected:
                raise ValueError(f"needs exactly the kwargs {sorted(expected)}, got {sorted(given)}")
            checker.check_following(item["prompt"])
        except Exception as exc:  # any failure here is a data error; say which instruction and why
            raise ValueError(f"kwargs {kwargs} rejected by {instruction_id!r}: {exc}") from exc


def load(n: int | None = None, path: str | Path | None = None) -> list[dict]:
    """The first `n` items of the data file (all when None); every line is validated first.

    `path` replaces the packaged file (tests use it). Raises ValueError naming the file, the line
    number and the problem for the first bad line (invalid JSON, missing key, unknown instruction
    id, kwargs the checker rejects, duplicate id). Blank lines are skipped.
    """
    file = Path(path) if path is not None else _data_file()
    items: list[dict] = []
    seen: set[str] = set()
    for where, item, problem in scan_jsonl(file):
        try:
            if problem:
                raise ValueError(problem[len(where) + 2:])  # without its "file:line: ", added below
            _check_item(item)
            if item["id"] in seen:
                raise ValueError(f"duplicate id {item['id']!r}")
        except ValueError as exc:  # json.JSONDecodeError is a ValueError too
            raise ValueError(f"{where}: {exc}") from exc
        seen.add(item["id"])
        items.append(item)
    return items if n is None else items[:n]


def score(item: dict, response: str) -> dict:
    """Strict verdicts for one response: score 1.0 only when every instruction is followed.

    The package returns no verdicts at all for a blank response (or one that is only an unterminated
    `<think>` block); that counts as every instruction failed. Text up to a closing `</think>` is
    dropped before checking, as the package does for reasoning models.
    """
    ids = list(item["instruction_id_list"])
    sample = IFEvalSample(key=0, prompt=item["prompt"], instruction_id_list=ids, kwargs=item["kwargs"])
    results, _ = evaluate_output_for_sample("ifeval", sample, response)
    verdicts = [r.strict_pass for r in results] if results else [False] * len(ids)
    if len(verdicts) != len(ids):  # the package silently skips unknown ids; load() rules them out
        raise ValueError(f"item {item.get('id')!r}: got {len(verdicts)} verdicts for {len(ids)} instructions")
    return {"score": float(all(verdicts)), "instructions": verdicts, "instruction_ids": ids}


def summarize(scored: list[dict]) -> dict:
    """Prompt-level and instruction-level strict accuracy over the outputs of `score`."""
    if not scored:
        raise ValueError("nothing to summarize: no scored items")
    verdicts = [v for s in scored for v in s["instructions"]]
    return {
        "prompt_strict": sum(s["score"] for s in scored) / len(scored),
        "instruction_strict": sum(verdicts) / len(verdicts),
        "n": len(scored),
    }
