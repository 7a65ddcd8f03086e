"""The true metric for free-text tasks: a checklist per task, written apart from the rubric items that make the
reward, and checked here by code that shares nothing with the reward (no grounding, no item checks).

A task's `meta.checklist` (the embedded data writes one for every task, rubricrl/data/replies.py):

    {"lang": "en", "facts": [{"what": "order", "text": "F-92474"}, {"what": "refund amount", "number": 68.48},
                             {"what": "a replacement", "any_text": ["replace"]}],
     "forbidden_numbers": [74.47], "refund_allowed": true, "max_words": 130}

Entries, each passed or failed:
- every fact stated exactly: a text as written (case and width aside), a number as a number the reply writes (68.48
  is "68.48", not "68.5" and not "about 68"), one of `any_text`;
- policy kept: where `refund_allowed` is false, no sentence promises a refund (a promise phrase without a negation
  in the same sentence);
- no forbidden number stated (the total with shipping, both charges), and no number the source text does not write
  (an invented amount, deadline or date);
- the reply is in the task's language and within `max_words` (a CJK character is a word).

`score` is the share of entries passed; `strict` is 1 when all pass. Per task both, so models compare by paired
differences (rubricrl.metrics.paired) as for extraction.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

from rubricrl.core.taskfile import Task

_NUMBER = re.compile(r"(?<![A-Za-z0-9.])\d+(?:\.\d+)?(?![0-9])")
_CJK = re.compile(r"[\u3400-\u9fff]")
_LATIN = re.compile(r"[A-Za-z]")
_WORD = re.compile(r"[\u3400-\u9fff]|[A-Za-z0-9]+(?:['.\-][A-Za-z0-9]+)*")
_SENTENCE = re.compile(r"[^.!?。！？\n]+")
PROMISES = {"en": re.compile(r"\b(we will|we'll|we can|you will|you'll) (\w+ ){0,3}(refund|reimburse)|"
                             r"\b(full|complete) refund\b|\brefund(ing)? (you|your)\b", re.I),
            "zh": re.compile(r"退款|退还|退回|返还")}
NEGATIONS = {"en": re.compile(r"\b(not|cannot|can't|unable|no longer|won't|unfortunately)\b", re.I),
             "zh": re.compile(r"无法|不能|不予|不可|不再|很遗憾|不退")}


@dataclass
class ChecklistResult:
    passed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    kinds: dict[str, str] = field(default_factory=dict)  # entry -> fact (to state), guard (to avoid) or form

    @property
    def score(self) -> float:
        n = len(self.passed) + len(self.failed)
        return len(self.passed) / n if n else 0.0

    @property
    def strict(self) -> float:
        return float(not self.failed and bool(self.passed))


def _norm(text: str) -> str:
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", text).casefold())


def _numbers(text: str) -> set[float]:
    """Numbers as written: digits with an optional decimal point; thousands separators dropped first."""
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", unicodedata.normalize("NFKC", text))
    return {round(float(m.group()), 4) for m in _NUMBER.finditer(text)}


def _has(numbers: set[float], x: float) -> bool:
    return round(float(x), 4) in numbers


def check(task: Task, reply: str) -> ChecklistResult:
    sheet = task.meta.get("checklist")
    if not isinstance(sheet, dict):
        raise ValueError(f"task {task.id}: no checklist in meta (the free-text true metric needs one)")
    out, lang = ChecklistResult(), sheet.get("lang") or task.meta.get("lang") or "en"
    said, numbers, source_numbers = _norm(reply), _numbers(reply), _numbers(task.text)

    def mark(ok: bool, what: str, kind: str) -> None:
        (out.passed if ok else out.failed).append(what)
        out.kinds[what] = kind

    for fact in sheet.get("facts", ()):
        if "number" in fact:
            mark(_has(numbers, fact["number"]), f"states {fact['what']} {fact['number']:g}", "fact")
        elif "text" in fact:
            mark(_norm(fact["text"]) in said, f"states {fact['what']} {fact['text']}", "fact")
        else:
            mark(any(_norm(t) in said for t in fact["any_text"]), f"states {fact['what']}", "fact")
    if not sheet.get("refund_allowed", True):
        promise, negation = PROMISES[lang], NEGATIONS[lang]
        broken = any(promise.search(s) and not negation.search(s) for s in _SENTENCE.findall(reply))
        mark(not broken, "promises no refund the policy does not allow", "guard")
    forbidden = [x for x in sheet.get("forbidden_numbers", ()) if _has(numbers, x)]
    mark(not forbidden, "states no forbidden amount", "guard")
    mark(numbers <= source_numbers, "states only numbers the source gives", "guard")
    cjk, latin = len(_CJK.findall(reply)), len(_LATIN.findall(reply))
    in_lang = (cjk > latin / 3) if lang == "zh" else (latin > 0 and cjk == 0)
    mark(in_lang, f"written in {lang}", "form")
    mark(0 < len(_WORD.findall(reply)) <= sheet.get("max_words", 10**9), "within the length", "form")
    return out


def checklist_counts(task: Task, reply: str):
    """The checklist as the true metric's counts (rubricrl.metrics.strict.StrictCounts), so that every report,
    gate and monitor reads free-text tasks as it reads extraction ones: a checklist entry is a "field"; the facts
    to state are the "present" fields (one not stated is an omission: null_for_present); the policy, forbidden and
    invented-number entries are the "absent" ones (one failed is an invention); the language and length entries
    count as fields only. field_accuracy is the checklist score, exact_object_rate the strict one."""
    from rubricrl.metrics.strict import StrictCounts

    result = check(task, reply)
    facts = [e for e, k in result.kinds.items() if k == "fact"]
    guards = [e for e, k in result.kinds.items() if k == "guard"]
    failed = set(result.failed)
    return StrictCounts(fields=len(result.kinds), right=len(result.passed), present=len(facts),
                        present_right=sum(e not in failed for e in facts),
                        null_for_present=sum(e in failed for e in facts), absent=len(guards),
                        invented=sum(e in failed for e in guards), parsed=bool(reply.strip()))
