"""Task evaluation per split part: the rubric reward and format rates, and the strict true metric
(`rubricrl.metrics.strict`, no code shared with the reward) with bootstrap 95% intervals.

evaluate_responses scores given responses; evaluate_model generates them greedily first and
writes metrics.json, responses.jsonl and samples.md to an output folder (each atomically).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from rubricrl.core.atomic import output_set, write_json, write_jsonl, write_text
from rubricrl.metrics.bootstrap import ratio_ci
from rubricrl.core.resume import Journal
from rubricrl.inference.generate import generate_journaled, generate_with_stats
from rubricrl.metrics.strict import StrictCounts, summarize
from rubricrl.metrics.true_metric import scorable, true_counts_each
from rubricrl.reward.parse import Shape, parse_response
from rubricrl.reward.scoring import RubricScorer
from rubricrl.core.tables import table
from rubricrl.core.slices import stratified
from rubricrl.core.taskfile import Task

PART_ORDER = ("in_domain", "held_out_domain", "val", "train")
NO_PART = "unspecified"  # tasks whose meta has no "part"


def test_slice(tasks: Sequence[Task], max_per_part: int | None) -> list[Task]:
    """N tasks of each part, stratified by domain and language within the part (rubricrl.core.slices), so
    in-domain and held-out parts stay balanced and every domain is seen; in file order."""
    if max_per_part is None:
        return list(tasks)
    chosen = {id(t) for part in dict.fromkeys(t.meta.get("part", "all") for t in tasks)
              for t in stratified([t for t in tasks if t.meta.get("part", "all") == part], max_per_part)}
    return [t for t in tasks if id(t) in chosen]


def task_part(task: Task) -> str:
    part = task.meta.get("part")
    return str(part) if part else NO_PART


def _ordered_parts(parts: Sequence[str]) -> list[str]:
    present = set(parts)
    return [p for p in PART_ORDER if p in present] + sorted(present - set(PART_ORDER))


STRICT_ROW = ("right", "fields", "present", "present_right", "null_for_present", "absent", "invented", "exact",
              "parsed")


def strict_row(c: StrictCounts | None) -> dict:
    """Per-task strict counts as written to responses.jsonl (paired comparisons read them back)."""
    if c is None:
        return {}
    return {k: int(getattr(c, k)) for k in STRICT_ROW}


def evaluate_responses(tasks: Sequence[Task], responses: Sequence[str], scorer: RubricScorer,
                       n_boot: int = 1000, seed: int = 0, checklist_judge=None) -> dict:
    """Metrics of `responses` (one per task, same order), overall and per part.

    Returns {"all": group, "parts": {part: group}, "samples": rows, "settings": {...}}, where a
    group holds: n; reward_mean and reward_ci (percentile bootstrap over tasks, 95%); components (mean
    score per rubric component; a penalty's score is the amount it took off); json_valid_rate (a JSON
    object was found, clean or embedded); clean_json_rate (the whole response is one object);
    extra_text_rate (any character outside the object, prose-only answers included); strict: the true
    metric over the tasks that have a reference (field_accuracy, present_accuracy, exact_object_rate,
    null_for_present_rate, invented_rate, parsed_rate, n; rubricrl.metrics.strict) with
    field_accuracy_ci, or None when no task has one.
    The bootstrap is seeded per group, so a group's CIs do not depend on which other parts exist.
    `checklist_judge` (rubricrl.metrics.checklist_judge.ChecklistJudge, from scoring.checklist_judge): the judge
    panel that grades the free-text checklist's facts and guards; None: the checklist's procedure alone.
    """
    tasks, responses = list(tasks), list(responses)
    if len(tasks) != len(responses):
        raise ValueError(f"{len(tasks)} tasks but {len(responses)} responses")
    results = scorer.score_batch(list(zip(tasks, responses)))
    # A mixed batch (extraction and free text) has other components per kind: the union, each averaged over the
    # tasks it scored (None in a group without any).
    comp_ids = list(dict.fromkeys(c.id for r in results for c in r.components))
    n = len(tasks)
    totals = np.array([r.total for r in results], dtype=float)
    comp_scores = {cid: np.array([next((c.score for c in r.components if c.id == cid), np.nan) for r in results],
                                 dtype=float) for cid in comp_ids}
    valid, clean, extra = (np.zeros(n, dtype=float) for _ in range(3))
    gold = [i for i, task in enumerate(tasks) if scorable(task)]
    counts: list[StrictCounts | None] = [None] * n
    for i, c in zip(gold, true_counts_each([tasks[i] for i in gold], [responses[i] for i in gold], checklist_judge)):
        counts[i] = c
    for i, resp in enumerate(responses):
        parsed = parse_response(resp)
        valid[i] = parsed.obj is not None
        clean[i] = parsed.shape == Shape.CLEAN
        extra[i] = parsed.extra_chars > 0
    parts = [task_part(t) for t in tasks]

    def group(idx: np.ndarray) -> dict:
        out = {
            "n": int(len(idx)),
            "reward_mean": float(totals[idx].mean()),
            "reward_ci": ratio_ci(totals[idx], None, n_boot, seed),
            "components": {cid: _mean(comp_scores[cid][idx]) for cid in comp_ids},
            "json_valid_rate": float(valid[idx].mean()),
            "clean_json_rate": float(clean[idx].mean()),
            "extra_text_rate": float(extra[idx].mean()),
            "strict": None,
        }
        gold = [counts[i] for i in idx if counts[i] is not None]
        if gold:
            out["strict"] = {**summarize(gold), "field_accuracy_ci": ratio_ci(
                [c.right for c in gold], [c.fields for c in gold], n_boot, seed)}
        return out

    metrics: dict = {
        "all": group(np.arange(n)) if n else {"n": 0},
        "parts": {p: group(np.array([i for i in range(n) if parts[i] == p])) for p in _ordered_parts(parts)},
        "settings": {
            "rubric": scorer.rubric.name, "rubric_version": getattr(scorer.rubric, "version", None),
            "max_total": scorer.rubric.max_total, "n_boot": n_boot, "seed": seed, "ci_level": 0.95,
        },
    }
    metrics["samples"] = [
        {
            "id": t.id, "part": parts[i], "response": responses[i], "total": results[i].total,
            "strict": strict_row(counts[i]),
            "components": {c.id: {"kind": c.kind, "score": c.score, "reason": c.reason} for c in results[i].components},
        }
        for i, t in enumerate(tasks)
    ]
    return metrics


def _cell(text: str, limit: int | None = None) -> str:
    """A model's text for a table cell: line breaks shown as \\n (the table helper escapes the pipes)."""
    text = str(text)
    if limit is not None and len(text) > limit:
        text = text[:limit] + "…"
    return text.replace("\\", "\\\\").replace("\r", "\\r").replace("\n", "\\n")


def pick_samples(samples: list[dict], k: int) -> list[dict]:
    """Up to k rows, taken round-robin over the parts (input order within a part), so every part shows."""
    by_part: dict[str, list[dict]] = {}
    for row in samples:
        by_part.setdefault(row["part"], []).append(row)
    queues = [by_part[p] for p in _ordered_parts(list(by_part))]
    out, depth = [], 0
    while len(out) < k and any(depth < len(q) for q in queues):
        for q in queues:
            if depth < len(q) and len(out) < k:
                out.append(q[depth])
        depth += 1
    return out


def _mean(x: np.ndarray) -> float | None:
    x = x[~np.isnan(x)]
    return float(x.mean()) if len(x) else None


def samples_markdown(samples: list[dict], k: int = 20, response_chars: int = 200) -> str:
    rows = pick_samples(samples, k)
    comp_ids = list(dict.fromkeys(cid for row in rows for cid in row["components"]))

    def cell(row: dict, cid: str) -> str:
        c = row["components"].get(cid)
        return _cell(f"{c['score']:g} — {c['reason']}") if c else ""

    cells = [[_cell(row["id"]), _cell(row["part"]), f"{row['total']:g}"]
             + [cell(row, cid) for cid in comp_ids]
             + [_cell(row["response"], response_chars)] for row in rows]
    return "\n".join([f"# Sample outputs ({len(rows)} of {len(samples)})", "",
                      "Each criterion cell: score — reason (a penalty's score is the amount taken off).", "",
                      table(["id", "part", "total", *comp_ids, "response"], cells)]) + "\n"


def evaluate_model(model_dir: str | Path, tasks: Sequence[Task], scorer: RubricScorer, out_dir: str | Path,
                   batch_size: int = 8, max_new_tokens: int = 256, n_samples_table: int = 20,
                   n_boot: int = 1000, seed: int = 0, engine: str = "transformers", journal: Journal | None = None,
                   save_every: int = 32, checklist_judge=None) -> dict:
    """Generate greedily, evaluate, and write out_dir/{metrics.json, responses.jsonl, samples.md}.

    metrics.json holds the metrics without the per-response samples, plus "generation" (model_dir,
    token counts, seconds, tokens/s, truncated count); the returned dict has the samples as well. With a
    `journal`, answers are generated `save_every` tasks at a time and kept there (a rerun reads them back).
    `checklist_judge`: as evaluate_responses.
    """
    tasks = list(tasks)
    out = Path(out_dir)
    desc = f"eval {Path(model_dir).name}"
    if journal is None:
        responses, stats = generate_with_stats(model_dir, tasks, batch_size=batch_size, max_new_tokens=max_new_tokens,
                                               desc=desc, engine=engine)
    else:
        responses, stats = generate_journaled(model_dir, tasks, journal, save_every, batch_size=batch_size,
                                              max_new_tokens=max_new_tokens, desc=desc, engine=engine)
    metrics = evaluate_responses(tasks, responses, scorer, n_boot=n_boot, seed=seed, checklist_judge=checklist_judge)
    metrics["generation"] = {"model_dir": str(model_dir), **stats.to_dict()}
    with output_set(out, f"{out}: another run is writing here; waiting for it") as stage:
        write_jsonl(stage / "responses.jsonl",
                    ({"id": s["id"], "part": s["part"], "response": s["response"], "total": s["total"],
                      "strict": s["strict"]} for s in metrics["samples"]))
        write_text(stage / "samples.md", samples_markdown(metrics["samples"], n_samples_table))
        write_json(stage / "metrics.json", {k: v for k, v in metrics.items() if k != "samples"})
    return metrics
