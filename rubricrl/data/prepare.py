"""The data stage's logic: generated or user tasks -> validated train/test splits and their stats."""

from __future__ import annotations

import random
from collections import Counter

from rubricrl.config import DataParams
from rubricrl.core.errors import ConfigError
from rubricrl.core.taskfile import FREE_TEXT, Task, load_tasks

PARTS = ("in_domain", "held_out_domain")


def prepare_splits(params: DataParams) -> dict[str, list[Task]]:
    """train / val / test; val is a seeded sample of the training pool, never trained on."""
    try:
        if params.source == "generate":
            splits = generate_family(params)
        else:
            splits = split_user_tasks(load_tasks(params.tasks_file), params.test_fraction, params.seed)
        out = {**carve_validation(splits["train"], params.n_val, params.seed), "test": splits["test"]}
    except ValueError as err:  # sizes or domain names the generator or split cannot honour
        raise ConfigError(f"params: data: {err}") from None
    unscored = [f"{t.id} ({name})" for name in ("val", "test") for t in out[name]
                if t.kind == FREE_TEXT and not isinstance(t.meta.get("checklist"), dict)]
    if unscored:  # calibration, the hack monitor and the eval score these by the checklist alone
        raise ConfigError(f"{params.tasks_file}: meta.checklist: missing in {len(unscored)} free-text task(s) that "
                          f"land in val or test, e.g. {', '.join(unscored[:3])}: the true metric of a free-text task is "
                          f"its held-out checklist (README, Free text), written apart from its items")
    return out


def generate_family(params: DataParams) -> dict[str, list[Task]]:
    """The generated train (with validation) and test tasks of data.task_family; mixed: each family gives half of
    every split (extraction the larger half of an odd count), extraction tasks first."""
    from rubricrl.data.generate import generate_dataset
    from rubricrl.data.replies import generate_replies

    n_train, n_test = params.n_train + params.n_val, params.n_test
    family = params.task_family
    share = {"extraction": (1.0, 0.0), "free_text": (0.0, 1.0), "mixed": (0.5, 0.5)}[family]
    sizes = [(round(n_train * w + 0.01), round(n_test * w + 0.01)) for w in share]  # + 0.01: a half rounds up
    if family == "mixed":
        sizes[1] = (n_train - sizes[0][0], n_test - sizes[0][1])
    parts = []
    if sizes[0] != (0, 0):
        parts.append(generate_dataset(seed=params.seed, n_train=sizes[0][0], n_test=sizes[0][1],
                                      heldout_domains=params.heldout_domains))
    if sizes[1] != (0, 0):
        parts.append(generate_replies(seed=params.seed, n_train=sizes[1][0], n_test=sizes[1][1],
                                      heldout=params.heldout_scenarios))
    if family == "mixed" and any(not p[s] for p in parts for s in ("train", "test")):
        raise ValueError(f"task_family mixed: n_train {params.n_train} + n_val {params.n_val} and n_test "
                         f"{params.n_test} must each be at least 2 (a task of each family)")
    return {s: [t for p in parts for t in p[s]] for s in ("train", "test")}


def carve_validation(pool: list[Task], n_val: int, seed: int) -> dict[str, list[Task]]:
    if n_val >= len(pool):
        raise ValueError(f"n_val={n_val} leaves no training tasks out of {len(pool)}")
    kinds = sorted({t.kind for t in pool})
    if len(kinds) == 1:
        picked = set(random.Random(f"val:{seed}").sample(range(len(pool)), n_val))
    else:  # mixed: each kind gives val its share of the pool (largest remainders), so calibration sees both
        by_kind = {k: [i for i, t in enumerate(pool) if t.kind == k] for k in kinds}
        exact = {k: n_val * len(ix) / len(pool) for k, ix in by_kind.items()}
        take = {k: int(x) for k, x in exact.items()}
        for k in sorted(kinds, key=lambda k: take[k] - exact[k])[:n_val - sum(take.values())]:
            take[k] += 1
        picked = {i for k in kinds for i in random.Random(f"val:{seed}:{k}").sample(by_kind[k], take[k])}
    train = [t for i, t in enumerate(pool) if i not in picked]
    val = [_with_part(t, "val") for i, t in enumerate(pool) if i in picked]
    return {"train": train, "val": val}


def split_user_tasks(tasks: list[Task], test_fraction: float, seed: int) -> dict[str, list[Task]]:
    """Honour meta.part when the user set it; otherwise a seeded random split (test is in_domain)."""
    if any("part" in t.meta for t in tasks):
        train = [t for t in tasks if t.meta.get("part", "train") == "train"]
        test = [t for t in tasks if t.meta.get("part", "train") != "train"]
    else:
        order = list(range(len(tasks)))
        random.Random(seed).shuffle(order)
        n_test = max(1, round(len(tasks) * test_fraction))
        test_idx = set(order[:n_test])
        train = [t for i, t in enumerate(tasks) if i not in test_idx]
        test = [_with_part(t, "in_domain") for i, t in enumerate(tasks) if i in test_idx]
    if not train or not test:
        raise ValueError(f"the split left {len(train)} train and {len(test)} test tasks; both must be non-empty")
    return {"train": train, "test": test}


def _with_part(task: Task, part: str) -> Task:
    return Task.from_dict({**task.to_dict(), "meta": {**task.meta, "part": part}})


def split_stats(splits: dict[str, list[Task]]) -> dict:
    """Counts a person checks first: sizes, parts, domains, languages, hard cases, gold nulls."""
    stats: dict = {}
    for name, tasks in splits.items():
        n = len(tasks)
        with_null = sum(1 for t in tasks if isinstance(t.reference, dict) and any(v is None for v in t.reference.values()))
        hard = sum(1 for t in tasks if t.meta.get("hard"))
        stats[name] = {
            "n": n,
            "with_reference": sum(t.reference is not None for t in tasks),
            "share_hard": round(hard / n, 4),
            "share_gold_null": round(with_null / n, 4),
            "distinct_schemas": len({tuple(sorted(t.properties)) for t in tasks if t.schema is not None}),
            "kinds": dict(sorted(Counter(t.kind for t in tasks).items())),
            "parts": dict(sorted(Counter(t.meta.get("part", "unknown") for t in tasks).items())),
            "domains": dict(sorted(Counter(t.meta.get("domain", "unknown") for t in tasks).items())),
            "langs": dict(sorted(Counter(t.meta.get("lang", "unknown") for t in tasks).items())),
        }
    return stats
