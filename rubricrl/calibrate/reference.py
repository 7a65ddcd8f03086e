"""The hand-written reference set of free text: does the reward (and the checklist, the true metric) hold on tasks
the generator never wrote?

`rubricrl/data/reference/free_text/*.yaml`, one scenario a file, written by hand in businesses the embedded
generator (rubricrl/data/replies.py) does not know, in English and Chinese: a task in the public task format (its
rubric items and checklist written as a user would, validated like any task file) and its replies, each with a
`kind`: `good` (several, in different styles) or a failure kind (FAILURE_KINDS: hedged, conditional,
counterfactual, retracted, quoted_policy, unlisted_refusal, partial_grant, wrong_remedy, wrong_customer,
wrong_amount, padded, bullets, stuffed, negated, grader, mixed_language). The labels are an ordering of pairs:
every good reply of a scenario above every other reply of it.

`measure` scores every reply with the reward and the checklist and reports, per metric, the share of those pairs
it orders (a tie is not ordered), the good replies the reward scores 0, per failure kind the worst reward margin
below a good reply of its task, and how correlated the two metrics' errors are (phi of "the reward misorders this
pair" against "the checklist does": two readings whose errors coincide check nothing of each other). The rubric
stage puts it in its report and its gate (rubric.reference_min_reward, rubric.reference_min_checklist).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from rubricrl.core.errors import ConfigError, TaskFileError
from rubricrl.core.taskfile import Task, check_task_row
from rubricrl.core.yamlfile import locate, read_mapping
from rubricrl.metrics.bootstrap import ratio_ci
from rubricrl.metrics.checklist import check

REFERENCE_DIR = Path(__file__).resolve().parents[1] / "data" / "reference" / "free_text"
# Scenarios written after the readers were tuned on REFERENCE_DIR, by someone who had not read them, and never tuned
# on since: what the figures are worth on text nobody fitted them to. Reported, never gated (a bar tuned against
# would make it a second development set).
HELDOUT_DIR = REFERENCE_DIR.parent / "free_text_heldout"
GOOD = "good"
FAILURE_KINDS = ("hedged", "conditional", "counterfactual", "retracted", "quoted_policy", "unlisted_refusal",
                 "partial_grant", "wrong_remedy", "wrong_customer", "wrong_amount", "padded", "bullets", "stuffed",
                 "negated", "grader", "mixed_language")


@dataclass(frozen=True)
class Reply:
    id: str
    kind: str  # good, or one of FAILURE_KINDS
    text: str
    where: str  # file:line


@dataclass(frozen=True)
class Scenario:
    path: str
    task: Task
    replies: tuple[Reply, ...]


def _problems(path: Path, data: dict, root) -> list[str]:
    def at(*loc) -> str:
        line, _ = locate(root, loc)
        return f"{path}:{line or 1}"

    problems = [f"{at(k)}: {k}: unknown key (allowed: task, replies)" for k in sorted(set(data) - {"task", "replies"},
                                                                                          key=str)]
    problems += [f"{path}:1: {k}: missing" for k in ("task", "replies") if k not in data]
    task = data.get("task")
    if task is not None:
        for p in check_task_row(task, at("task")):
            key = p.split(": ", 2)[1].split(".")[0].split("[")[0] if p.count(": ") >= 2 else ""
            line, depth = locate(root, ("task", key))
            problems.append(p.replace(at("task"), f"{path}:{line}", 1) if depth == 2 else p)
        if isinstance(task, dict) and not isinstance((task.get("meta") or {}).get("checklist"), dict):
            problems.append(f"{at('task', 'meta')}: task.meta.checklist: missing (the reference set measures the "
                            "checklist too)")
        if isinstance(task, dict) and "items" not in task:
            problems.append(f"{at('task')}: task.items: missing (a reference task is a free-text task)")
    replies = data.get("replies")
    if replies is not None and not isinstance(replies, list):
        problems.append(f"{at('replies')}: replies: must be a list of {{id, kind, text}}")
        replies = []
    seen, kinds = set(), set()
    for i, r in enumerate(replies or ()):
        where = at("replies", i)
        if not isinstance(r, dict) or set(r) != {"id", "kind", "text"}:
            problems.append(f"{where}: replies[{i}]: must have exactly id, kind and text")
            continue
        if not isinstance(r["id"], str) or not r["id"] or r["id"] in seen:
            problems.append(f"{where}: replies[{i}].id: must be a unique non-empty string, got {r['id']!r}")
        seen.add(r["id"])
        if r["kind"] != GOOD and r["kind"] not in FAILURE_KINDS:
            problems.append(f"{where}: replies[{i}].kind: {r['kind']!r} is not good nor a failure kind "
                            f"({', '.join(FAILURE_KINDS)})")
        kinds.add(r["kind"])
        if not isinstance(r["text"], str) or not r["text"].strip():
            problems.append(f"{where}: replies[{i}].text: must be a non-empty string")
    if replies is not None and (GOOD not in kinds or not kinds - {GOOD}):
        problems.append(f"{at('replies')}: replies: need at least one good reply and one failure (the pairs)")
    return problems


def load_reference(folder: str | Path = REFERENCE_DIR) -> list[Scenario]:
    """Every scenario of the folder; TaskFileError listing every problem (file:line: key: what) otherwise."""
    folder = Path(folder)
    files = sorted(folder.glob("*.yaml"))
    if not files:
        raise ConfigError(f"{folder}: no reference scenarios (*.yaml)")
    out, problems = [], []
    for path in files:
        data, root = read_mapping(path, "reference scenario")
        found = _problems(path, data, root)
        if found:
            problems += found
            continue
        replies = tuple(Reply(r["id"], r["kind"], r["text"], f"{path}:{locate(root, ('replies', i))[0]}")
                        for i, r in enumerate(data["replies"]))
        out.append(Scenario(str(path), Task.from_dict(data["task"]), replies))
    if problems:
        raise TaskFileError(problems)
    return out


def _phi(a: list[bool], b: list[bool]) -> float | None:
    """Pearson's correlation of two 0/1 series (phi); None when either is constant."""
    n = len(a)
    pa, pb = sum(a) / n, sum(b) / n
    if pa in (0, 1) or pb in (0, 1):
        return None
    both = sum(x and y for x, y in zip(a, b)) / n
    return round((both - pa * pb) / math.sqrt(pa * (1 - pa) * pb * (1 - pb)), 4)


def measure(scenarios: list[Scenario], scorer, min_margin: float) -> dict:
    """Both metrics on every reply, and the pair figures of the module doc."""
    pairs = [(s.task, r.text) for s in scenarios for r in s.replies]
    rewards = iter(res.total for res in scorer.score_batch(pairs))
    rows = []  # (scenario, reply, reward, checklist)
    for s in scenarios:
        for r in s.replies:
            rows.append((s, r, next(rewards), check(s.task, r.text).score))
    kinds: dict[str, dict] = {}
    reward_wrong, checklist_wrong, misordered = [], [], []
    per_scenario = []  # (pairs, reward ordered, checklist ordered): the intervals resample scenarios, not pairs
    for s in scenarios:
        start = len(reward_wrong)
        mine = [row for row in rows if row[0] is s]
        for _, g, rg, cg in (row for row in mine if row[1].kind == GOOD):
            for _, b, rb, cb in (row for row in mine if row[1].kind != GOOD):
                k = kinds.setdefault(b.kind, {"pairs": 0, "reward_ordered": 0, "checklist_ordered": 0,
                                              "worst_margin": math.inf, "under_margin": 0})
                k["pairs"] += 1
                k["reward_ordered"] += rg > rb
                k["checklist_ordered"] += cg > cb
                k["worst_margin"] = min(k["worst_margin"], rg - rb)
                k["under_margin"] += rg - rb < min_margin
                reward_wrong.append(not rg > rb)
                checklist_wrong.append(not cg > cb)
                if not rg > rb or not cg > cb:
                    misordered.append({"task": s.task.id, "good": g.id, "other": b.id, "kind": b.kind,
                                       "reward": [round(rg, 3), round(rb, 3)],
                                       "checklist": [round(cg, 3), round(cb, 3)]})
        mine_r, mine_c = reward_wrong[start:], checklist_wrong[start:]
        per_scenario.append((len(mine_r), len(mine_r) - sum(mine_r), len(mine_c) - sum(mine_c)))
    n = len(reward_wrong)
    for k in kinds.values():
        k["reward_accuracy"] = round(k.pop("reward_ordered") / k["pairs"], 4)
        k["checklist_accuracy"] = round(k.pop("checklist_ordered") / k["pairs"], 4)
        k["worst_margin"] = round(k["worst_margin"], 3)
    both = sum(a and b for a, b in zip(reward_wrong, checklist_wrong))
    langs = sorted({s.task.meta.get("lang", "en") for s in scenarios})
    return {
        "n_scenarios": len(scenarios), "languages": langs, "n_replies": len(rows), "n_pairs": n,
        "reward_pair_accuracy": round(1 - sum(reward_wrong) / n, 4) if n else None,
        "checklist_pair_accuracy": round(1 - sum(checklist_wrong) / n, 4) if n else None,
        # 95% intervals over scenarios (pairs of one scenario stand or fall together)
        "reward_pair_interval": _interval([r for _, r, _ in per_scenario], [p for p, _, _ in per_scenario]),
        "checklist_pair_interval": _interval([c for _, _, c in per_scenario], [p for p, _, _ in per_scenario]),
        "good_scored_zero": [f"{s.task.id}/{r.id}" for s, r, rv, _ in rows if r.kind == GOOD and rv <= 0],
        "min_margin": min_margin,
        "kinds_under_margin": sorted(k for k, row in kinds.items() if row["under_margin"]),
        "errors": {"reward_only": sum(a and not b for a, b in zip(reward_wrong, checklist_wrong)),
                   "checklist_only": sum(b and not a for a, b in zip(reward_wrong, checklist_wrong)),
                   "both": both, "phi": _phi(reward_wrong, checklist_wrong) if n else None},
        "kinds": dict(sorted(kinds.items())),
        "misordered": misordered,
        "replies": [{"task": s.task.id, "reply": r.id, "kind": r.kind, "reward": round(rv, 3),
                     "checklist": round(cv, 4)} for s, r, rv, cv in rows],
    }


def _interval(ordered: list[int], pairs: list[int]) -> list[float] | None:
    ci = ratio_ci(ordered, pairs, n_boot=2000, seed=0) if sum(pairs) else None
    return [round(x, 4) for x in ci] if ci else None


def reference_failures(report: dict, bars) -> list[str]:
    """The gate's reasons from a `measure` report: `bars` is the rubric params section."""
    fails = []
    if report["reward_pair_accuracy"] < bars.reference_min_reward:
        fails.append(f"reference set: the reward orders {report['reward_pair_accuracy']:.1%} of the hand-written "
                     f"pairs, under rubric.reference_min_reward={bars.reference_min_reward}")
    if report["checklist_pair_accuracy"] < bars.reference_min_checklist:
        fails.append(f"reference set: the checklist orders {report['checklist_pair_accuracy']:.1%} of the "
                     f"hand-written pairs, under rubric.reference_min_checklist={bars.reference_min_checklist}")
    if report["good_scored_zero"]:
        fails.append(f"reference set: {len(report['good_scored_zero'])} good replies score 0 "
                     f"({', '.join(report['good_scored_zero'][:4])})")
    if report.get("kinds_under_margin"):  # every failure kind below every good reply of its task by the margin
        under = sum(report["kinds"][k]["under_margin"] for k in report["kinds_under_margin"])
        fails.append(f"reference set: {under} pairs of {', '.join(report['kinds_under_margin'])} score less than "
                     f"rubric.min_margin={report['min_margin']} below a good reply")
    return fails
