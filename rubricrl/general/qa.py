"""Short factual QA (English and Chinese): does training keep the model's common knowledge?

Each item is a question written for this project with every accepted answer listed (`data/qa.jsonl`);
the items alternate EN/ZH, so the first n items are balanced for every even n.

Matching rule. Response and accepted answers go through the same normalisation:
Unicode NFKC (full-width letters and digits become ASCII, "H₂O" becomes "H2O"), casefold, every
character that is neither a letter nor a digit replaced by a space (ASCII and CJK/full-width
punctuation such as "。，《》", and symbols too, so "100°C" still contains the word "100"), each CJK
character made a word of its own, the English articles "a", "an", "the" removed, whitespace collapsed.
An answer counts when its normalised form occurs in the normalised response as a run of whole words.
So a Latin or digit answer needs word boundaries ("4" does not match "14"), while a CJK answer is in
effect a substring match ("北京" matches "首都是北京市"). Number words and digits are not converted
into each other: the data lists both ("4", "four", "四").
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

from rubricrl.core.jsonio import scan_jsonl

NAME = "qa"
DATA = Path(__file__).parent / "data" / "qa.jsonl"
LANGS = ("en", "zh")

# The instruction keeps answers short, so the match does not hit a wrong answer mentioned in passing.
_INSTRUCTION = {"en": "Answer briefly, in a few words.", "zh": "请用几个字简短回答。"}
_SEPARATORS = re.compile(r"[\W_]+")  # anything but letters and digits: punctuation, symbols, spaces
_ARTICLES = re.compile(r"\b(?:a|an|the)\b")
# Han, kana and Hangul: scripts written without spaces between words.
_CJK = re.compile(r"([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff])")


def normalize(text: str) -> str:
    """The normal form in which answers are looked for (the rule in the module docstring)."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = _SEPARATORS.sub(" ", text)
    text = _CJK.sub(r" \1 ", text)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _check(raw: object, where: str, seen: set[str]) -> dict:
    """One validated data line; a ValueError names the file, line and problem."""
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: expected a JSON object")
    item_id, lang, question, answers = (raw.get(k) for k in ("id", "lang", "question", "answers"))
    if not isinstance(item_id, str) or not item_id:
        raise ValueError(f"{where}: 'id' must be a non-empty string")
    if item_id in seen:
        raise ValueError(f"{where}: duplicate id {item_id!r}")
    if lang not in LANGS:
        raise ValueError(f"{where}: 'lang' must be one of {LANGS}, got {lang!r}")
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"{where}: 'question' must be a non-empty string")
    if not isinstance(answers, list) or not answers:
        raise ValueError(f"{where}: 'answers' must be a non-empty list")
    for answer in answers:
        # An answer that normalises to nothing (e.g. "the") would match every response.
        if not isinstance(answer, str) or not normalize(answer):
            raise ValueError(f"{where}: answer {answer!r} is empty after normalisation")
    seen.add(item_id)
    return {"id": item_id, "lang": lang, "prompt": f"{question.strip()}\n{_INSTRUCTION[lang]}", "answers": answers}


def load(n: int | None = None, path: str | Path | None = None) -> list[dict]:
    """The first `n` items (all when None): {"id", "lang", "prompt", "answers"}; blank lines are skipped."""
    path = Path(path) if path is not None else DATA
    if n is not None and n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    items: list[dict] = []
    seen: set[str] = set()
    for where, raw, problem in scan_jsonl(path):
        if n is not None and len(items) >= n:
            break
        if problem:
            raise ValueError(problem)
        items.append(_check(raw, where, seen))
    return items


def score(item: dict, response: str) -> dict:
    """1.0 when an accepted answer occurs in the response as whole words; `matched` is the first found."""
    padded = f" {normalize(response)} "
    for answer in item["answers"]:
        if f" {normalize(answer)} " in padded:
            return {"score": 1.0, "matched": answer}
    return {"score": 0.0, "matched": None}


def summarize(scored: list[dict]) -> dict:
    """Accuracy over the scored items (the outputs of `score`)."""
    if not scored:
        raise ValueError("no scored items to summarize")
    return {"accuracy": sum(s["score"] for s in scored) / len(scored), "n": len(scored)}
