"""The embedded data generator: sizes, determinism, valid and grounded gold, splits, diversity."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import unicodedata
from collections import Counter

import pytest

from rubricrl.data.domains import ALL
from rubricrl.data.domains.base import Record
from rubricrl.data.generate import DEFAULT_HELDOUT, DOMAINS, generate_dataset
from rubricrl.reward.grounding import normalize_text, rules_for, source_for
from rubricrl.core.taskfile import check_task_row

SEED_DOMAINS = ("product_review", "customer_service", "news")
CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(scope="module")
def splits():
    return generate_dataset(seed=0, n_train=800, n_test=200)


@pytest.fixture(scope="module")
def tasks(splits):
    return splits["train"] + splits["test"]


def _dump(splits) -> list[str]:
    return [json.dumps(t.to_dict(), ensure_ascii=False, sort_keys=True) for part in ("train", "test") for t in splits[part]]


def _in_text(surface: str, text: str) -> bool:
    """`surface` occurs in `text` as a whole value ('$12' is not in '$129', '1.5 hours' not in '11.5 hours')."""
    s, t = (unicodedata.normalize("NFKC", x).casefold() for x in (surface, text))
    return re.search(r"(?<![0-9a-z.,])" + re.escape(s) + r"(?![0-9a-z]|[,.][0-9])", t) is not None


def _records(n: int = 60):
    """Rendered records for every domain, language and template: (domain, record, text)."""
    rng = random.Random(7)
    for dom in ALL:
        for lang, templates in dom.TEMPLATES.items():
            for template in templates.values():
                for _ in range(n):
                    rec = Record(rng, lang, dom.FIELDS, dom.sample(rng, lang), dom.NEAR[lang])
                    yield dom, rec, template(rec)


# --- sizes, determinism, arguments -------------------------------------------------------------

def test_same_arguments_give_identical_output(splits):
    assert _dump(generate_dataset(seed=0, n_train=800, n_test=200)) == _dump(splits)


def test_output_does_not_depend_on_hash_randomisation():
    code = ("import hashlib, json; from rubricrl.data.generate import generate_dataset; "
            "s = generate_dataset(seed=4, n_train=60, n_test=20); "
            "print(hashlib.sha256(json.dumps([t.to_dict() for p in ('train', 'test') for t in s[p]]).encode()).hexdigest())")
    digests = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONHASHSEED": h}).stdout for h in ("1", "2")}
    assert len(digests) == 1


def test_other_seed_gives_other_data(splits):
    other = generate_dataset(seed=1, n_train=800, n_test=200)
    assert len(set(_dump(other)) & set(_dump(splits))) == 0


@pytest.mark.parametrize("n_train,n_test", [(800, 200), (8, 4), (1, 1), (0, 5), (13, 0), (37, 11)])
def test_sizes_are_exact(n_train, n_test):
    out = generate_dataset(seed=3, n_train=n_train, n_test=n_test)
    assert (len(out["train"]), len(out["test"])) == (n_train, n_test)


def test_impossible_requests_raise():
    with pytest.raises(ValueError, match="n_train"):
        generate_dataset(n_train=-1, n_test=2)
    with pytest.raises(ValueError, match="nothing to train"):
        generate_dataset(n_train=5, n_test=2, heldout_domains=DOMAINS)


def test_unknown_heldout_domain_is_named():
    with pytest.raises(ValueError, match="recipes.*horoscope|horoscope.*recipes"):
        generate_dataset(n_train=4, n_test=2, heldout_domains=["news", "recipes", "horoscope"])


def test_heldout_override_and_no_heldout():
    out = generate_dataset(seed=0, n_train=40, n_test=20, heldout_domains=["news"])
    assert {t.meta["domain"] for t in out["test"] if t.meta["part"] == "held_out_domain"} == {"news"}
    assert "news" not in {t.meta["domain"] for t in out["train"]}
    out = generate_dataset(seed=0, n_train=40, n_test=20, heldout_domains=[])
    assert {t.meta["part"] for t in out["test"]} == {"in_domain"}


# --- task format and gold ----------------------------------------------------------------------

def test_every_task_is_valid_and_gold_complete(tasks):
    for t in tasks:
        row = t.to_dict()
        assert check_task_row(row, t.id) == []
        assert t.schema["type"] == "object" and t.schema.get("additionalProperties") is not False
        assert t.schema["required"] == list(t.properties)
        assert list(t.reference) == list(t.properties)
        assert t.constraints and "null" in t.constraints[0]
        assert bool(CJK.search(t.instruction)) == (t.meta["lang"] == "zh")


def test_ids_unique_readable_and_texts_distinct(tasks):
    ids = [t.id for t in tasks]
    assert len(set(ids)) == len(ids)
    for t in tasks:
        assert re.fullmatch(rf"{t.meta['domain']}-{t.meta['lang']}-\d{{6}}", t.id)
    assert len({t.text for t in tasks}) == len(tasks)


def test_meta_fields(tasks):
    for t in tasks:
        m = t.meta
        assert m["lang"] in ("en", "zh") and m["domain"] in DOMAINS
        assert m["template"].startswith(f"{m['domain']}/{m['lang']}/")
        assert m["part"] in ("train", "in_domain", "held_out_domain")
        assert isinstance(m["hard"], list) and all(isinstance(h, str) for h in m["hard"])
        assert set(m.get("derived_fields", [])) <= set(t.properties)


def test_gold_values_are_grounded_in_the_text(tasks):
    """Every non-null gold string or number (not enum, boolean or reformatted) is supported."""
    for t in tasks:
        src, rules = source_for(t.text), rules_for(t)
        derived = set(t.meta.get("derived_fields", []))
        for name, value in t.reference.items():
            if value is None or name in derived or isinstance(value, bool) or "enum" in t.properties[name]:
                continue
            assert src.supports(value, rules[name]), (t.id, name, value, t.text)


def test_derived_values_are_reformatted_dates_or_times(tasks):
    for t in tasks:
        for name in t.meta.get("derived_fields", []):
            assert re.fullmatch(r"\d{4}-\d{2}-\d{2}|\d{2}:\d{2}", t.reference[name]), (t.id, name)


def test_unit_conversions_are_applied(tasks):
    """A converted field (grams from kg, minutes from hours, ...) is not the number the text writes."""
    seen = 0
    for t in tasks:
        if "unit_conversion" not in t.meta["hard"]:
            continue
        for name, value in t.reference.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and re.search(
                    r"_(g|grams|kg|minutes|min|hours|h|cents|in_cents|k|thousands|millions|musd|billions|yi|wan|100m_cny|"
                    r"10k_yuan|million_usd|yi_yuan|wan_yuan)$", name):
                seen += 1
                assert source_for(t.text).supports(value, rules_for(t)[name])  # the constraint asks for the unit
    assert seen > 30


def test_unsaid_facts_are_not_in_the_text():
    """A gold null is honest: the value the generator drew but did not render is not in the text."""
    checked = 0
    for dom, rec, text in _records():
        said = [f for k, f in rec.facts.items() if rec.rendered(k)]
        said_surfaces = " ".join(f.surface for f in said)
        for key, fact in rec.facts.items():
            if rec.rendered(key) or not fact.surface or any(fact.value == f.value for f in said):
                continue
            if fact.surface in said_surfaces:  # e.g. a $3.48 estimate vs a $3.48 billion outlook
                continue
            # Short counts ('3', '三') are everywhere; values, amounts and almost-mentioned facts are not.
            distinctive = isinstance(fact.value, (str, list)) or fact.unit in ("USD", "CNY") or key in rec.said_near
            if distinctive and len(fact.surface) > 1:
                checked += 1
                assert not _in_text(fact.surface, text), (dom.NAME, key, fact, text)
                if isinstance(fact.value, list):
                    assert not any(_in_text(x, text) for x in fact.value), (dom.NAME, key, fact, text)
    assert checked > 1000


def test_near_mentions_are_absent_facts_without_numbers():
    for dom, rec, text in _records(20):
        for key in rec.said_near:
            assert not rec.rendered(key), (dom.NAME, key)
    for dom in ALL:
        for lang in ("en", "zh"):
            for phrases in dom.NEAR[lang].values():
                assert not any(re.search(r"\d", p) for p in phrases), (dom.NAME, phrases)


def test_rendered_facts_are_in_the_text():
    """What a record marks as said is really there (so gold built from it is not invented)."""
    for dom, rec, text in _records(20):
        src = source_for(text)
        for key, fact in rec.facts.items():
            if rec.rendered(key) and fact.surface:
                assert src.supports(fact.surface) or normalize_text(fact.surface) in src.norm, (dom.NAME, key, text)


# --- splits ------------------------------------------------------------------------------------

def test_default_heldout_domains(splits):
    assert len(DEFAULT_HELDOUT) == 2 and not set(DEFAULT_HELDOUT) & set(SEED_DOMAINS)
    train_domains = {t.meta["domain"] for t in splits["train"]}
    assert not train_domains & set(DEFAULT_HELDOUT)
    assert train_domains == set(DOMAINS) - set(DEFAULT_HELDOUT)
    held = [t for t in splits["test"] if t.meta["part"] == "held_out_domain"]
    assert {t.meta["domain"] for t in held} == set(DEFAULT_HELDOUT)
    assert {t.meta["part"] for t in splits["train"]} == {"train"}


def test_reserved_templates_only_in_test(splits):
    reserved = {f"{d.NAME}/{lang}/{d.RESERVED[lang]}" for d in ALL for lang in ("en", "zh")}
    assert not {t.meta["template"] for t in splits["train"]} & reserved
    in_domain = [t for t in splits["test"] if t.meta["part"] == "in_domain"]
    assert {t.meta["template"] for t in in_domain} <= reserved
    assert {t.meta["domain"] for t in in_domain} == set(DOMAINS) - set(DEFAULT_HELDOUT)
    assert 0.5 <= len(in_domain) / len(splits["test"]) <= 0.7


def test_domains_templates_and_languages(tasks):
    assert len(DOMAINS) >= 8 and set(SEED_DOMAINS) <= set(DOMAINS)
    for dom in ALL:
        for lang in ("en", "zh"):
            assert len(dom.TEMPLATES[lang]) >= 4 and dom.RESERVED[lang] in dom.TEMPLATES[lang]
    langs = Counter((t.meta["domain"], t.meta["lang"]) for t in tasks)
    for d in DOMAINS:
        en, zh = langs[(d, "en")], langs[(d, "zh")]
        assert en and zh and 0.4 <= en / (en + zh) <= 0.6


# --- diversity and difficulty ------------------------------------------------------------------

def test_hard_cases_and_nulls_are_common(splits):
    train = splits["train"]
    assert sum(bool(t.meta["hard"]) for t in train) / len(train) >= 0.6
    assert sum(any(v is None for v in t.reference.values()) for t in train) / len(train) >= 0.3
    tags = Counter(h for t in train for h in t.meta["hard"])
    for tag in ("old_vs_new_value", "neighbouring_value", "near_mention", "two_people", "unit_conversion", "format_constraint"):
        assert tags[tag] >= 40, tags


def test_schemas_vary(splits):
    train = splits["train"]
    assert len({tuple(sorted(t.properties)) for t in train}) >= 50
    props = [p for t in train for p in t.properties.values()]
    types = Counter(json.dumps(p["type"]) for p in props)
    for ty in ('"string"', '"number"', '"integer"', '"boolean"', '["string", "null"]', '["array", "null"]'):
        assert types[ty] > 0, types
    assert any("enum" in p for p in props) and any("pattern" in p for p in props)
    assert any(p.get("type") in ("array", ["array", "null"]) and "items" in p for p in props)
    assert len({t.meta["template"] for t in train}) >= 40
    assert len({t.instruction for t in train}) >= 40
