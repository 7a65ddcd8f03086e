"""The true metric for free-text tasks: a checklist per task, written apart from the rubric items that make the
reward, and checked here by a procedure of its own: the reply's claims, read sentence by sentence
(rubricrl/metrics/claims.py: prose or not, negation scope, the remedies offered and refused, the amounts with the
noun they attach to), compared with the checklist's facts. Nothing is shared with the reward (tests/test_layers.py
and tests/metrics/test_strict_metric.py read the imports).

A task's `meta.checklist` (the embedded data writes one for every task, rubricrl/data/replies.py):

    {"lang": "en", "facts": [{"what": "order", "text": "F-92474"},
                             {"what": "refund amount", "number": 68.48, "noun": "refund"},
                             {"what": "a prepaid return label", "any_text": ["return label"]}],
     "owed": ["refund", "replacement"], "refused": [], "forbidden_numbers": [74.47],
     "min_words": 15, "max_words": 130}

Entries, each passed or failed:
- every fact *claimed*: a text (an identifier) as written in a prose sentence; one of `any_text` in a prose
  sentence outside any negation scope; a number as a number the reply writes (68.48 is "68.48", not "68.5" nor
  "about 68") in a prose sentence, outside any negation scope, attached to the fact's `noun` when it names one
  (refund, voucher, shipping, days), and never negated anywhere;
- every remedy `owed` (refund, replacement, voucher, return) *offered*: a prose sentence offers it and no sentence
  refuses it; and one guard: no sentence refuses a remedy owed;
- every remedy `refused` *refused*: a sentence says no to it (the customer must learn the answer); and one guard:
  no sentence offers one of them (nor, where `refund_allowed` is false, a refund);
- no forbidden number stated (the total with shipping, both charges), and no number the source text does not write
  (an invented amount, deadline or date);
- the form: written in the task's language; between `min_words` and `max_words` words (a CJK character is a
  word); read as prose (at least 60% of its words in prose sentences: a bag of tokens or shuffled words is not).

`score` is the share of entries passed; `strict` is 1 when all pass. Per task both, so models compare by paired
differences (rubricrl.metrics.paired) as for extraction.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

from rubricrl.core.taskfile import Task
from rubricrl.metrics.claims import Sentence, read

_NUMBER = re.compile(r"(?<![A-Za-z0-9.])\d+(?:\.\d+)?(?![0-9])")
_WORD = re.compile(r"[\u3400-\u9fff]|[A-Za-z0-9]+(?:['.\-][A-Za-z0-9]+)*")
PROSE_SHARE = 0.6


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


def _numbers(text: str) -> set[float]:
    """Numbers as written: digits with an optional decimal point; thousands separators dropped first."""
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", unicodedata.normalize("NFKC", text))
    return {round(float(m.group()), 4) for m in _NUMBER.finditer(text)}


def _has(numbers: set[float], x: float) -> bool:
    return round(float(x), 4) in numbers


def _claims_number(sentences: list[Sentence], fact: dict) -> bool:
    x, noun = round(float(fact["number"]), 2), fact.get("noun")
    hits = [a for s in sentences for a in s.amounts if a.value == x and (noun is None or a.noun == noun)]
    said = any(not a.negated for s in sentences if s.prose for a in s.amounts
               if a.value == x and (noun is None or a.noun == noun))
    return said and not any(a.negated for a in hits)


def _claims_text(sentences: list[Sentence], texts: list[str], affirmed: bool) -> bool:
    for s in sentences:
        if not s.prose:
            continue
        norm = unicodedata.normalize("NFKC", s.text).casefold()
        for t in texts:
            at = norm.find(unicodedata.normalize("NFKC", t).casefold())
            if at >= 0 and not (affirmed and s.negated_at(at)):
                return True
    return False


def check(task: Task, reply: str) -> ChecklistResult:
    sheet = task.meta.get("checklist")
    if not isinstance(sheet, dict):
        raise ValueError(f"task {task.id}: no checklist in meta (the free-text true metric needs one)")
    out, lang = ChecklistResult(), sheet.get("lang") or task.meta.get("lang") or "en"
    sentences = read(reply)
    numbers, source_numbers = _numbers(reply), _numbers(task.text)

    def mark(ok: bool, what: str, kind: str) -> None:
        (out.passed if ok else out.failed).append(what)
        out.kinds[what] = kind

    for fact in sheet.get("facts", ()):
        if "number" in fact:
            mark(_claims_number(sentences, fact), f"states {fact['what']} {fact['number']:g}", "fact")
        elif "text" in fact:
            mark(_claims_text(sentences, [fact["text"]], False), f"states {fact['what']} {fact['text']}", "fact")
        else:
            mark(_claims_text(sentences, fact["any_text"], True), f"states {fact['what']}", "fact")
    offered = {r for s in sentences for r in s.offered}
    refused = {r for s in sentences for r in s.refused}
    affirmed = {r for s in sentences for r in s.affirmed}
    owed, denied = list(sheet.get("owed", ())), list(sheet.get("refused", ()))
    for remedy in owed:
        mark(remedy in offered and remedy not in refused, f"offers the {remedy}", "fact")
    if owed:
        mark(not refused & set(owed), "refuses no remedy the policy grants", "guard")
    for remedy in denied:
        mark(remedy in refused, f"says no to the {remedy}", "fact")
    if denied:
        mark(not affirmed & set(denied), f"promises no {' or '.join(denied)} the policy does not allow", "guard")
    if not sheet.get("refund_allowed", True) and "refund" not in denied:
        mark("refund" not in affirmed, "promises no refund the policy does not allow", "guard")
    forbidden = [x for x in sheet.get("forbidden_numbers", ()) if _has(numbers, x)]
    mark(not forbidden, "states no forbidden amount", "guard")
    mark(numbers <= source_numbers, "states only numbers the source gives", "guard")
    cjk = sum("\u3400" <= c <= "\u9fff" for c in reply)
    latin = sum(c.isascii() and c.isalpha() for c in reply)
    in_lang = (cjk > latin / 3) if lang == "zh" else (latin > 0 and cjk == 0)
    mark(in_lang, f"written in {lang}", "form")
    n_words = len(_WORD.findall(reply))
    mark(sheet.get("min_words", 1) <= n_words <= sheet.get("max_words", 10**9), "within the length", "form")
    total = sum(s.words for s in sentences)
    mark(total > 0 and sum(s.words for s in sentences if s.prose) >= PROSE_SHARE * total, "reads as prose", "form")
    return out


def checklist_counts(task: Task, reply: str):
    """The checklist as the true metric's counts (rubricrl.metrics.strict.StrictCounts), so that every report,
    gate and monitor reads free-text tasks as it reads extraction ones: a checklist entry is a "field"; the facts
    to state are the "present" fields (one not stated is an omission: null_for_present); the policy, forbidden and
    invented-number entries are the "absent" ones (one failed is an invention); the language, length and prose
    entries count as fields only. field_accuracy is the checklist score, exact_object_rate the strict one."""
    from rubricrl.metrics.strict import StrictCounts

    result = check(task, reply)
    facts = [e for e, k in result.kinds.items() if k == "fact"]
    guards = [e for e, k in result.kinds.items() if k == "guard"]
    failed = set(result.failed)
    return StrictCounts(fields=len(result.kinds), right=len(result.passed), present=len(facts),
                        present_right=sum(e not in failed for e in facts),
                        null_for_present=sum(e in failed for e in facts), absent=len(guards),
                        invented=sum(e in failed for e in guards), parsed=bool(reply.strip()))
