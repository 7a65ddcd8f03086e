"""Task evaluation: rubric reward, format rates and gold field F1 per split part, with bootstrap CIs.

evaluate_responses scores given responses; evaluate_model generates them greedily first and
writes metrics.json, responses.jsonl and samples.md to an output folder (each atomically).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from rubricrl.atomic import write_json, write_jsonl, write_text
from rubricrl.evals.bootstrap import bootstrap_cis, micro_f1
from rubricrl.evals.generate import generate_with_stats
from rubricrl.metrics import field_counts
from rubricrl.rubric.parse import Shape, parse_response
from rubricrl.rubric.rules import invented_fields
from rubricrl.rubric.scoring import RubricScorer
from rubricrl.taskfile import Task

PART_ORDER = ("in_domain", "held_out_domain", "val", "train")
NO_PART = "unspecified"  # tasks whose meta has no "part"


def task_part(task: Task) -> str:
    part = task.meta.get("part")
    return str(part) if part else NO_PART


def _ordered_parts(parts: Sequence[str]) -> list[str]:
    present = set(parts)
    return [p for p in PART_ORDER if p in present] + sorted(present - set(PART_ORDER))


def evaluate_responses(tasks: Sequence[Task], responses: Sequence[str], scorer: RubricScorer,
                       n_boot: int = 1000, seed: int = 0) -> dict:
    """Metrics of `responses` (one per task, same order), overall and per part.

    Returns {"all": group, "parts": {part: group}, "samples": rows, "settings": {...}}, where a
    group holds: n; reward_mean and reward_ci (percentile bootstrap, 95%); components (mean score per
    rubric component; a penalty's score is the amount it took off); json_valid_rate (a JSON object
    was found, clean or embedded); clean_json_rate (the whole response is one object); extra_text_rate
    (any character outside the object, prose-only answers included); invented_rate (>= 1 value the
    source does not support, as rules.invented_fields / the invented_values penalty count them);
    gold: micro precision/recall/F1 over the part's tasks that have a reference (summed tp/fp/fn),
    f1_ci (tasks resampled), or None when no task has one.
    The bootstrap is seeded per group, so a group's CIs do not depend on which other parts exist.
    """
    tasks, responses = list(tasks), list(responses)
    if len(tasks) != len(responses):
        raise ValueError(f"{len(tasks)} tasks but {len(responses)} responses")
    results = scorer.score_batch(list(zip(tasks, responses)))
    comp_ids = [c.id for c in results[0].components] if results else []
    n = len(tasks)
    totals = np.array([r.total for r in results], dtype=float)
    comp_scores = {cid: np.array([r.component(cid).score for r in results], dtype=float) for cid in comp_ids}
    valid, clean, extra, invented = (np.zeros(n, dtype=float) for _ in range(4))
    counts = np.full((n, 3), np.nan)
    for i, (task, resp) in enumerate(zip(tasks, responses)):
        parsed = parse_response(resp)
        valid[i] = parsed.obj is not None
        clean[i] = parsed.shape == Shape.CLEAN
        extra[i] = parsed.extra_chars > 0
        if parsed.obj is not None:
            invented[i] = bool(invented_fields(scorer.context(task), parsed.obj))
        if task.reference is not None:
            fc = field_counts(task, resp)
            counts[i] = (fc.tp, fc.fp, fc.fn)
    parts = [task_part(t) for t in tasks]

    def group(idx: np.ndarray) -> dict:
        sub_counts = counts[idx]
        gold_rows = sub_counts[~np.isnan(sub_counts).any(axis=1)]
        cis = bootstrap_cis({"reward": totals[idx]}, sub_counts, n_boot, seed)
        out = {
            "n": int(len(idx)),
            "reward_mean": float(totals[idx].mean()),
            "reward_ci": cis["reward"],
            "components": {cid: float(comp_scores[cid][idx].mean()) for cid in comp_ids},
            "json_valid_rate": float(valid[idx].mean()),
            "clean_json_rate": float(clean[idx].mean()),
            "extra_text_rate": float(extra[idx].mean()),
            "invented_rate": float(invented[idx].mean()),
            "gold": None,
        }
        if len(gold_rows):
            tp, fp, fn = (float(x) for x in gold_rows.sum(axis=0))
            p = tp / (tp + fp) if tp + fp else 1.0
            r = tp / (tp + fn) if tp + fn else 1.0
            out["gold"] = {
                "n": int(len(gold_rows)), "tp": tp, "fp": fp, "fn": fn,
                "precision": p, "recall": r, "f1": float(micro_f1(tp, fp, fn)), "f1_ci": cis["f1"],
            }
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
            "components": {c.id: {"kind": c.kind, "score": c.score, "reason": c.reason} for c in results[i].components},
        }
        for i, t in enumerate(tasks)
    ]
    return metrics


def _cell(text: str, limit: int | None = None) -> str:
    text = str(text)
    if limit is not None and len(text) > limit:
        text = text[:limit] + "…"
    return (text.replace("\\", "\\\\").replace("\r", "\\r").replace("\n", "\\n").replace("|", "\\|"))


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


def samples_markdown(samples: list[dict], k: int = 20, response_chars: int = 200) -> str:
    rows = pick_samples(samples, k)
    comp_ids = list(rows[0]["components"]) if rows else []
    head = ["id", "part", "total", *comp_ids, "response"]
    lines = [
        f"# Sample outputs ({len(rows)} of {len(samples)})",
        "",
        "Each criterion cell: score — reason (a penalty's score is the amount taken off).",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "|".join("---" for _ in head) + "|",
    ]
    for row in rows:
        cells = [_cell(row["id"]), _cell(row["part"]), f"{row['total']:g}"]
        for cid in comp_ids:
            c = row["components"][cid]
            cells.append(_cell(f"{c['score']:g} — {c['reason']}"))
        cells.append(_cell(row["response"], response_chars))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def evaluate_model(model_dir: str | Path, tasks: Sequence[Task], scorer: RubricScorer, out_dir: str | Path,
                   batch_size: int = 8, max_new_tokens: int = 256, n_samples_table: int = 20,
                   n_boot: int = 1000, seed: int = 0) -> dict:
    """Generate greedily, evaluate, and write out_dir/{metrics.json, responses.jsonl, samples.md}.

    metrics.json holds the metrics without the per-response samples, plus "generation" (model_dir,
    token counts, seconds, tokens/s, truncated count); the returned dict has the samples as well.
    """
    tasks = list(tasks)
    out = Path(out_dir)
    responses, stats = generate_with_stats(model_dir, tasks, batch_size=batch_size, max_new_tokens=max_new_tokens)
    metrics = evaluate_responses(tasks, responses, scorer, n_boot=n_boot, seed=seed)
    metrics["generation"] = {"model_dir": str(model_dir), **stats.to_dict()}
    write_jsonl(out / "responses.jsonl",
                ({"id": s["id"], "part": s["part"], "response": s["response"], "total": s["total"]}
                 for s in metrics["samples"]))
    write_text(out / "samples.md", samples_markdown(metrics["samples"], n_samples_table))
    write_json(out / "metrics.json", {k: v for k, v in metrics.items() if k != "samples"})
    return metrics
