"""The embedded default data set: realistic JSON-extraction tasks with gold answers.

    splits = generate_dataset(seed=0, n_train=800, n_test=200)  # {"train": [...], "test": [...]}

Training never sees the held-out domains, nor one reserved text template per language in every
other domain; the test split is those reserved templates ("in_domain", ~60%) plus the held-out
domains ("held_out_domain", ~40%). Everything is drawn from one random.Random(seed), so the same
arguments give byte-identical tasks.
"""

from __future__ import annotations

import random
from typing import Callable, Sequence

from rubricrl.data.domains import BY_NAME
from rubricrl.data.domains.base import LANGS, Record
from rubricrl.data.domains.fieldtypes import build
from rubricrl.data.domains.wording import constraints, instruction
from rubricrl.core.taskfile import Task

DOMAINS = list(BY_NAME)
DEFAULT_HELDOUT = ("earnings_report", "medical_appointment")
IN_DOMAIN_SHARE = 0.6
MIN_FIELDS = 4
_MAX_TRIES = 50  # redraws of a task whose text repeats an earlier one


def generate_dataset(seed: int = 0, n_train: int = 800, n_test: int = 200,
                     heldout_domains: list[str] | None = None) -> dict[str, list[Task]]:
    heldout = list(DEFAULT_HELDOUT) if heldout_domains is None else heldout_domains
    return split_tasks(seed, DOMAINS, heldout, n_train, n_test, _Generator().task, "domain")


def split_tasks(seed: int, known: Sequence[str], heldout: Sequence[str], n_train: int, n_test: int,
                make: Callable[[random.Random, str, str, str], Task], what: str) -> dict[str, list[Task]]:
    """Train and test tasks of a family whose `what`s (domains, scenarios) are `known`: training draws from the
    ones not held out; the test is IN_DOMAIN_SHARE of those (part "in_domain": `make` gives them the reserved
    template) and the rest from the held-out ones ("held_out_domain"). `make(rng, name, lang, part)` draws one."""
    if n_train < 0 or n_test < 0:
        raise ValueError(f"n_train and n_test must be >= 0, got {n_train} and {n_test}")
    heldout = list(dict.fromkeys(heldout))
    unknown = [d for d in heldout if d not in known]
    if unknown:
        raise ValueError(f"unknown held-out {what}(s): {', '.join(unknown)} (known: {', '.join(known)})")
    seen = [d for d in known if d not in heldout]
    if n_train and not seen:
        raise ValueError(f"every {what} is held out, so there is nothing to train on")
    n_held = 0 if not heldout else n_test if not seen else round(n_test * (1 - IN_DOMAIN_SHARE))

    rng = random.Random(seed)
    # Separate streams, so that changing n_train does not redraw the test tasks (their ids still
    # count on from the training ones).
    train_rng, test_rng = random.Random(rng.getrandbits(64)), random.Random(rng.getrandbits(64))
    train = [make(train_rng, d, lang, "train") for d, lang in _slots(seen, n_train)]
    test = [make(test_rng, d, lang, "in_domain") for d, lang in _slots(seen, n_test - n_held)]
    test += [make(test_rng, d, lang, "held_out_domain") for d, lang in _slots(heldout, n_held)]
    return {"train": train, "test": test}


def _slots(domains: list[str], n: int) -> list[tuple[str, str]]:
    """n (domain, language) pairs, cycling domains and alternating languages within each."""
    k = len(domains)
    return [(domains[i % k], LANGS[(i // k) % 2]) for i in range(n)]


class _Generator:
    def __init__(self):
        self.texts: set[str] = set()
        self.counters: dict[tuple[str, str], int] = {}

    def task(self, rng: random.Random, domain_name: str, lang: str, part: str) -> Task:
        dom = BY_NAME[domain_name]
        names = list(dom.TEMPLATES[lang])
        reserved = dom.RESERVED[lang]
        if part == "train":
            names.remove(reserved)
        elif part == "in_domain":
            names = [reserved]
        for _ in range(_MAX_TRIES):
            template = rng.choice(names)
            rec = Record(rng, lang, dom.FIELDS, dom.sample(rng, lang), dom.NEAR[lang])
            text = dom.TEMPLATES[lang][template](rec)
            if text not in self.texts:
                break
        else:
            raise RuntimeError(f"{domain_name}/{lang}: could not draw a new text")
        self.texts.add(text)
        n = self.counters.get((domain_name, lang), 0)
        self.counters[(domain_name, lang)] = n + 1
        schema, reference, field_constraints, hard, derived = _schema_and_gold(rng, dom, rec)
        meta = {"domain": domain_name, "lang": lang, "template": f"{domain_name}/{lang}/{template}",
                "part": part, "hard": hard}
        if derived:
            meta["derived_fields"] = derived
        return Task(
            id=f"{domain_name}-{lang}-{n:06d}",
            instruction=instruction(rng, lang, dom.TOPICS[lang]),
            text=text,
            schema=schema,
            constraints=tuple(constraints(rng, lang, field_constraints)),
            reference=reference,
            meta=meta,
        )


def _schema_and_gold(rng: random.Random, dom, rec: Record):
    fields = [f for f in dom.FIELDS if f.p_schema > 0 and f.key in rec.facts]
    chosen = [f for f in fields if rng.random() < f.p_schema]
    rest = [f for f in fields if f not in chosen]
    rng.shuffle(rest)
    chosen += rest[:max(0, MIN_FIELDS - len(chosen))]
    chosen.sort(key=fields.index)
    if rng.random() < 0.4:
        rng.shuffle(chosen)
    props, gold, cons, hard, derived = {}, {}, [], [], []
    for f in chosen:
        present = rec.rendered(f.key)
        # Fields that can be missing are mostly nullable even when present, so that a nullable type
        # says little about whether this text has the value.
        nullable = not present or rng.random() < (0.8 if f.p_absent > 0 or f.requires else 0.3)
        out = build(rng, f, rec.facts[f.key], rec.lang, present, nullable)
        if out.name in props:
            continue  # two fields drew the same synonym; the schema keeps the first
        props[out.name], gold[out.name] = out.schema, out.gold
        cons += out.constraints
        tags = list(out.tags) if present else []  # converting or reformatting a null is no hard case
        if f.key in rec.said_near:
            tags.append("near_mention")
        tags += [tag for other, tag in dom.DISTRACTORS.get(f.key, ()) if rec.rendered(other)]
        hard += [t for t in tags if t not in hard]
        if out.derived and present:
            derived.append(out.name)
    schema = {"type": "object", "properties": props, "required": list(props)}
    return schema, gold, cons, hard, derived
