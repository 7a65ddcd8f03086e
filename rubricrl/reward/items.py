"""The deterministic checks of a free-text task's rubric items (rubricrl.core.items documents each kind).

`check_item(item, reply)` answers whether the reply does what the item asks (for a pitfall: avoids the mistake),
with a short reason; an item without a check answers None (the judge grades it). `states`, `not_states` and
`coherent` read the reply by sentence and clause (rubricrl/reward/prose.py: prose or a bag of tokens, negation,
commitment); the others search the whole reply. Every check is bounded in time: normalised substring search, the
clause reading and the grounding code are linear in the reply, a regex runs under a time limit, and a reply
longer than MAX_REPLY_CHARS fails every check (a check that reads only part of it could miss a pitfall further
on).
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass

import regex

from rubricrl.core.items import Item
from rubricrl.core.taskfile import compiled_pattern, timed_search
from rubricrl.reward.grounding import FieldRule, extract_numbers, source_for
from rubricrl.reward.grounding.numbers import number_spans, word_numbers
from rubricrl.reward.prose import clauses, coherence, commits

MAX_REPLY_CHARS = 20_000
REGEX_TIMEOUT_S = 0.1
# A value may be stated the way the reply likes: a date in words for YYYY-MM-DD, "3:30 pm" for 15:30.
_VALUE_RULE = FieldRule(date=True, time=True)
_WORD = regex.compile(r"\p{Han}|[\p{L}\p{N}]+(?:['’.\-][\p{L}\p{N}]+)*")
_HAN = regex.compile(r"\p{Han}")
_LATIN = regex.compile(r"\p{Latin}")
_PARAGRAPHS = regex.compile(r"\n\s*\n")


@dataclass(frozen=True)
class ItemVerdict:
    id: str
    importance: str
    passed: bool | None  # None: no deterministic check, the judge grades the item
    reason: str
    # A verdict that also costs a pitfall (rules.item_pitfalls), and why: an `offered` item named only in void offers
    # (hedged, conditional, ...); padding: a length limit broken by more than a fifth, a sentence said twice.
    costs: str | None = None


def declared_numbers(items) -> tuple[float, ...]:
    """The numbers a task's own items ask the reply to state (`value` and `states` checks): a computed amount (a
    pro-rata refund, a percentage) the source does not write is no invention when the task says it is owed."""
    out = []
    for item in items:
        if item.check and item.check["kind"] in ("value", "states") and "value" in item.check:
            out += extract_numbers(str(item.check["value"]))
    return tuple(dict.fromkeys(out))


def check_item(item: Item, reply: str, source: str = "", declared: tuple[float, ...] = ()) -> ItemVerdict:
    """`source`: the task's text, `declared`: the numbers its items state (what `source_numbers` compares with)."""
    if item.check is None:
        return ItemVerdict(item.id, item.importance, None, "no deterministic check")
    if len(reply) > MAX_REPLY_CHARS:
        return ItemVerdict(item.id, item.importance, False,
                           f"reply too long to check ({len(reply)} > {MAX_REPLY_CHARS} characters)")
    kind = item.check["kind"]
    passed, reason, *costs = (_source_numbers(reply, source, (*declared, *item.check.get("allow", ())))
                              if kind == "source_numbers"
                              else CHECKS[kind](item.check, reply))
    return ItemVerdict(item.id, item.importance, passed, reason, costs[0] if costs else None)


def _texts(check: dict) -> list[str]:
    return check["text"] if isinstance(check["text"], list) else [check["text"]]


def _found(check: dict, reply: str) -> list[str]:
    src = source_for(reply)
    return [t for t in _texts(check) if src.mentions(t)]


def _contains(check: dict, reply: str) -> tuple[bool, str]:
    found = _found(check, reply)
    return (True, f"says {found[0]!r}") if found else (False, f"does not say {_or(_texts(check))}")


def _not_contains(check: dict, reply: str) -> tuple[bool, str]:
    found = _found(check, reply)
    return (False, f"says {found[0]!r}") if found else (True, f"does not say {_or(_texts(check))}")


def _value_anywhere(check: dict, reply: str) -> bool:
    value = check["value"]
    return source_for(reply).supports(value, _VALUE_RULE) if reply.strip() else False


def _value(check: dict, reply: str) -> tuple[bool, str]:
    return ((True, f"states {check['value']!r}") if _value_anywhere(check, reply)
            else (False, f"does not state {check['value']!r}"))


def _not_value(check: dict, reply: str) -> tuple[bool, str]:
    return ((False, f"states {check['value']!r}") if _value_anywhere(check, reply)
            else (True, f"does not state {check['value']!r}"))


def _search(pattern: str, reply: str) -> bool | None:
    return timed_search(compiled_pattern(pattern), reply, REGEX_TIMEOUT_S)


def _regex(check: dict, reply: str) -> tuple[bool, str]:
    hit = _search(check["pattern"], reply)
    if hit is None:
        return False, "the pattern ran out of time"
    return (True, "matches the pattern") if hit else (False, "does not match the pattern")


def _not_regex(check: dict, reply: str) -> tuple[bool, str]:
    hit = _search(check["pattern"], reply)
    if hit is None:
        return False, "the pattern ran out of time"
    return (False, "matches the pattern") if hit else (True, "does not match the pattern")


def _plurals(texts: list[str]) -> list[str]:
    """An English word's plural is the same word ("refund" also reads "Refunds"); a phrase or another language is
    read as written."""
    out = list(texts)
    for t in texts:
        if regex.fullmatch(r"[A-Za-z]+", t) and not t.lower().endswith("s"):
            out.append(t + ("es" if t.lower().endswith(("x", "ch", "sh")) else "s"))
    return out


def _holds(check: dict, text: str) -> bool:
    src = source_for(text)
    if "value" in check:
        return src.supports(check["value"], _VALUE_RULE)
    return any(src.mentions(t) for t in _plurals(_texts(check)))


# a negated verb whose object, ending the clause, is a pronoun ("does not reimburse them"; not "won't charge you for it")
_PRONOUN_OBJECT = regex.compile(r"(?i)(?:\bnot|n't|\bcannot|\bnever)\s+(?:\w+\s+)?\w+\s+(?:them|it|those|these)\s*[.;,!]?\s*$")


def _nearest_amount(text: str, value, near: list[str]) -> bool:
    """The value is the amount nearest to one of the near words in the clause ("we will release the remaining
    1,180.00 EUR of your 1,500.00 EUR deposit" releases 1,180.00, not the deposit's size)."""
    text = unicodedata.normalize("NFKC", text)
    amounts = number_spans(text)
    low = text.casefold()
    spots = [m.start() for w in near for m in regex.finditer(r"(?<!\w)" + regex.escape(w.casefold()) + r"(?!\w)", low)]
    if not amounts or not spots:
        return True
    target = [round(x, 4) for x in extract_numbers(str(value))]
    return any(round(min(amounts, key=lambda a: abs(a[0] - at))[1], 4) in target for at in spots)


def _mentions(check: dict, reply: str, nearest: bool = False) -> list[tuple[bool, bool, bool]]:
    """(negated, in a prose sentence, committed: and not hedged, conditional, counterfactual, quoted nor retracted,
    why a commitment there is void, a reason or circumstance clause) for every clause of the reply that holds the fact: its text or
    value, one of its `near` words, none of its `ignore` words (rubricrl.reward.prose reads the clauses). A clause
    after a colon takes its near words from the clause before it ("is refunded in full: ..., 142.50 EUR in total").
    `nearest`: a value counts only as the amount nearest to a near word (what a pitfall reads)."""
    near, ignore = check.get("near") or [], check.get("ignore") or []
    out, before = [], None
    parts = clauses(reply)
    fees = [f"{t}费" for t in (_texts(check) if "text" in check else []) if not t.endswith("费")]
    for k, clause in enumerate(parts):
        text = clause.text
        for fee in fees:  # 改签费 is a fee, not the rebooking (不收取改签费 refuses no rebooking); 免收费用 is 免收 + 费用
            text = regex.sub(regex.escape(fee) + "(?!用)", "费", text)
        src = source_for(text)
        lead = before.text if before is not None and before.sentence == clause.sentence and (
            before.text.rstrip() + ":") in clause.sentence else ""
        before = clause
        if (_holds(check, text) and (not near or any(src.mentions(w) for w in near) or (
                lead and any(source_for(lead).mentions(w) for w in near)))
                and not any(src.mentions(w) for w in ignore)
                and not (nearest and near and "value" in check and not _nearest_amount(text, check["value"], near))):
            verbs = near or (_texts(check) if "text" in check else [])
            committed = commits(clause.sentence, clause.text, verbs) or bool(
                lead and commits(clause.sentence, lead, verbs))
            # "The train tickets are outside the order, so our policy does not reimburse them": the negated
            # clause after it whose object is a pronoun refuses what this one names
            after = parts[k + 1] if k + 1 < len(parts) and parts[k + 1].sentence == clause.sentence else None
            negated = clause.negated or bool(after and after.negated and _PRONOUN_OBJECT.search(after.text))
            out.append((negated, clause.prose, committed and clause.void is None,
                        clause.void if committed else None, clause.subordinate))
    return out


def _what(check: dict) -> str:
    what = repr(check["value"]) if "value" in check else _or(_texts(check))
    return what + (f" (with {_or(check['near'])})" if check.get("near") else "")


def _states(check: dict, reply: str) -> tuple:
    polarity, found, what = check.get("polarity", "any"), _mentions(check, reply), _what(check)
    prose = [(neg, committed, void) for neg, ok, committed, void, _ in found if ok]
    if polarity == "negated":
        if any(neg for neg, _, _ in prose):
            return True, f"refuses {what}"
        return False, f"no prose sentence refuses {what}"
    if polarity in ("affirmed", "offered") and any(neg and not sub for neg, _, _, _, sub in found):
        return False, f"a clause negates {what}"
    if not prose:
        return False, f"no prose sentence states {what}" + (" (only outside prose)" if found else "")
    if polarity == "offered" and not any(committed for _, committed, _ in prose):
        void = next((v for _, _, v in prose if v), None)
        if void:  # named in an offer that is no offer: a pitfall of its own (rules.item_pitfalls)
            return False, f"offers {what} only in a {void} sentence, which commits to nothing", f"{void} offer"
        return False, f"names {what} but offers nothing (no modal or offer verb)"
    return True, f"states {what}" + {"affirmed": " affirmatively", "offered": " as an offer"}.get(polarity, "")


def _not_states(check: dict, reply: str) -> tuple[bool, str]:
    polarity, found, what = check.get("polarity", "any"), _mentions(check, reply, nearest=True), _what(check)
    hits = [neg for neg, _, committed, _, sub in found if polarity == "any" or (neg == (polarity == "negated") and (
        polarity != "offered" or committed) and not (neg and sub))]
    verb = {"any": "states", "affirmed": "affirms", "offered": "offers", "negated": "refuses"}[polarity]
    return (False, f"{verb} {what}") if hits else (True, f"never {verb} {what}")


COHERENT_SHARE = 0.75


def _coherent(check: dict, reply: str) -> tuple[bool, str]:
    c = coherence(reply, check["language"])
    bar = check.get("min_share", COHERENT_SHARE)
    said = f"{c.share:.0%} of its words in prose sentences ({c.prose} of {c.sentences})"
    if c.share >= bar:
        if c.repeated:  # coherent, but a sentence said twice word for word: padding (rules.item_pitfalls)
            return True, said, f"padded: says {c.repeated!r} again"
        return True, said
    return False, f"not a coherent reply: {said}, under {bar:.0%}" + (f"; e.g. {c.example}" if c.example else "")


PADDED = 1.2  # a reply over its word or character limit by more than a fifth is padded


def measure(reply: str) -> dict[str, int]:
    """Characters (without surrounding whitespace), words (a CJK character is one) and paragraphs."""
    text = reply.strip()
    return {"chars": len(text), "words": len(_WORD.findall(text)),
            "paragraphs": len([p for p in _PARAGRAPHS.split(text) if p.strip()])}


def _length(check: dict, reply: str) -> tuple[bool, str]:
    m = measure(reply)
    bounds = (("min_chars", "chars", 1), ("max_chars", "chars", -1), ("min_words", "words", 1),
              ("max_words", "words", -1), ("max_paragraphs", "paragraphs", -1))
    broken = [f"{m[unit]} {unit} ({'<' if sign > 0 else '>'} {check[key]})" for key, unit, sign in bounds
              if key in check and (m[unit] < check[key] if sign > 0 else m[unit] > check[key])]
    padded = [f"{m[unit]} {unit}, over {key} {check[key]} by more than a fifth" for key, unit in
              (("max_chars", "chars"), ("max_words", "words")) if key in check and m[unit] > PADDED * check[key]]
    if padded:  # far over the limit: padding, a pitfall of its own (rules.item_pitfalls)
        return False, "; ".join(broken), "padded: " + padded[0]
    if broken:
        return False, "; ".join(broken)
    return True, f"{m['chars']} characters, {m['words']} words, {m['paragraphs']} paragraph(s): within the limits"


def script_share(reply: str) -> tuple[int, int]:
    """(Han characters, Latin letters) in the reply."""
    return len(_HAN.findall(reply)), len(_LATIN.findall(reply))


def _language(check: dict, reply: str) -> tuple[bool, str]:
    han, latin = script_share(reply)
    if han + latin == 0:
        return False, "no letters"
    # Chinese replies carry Latin names, codes and amounts ("订单 A-1042", "EUR"): counted per character, a Han
    # character outweighs a Latin letter about 3 to 1 in information.
    zh = 3 * han / (3 * han + latin)
    want = check["language"]
    ok = zh >= 0.5 if want == "zh" else zh < 0.2
    share = f"{han} Han characters, {latin} Latin letters"
    return (True, f"written in {want} ({share})") if ok else (False, f"not written in {want} ({share})")


def _ifeval(check: dict, reply: str) -> tuple[bool, str]:
    from if_verifiable.ifeval.instructions_registry import INSTRUCTION_DICT

    instruction_id, kwargs = check["instruction_id"], check.get("kwargs") or {}
    checker = INSTRUCTION_DICT[instruction_id](instruction_id)
    checker.build_description(**kwargs)  # every argument given (validated when the task file was read)
    try:
        ok = bool(reply.strip()) and bool(checker.check_following(reply))
    except Exception as exc:  # noqa: BLE001 (a checker failing on a hostile reply is a failed check, not a crash)
        return False, f"{instruction_id}: the checker failed on the reply ({type(exc).__name__})"
    args = json.dumps(kwargs, ensure_ascii=False)[:80]
    return (True, f"{instruction_id} {args}: followed") if ok else (False, f"{instruction_id} {args}: not followed")


def _source_numbers(reply: str, source: str, declared: tuple[float, ...] = ()) -> tuple[bool, str]:
    src = source_for(source)
    stated = list(dict.fromkeys(extract_numbers(reply)))
    known = {round(d, 4) for d in (*declared, *word_numbers(source))}  # "three-night" states 3
    # One in words (a voucher, 一张, "one more time") is a count, not an amount to invent; a digit 1 is stated.
    one = bool(regex.search(r"(?<![\d.,])1(?![\d.,])", reply))
    invented = [n for n in stated if not src.has_number(n) and round(n, 4) not in known and (n != 1 or one)]
    if invented:
        shown = ", ".join(f"{n:g}" for n in invented[:4]) + (f" and {len(invented) - 4} more" if len(invented) > 4 else "")
        return False, f"states {shown}, not in the source"
    return True, f"every number stated ({len(stated)}) is in the source"


CHECKS = {"contains": _contains, "not_contains": _not_contains, "value": _value, "not_value": _not_value,
          "regex": _regex, "not_regex": _not_regex, "length": _length, "language": _language, "ifeval": _ifeval,
          "states": _states, "not_states": _not_states, "coherent": _coherent,
          "source_numbers": None}  # needs the task's text: check_item calls _source_numbers


def _or(texts: list[str]) -> str:
    shown = " or ".join(repr(t) for t in texts[:3])
    return shown + (f" (or {len(texts) - 3} more)" if len(texts) > 3 else "")
