"""Stratified slices: a short slice sees every part, and every domain and language within a part."""

from __future__ import annotations

from collections import Counter

from rubricrl.core.slices import stratified
from rubricrl.core.taskfile import Task
from rubricrl.evaluate import task as evaluate


def make(i: int, part: str | None, domain: str, lang: str) -> Task:
    meta = {"domain": domain, "lang": lang, **({"part": part} if part else {})}
    return Task(f"{domain}-{lang}-{i}", "Extract.", "text", {"type": "object"}, (), None, meta=meta)


def split() -> list[Task]:
    """The generator's file order: every in-domain task (4 domains x 2 languages) before the held-out ones."""
    tasks = [make(i, "in_domain", d, lang) for d in "abcd" for lang in ("en", "zh") for i in range(5)]
    return tasks + [make(i, "held_out_domain", d, lang) for d in "xy" for lang in ("en", "zh") for i in range(3)]


def test_a_short_slice_takes_both_parts_equally_and_every_stratum_within_them():
    tasks = split()
    assert [t.meta["part"] for t in tasks[:8]] == ["in_domain"] * 8  # what a file-order [:8] saw
    chosen = stratified(tasks, 8)
    assert Counter(t.meta["part"] for t in chosen) == {"in_domain": 4, "held_out_domain": 4}
    held = [(t.meta["domain"], t.meta["lang"]) for t in chosen if t.meta["part"] == "held_out_domain"]
    assert sorted(held) == [("x", "en"), ("x", "zh"), ("y", "en"), ("y", "zh")]  # every held-out stratum once
    assert sorted(t.meta["domain"] for t in chosen if t.meta["part"] == "in_domain") == ["a", "b", "c", "d"]
    assert chosen == [t for t in tasks if t in chosen]  # file order kept
    assert stratified(tasks, 8) == chosen  # deterministic


def test_a_part_with_few_tasks_gives_its_share_to_the_other():
    tasks = split()[:40] + split()[40:41]  # one held-out task
    chosen = stratified(tasks, 6)
    assert Counter(t.meta["part"] for t in chosen) == {"in_domain": 5, "held_out_domain": 1}
    assert stratified(tasks, None) == tasks and stratified(tasks, 100) == tasks


def test_without_parts_it_balances_domains_and_languages():
    tasks = [make(i, None, d, lang) for d in "ab" for lang in ("en", "zh") for i in range(4)]
    assert Counter((t.meta["domain"], t.meta["lang"]) for t in stratified(tasks, 4)) == {
        ("a", "en"): 1, ("a", "zh"): 1, ("b", "en"): 1, ("b", "zh"): 1}


def test_eval_slice_is_stratified_within_each_part():
    tasks = split()
    chosen = evaluate.test_slice(tasks, 4)
    assert Counter(t.meta["part"] for t in chosen) == {"in_domain": 4, "held_out_domain": 4}
    assert len({t.meta["domain"] for t in chosen if t.meta["part"] == "in_domain"}) == 4  # a, b, c, d once each
