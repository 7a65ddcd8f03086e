"""The general suites on one model, paired comparisons against the base model, and the general gate.

Each suite gives a per-item score (higher is better) so two models that answered the same items compare
by paired difference (rubricrl.metrics.paired: score interval and sign-flip permutation p):
- ifeval: 1 when every instruction of the prompt is followed (prompt-level strict accuracy);
- humaneval: 1 when the completion passes the problem's tests in the sandbox (greedy pass@1);
- qa: 1 when an accepted answer appears in the reply (accuracy);
- perplexity: minus the paragraph's summed negative log-likelihood over its token count, so the paired
  difference is base nll - model nll in nats per token (token-weighted); negative when the model got worse.
The gate (rubricrl.metrics.decide): per suite, non-inferiority of the model against a reference (here base; the
registry's promotion pairs a candidate's rows with the champion's the same way, rubricrl.release.registry) on the
paired difference's 95% interval with margin general.tolerance[suite]: pass when the lower bound is >= -tolerance, fail
when the upper bound is below it, inconclusive when the interval straddles it; a suite where both models score
at the floor (or ceiling) is uninformative. The model's gate fails when a suite fails, is inconclusive when
any suite cannot tell, and passes only when every suite passes. A suite sized 0 (general.sizes) is not run.
Nothing here shares code with the rubric reward or the task metric.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Callable

from rubricrl.core.resume import Journal
from rubricrl.core.tables import table
from rubricrl.metrics.decide import combine, decide
from rubricrl.metrics.paired import paired_difference
from rubricrl.general import code, ifeval, perplexity, qa
from rubricrl.inference.batching import cpu_batch

GENERATION = {"ifeval": ifeval, "humaneval": code, "qa": qa}
SUITES = (*GENERATION, "perplexity")
HEADLINE = {"ifeval": "prompt_strict", "humaneval": "pass@1", "qa": "accuracy", "perplexity": "perplexity"}
BOUNDS = {"ifeval": (0.0, 1.0), "humaneval": (0.0, 1.0), "qa": (0.0, 1.0), "perplexity": (None, None)}
DATA = Path(__file__).resolve().parent / "data"  # the project-written suites' items (package data)


def active_suites(cfg) -> list[str]:
    """The suites this configuration runs (general.sizes: 0 leaves a suite out)."""
    return [s for s in SUITES if getattr(cfg.sizes, s) != 0]


def rows_stamp(cfg) -> str:
    """What two models' per-item rows must share to be paired item by item, also across runs (the registry pairs a
    challenger's with a champion registered earlier): the suites' items by content, each suite's reply budget, the
    perplexity window, the code timeout and the engine that decodes. Not the sizes: rows pair on the items both
    answered (a fixed prefix of each suite)."""
    from rubricrl.inference.generate import resolve_engine

    h = hashlib.sha256()
    for f in sorted(p for p in DATA.rglob("*") if p.is_file()):
        h.update(f.relative_to(DATA).as_posix().encode() + b"\0" + hashlib.md5(f.read_bytes()).digest())
    h.update(json.dumps({"max_new_tokens": dict(cfg.max_new_tokens), "perplexity_max_tokens": cfg.perplexity_max_tokens,
                         "code_timeout_s": cfg.code_timeout_s, "engine": resolve_engine(cfg.engine)},
                        sort_keys=True).encode())
    return h.hexdigest()[:16]


def evaluate(model_dir: str | Path, cfg, desc: str = "", model_and_tokenizer=None,
             journals: Callable[[str], Journal] | None = None) -> dict:
    """{suite: {"summary": {...}, "score": headline number, "items": [per-item rows]}} for one model.

    cfg: GeneralParams. Greedy replies to each prompt as a single user turn, through the model's chat template.
    `journals(suite)`: a journal that keeps the suite's replies, generated cfg.save_every items at a time (a rerun
    after a kill reads them back; rubricrl.core.resume). Scoring and perplexity are redone (seconds)."""
    from rubricrl.inference import llamacpp
    from rubricrl.inference.generate import default_threads, greedy_chat, load_for_generation, resolve_engine

    model, tokenizer = model_and_tokenizer or load_for_generation(model_dir)
    out = {}
    for suite, module in GENERATION.items():
        if suite not in active_suites(cfg):
            continue
        items = module.load(getattr(cfg.sizes, suite))
        limit = cfg.max_new_tokens[suite]
        chats = [[{"role": "user", "content": it["prompt"]}] for it in items]

        def reply(chats: list[list[dict]], label: str) -> tuple[list[str], dict]:
            """Replies and their decoding: {"new_tokens", "seconds"}."""
            if resolve_engine(cfg.engine) == "llama_cpp" and model_and_tokenizer is None:
                replies, new_tokens, _, seconds = llamacpp.generate_chat(model_dir, chats, limit, default_threads(),
                                                                         desc=label, batch=cpu_batch(cfg.batch_size, 8))
                return replies, {"new_tokens": new_tokens, "seconds": round(seconds, 3)}
            stats = {"new_tokens": 0, "seconds": 0.0}
            replies = greedy_chat(model, tokenizer, chats, batch_size=cfg.batch_size, max_new_tokens=limit,
                                  desc=label, stats=stats)
            return replies, {"new_tokens": stats["new_tokens"], "seconds": round(stats["seconds"], 3)}

        def chunk(ix: list[int]) -> list[dict]:
            """A journal chunk: its replies, its decoding on the first row (read back with it after a kill, as the
            eval's chunks keep theirs), so a resumed run reports what an uninterrupted one does."""
            replies, stats = reply([chats[i] for i in ix], f"{label} ({ix[0] + 1}-{ix[-1] + 1} of {len(items)})")
            rows = [{"id": items[i]["id"], "response": r} for i, r in zip(ix, replies)]
            rows[0]["chunk"] = stats
            return rows

        label = f"{desc} {suite}".strip()
        if journals is None:
            replies, speed = reply(chats, label)
        else:
            journal = journals(suite)
            got = journal.map([it["id"] for it in items], chunk, cfg.save_every)
            replies = [r["response"] for r in got]
            chunks = [r["chunk"] for r in got if "chunk" in r]
            speed = {"new_tokens": sum(c["new_tokens"] for c in chunks),
                     "seconds": round(sum(c["seconds"] for c in chunks), 3)}
            if journal.read_back:
                print(f"{label}: {journal.read_back} of {len(items)} replies read back from {journal.path} "
                      "(generated before an interruption)", file=sys.stderr)
        scored = [module.score(it, r, timeout_s=cfg.code_timeout_s, limits=cfg.sandbox) if suite == "humaneval"
                  else module.score(it, r) for it, r in zip(items, replies)]
        rows = [{"id": it["id"], "lang": it.get("lang"), "response": r, **s} for it, r, s in zip(items, replies, scored)]
        summary = module.summarize(scored)
        out[suite] = {"summary": summary, "score": summary[HEADLINE[suite]], "items": rows, "generation": speed}
    if "perplexity" not in active_suites(cfg):
        return out
    items = perplexity.load(cfg.sizes.perplexity)
    rows = perplexity.nll(model, tokenizer, items, max_tokens=cfg.perplexity_max_tokens,
                          batch_size=cpu_batch(cfg.batch_size, 8))
    summary = perplexity.summarize(rows)
    out["perplexity"] = {"summary": summary, "score": summary["perplexity"],
                         "items": [{**r, "score": -r["nll"]} for r in rows]}
    return out


def generation_speed(results: dict) -> dict | None:
    """One model's decoding over its suites: new tokens, seconds, tokens/s (None when nothing was generated)."""
    gens = [r["generation"] for r in results.values() if r.get("generation")]
    tokens, seconds = sum(g["new_tokens"] for g in gens), sum(g["seconds"] for g in gens)
    if not tokens or seconds <= 0:
        return None
    return {"new_tokens": tokens, "seconds": round(seconds, 2), "tokens_per_s": round(tokens / seconds, 1)}


def _paired_arrays(suite: str, a: list[dict], b: list[dict]):
    """Numerators of model a and b and the shared denominators, paired by item id."""
    bb = {r["id"]: r for r in b}
    pairs = [(r, bb[r["id"]]) for r in a if r["id"] in bb]
    if suite == "perplexity":  # token-weighted: sum(-nll * tokens) / sum(tokens); both models share the tokenizer
        return ([-x["nll"] * x["tokens"] for x, _ in pairs], [-y["nll"] * y["tokens"] for _, y in pairs],
                [x["tokens"] for x, _ in pairs])
    return [x["score"] for x, _ in pairs], [y["score"] for _, y in pairs], None


def compare(results: dict[str, dict], base: str = "base", n_boot: int = 1000) -> list[dict]:
    """Each model against `base`, per suite: {"model", "suite", "diff", "ci", "p", "n", "a", "b"}."""
    rows = []
    for model, suites in results.items():
        if model == base:
            continue
        for suite in [s for s in SUITES if s in suites and s in results[base]]:
            a, b, den = _paired_arrays(suite, suites[suite]["items"], results[base][suite]["items"])
            low, high = BOUNDS[suite]
            rows.append({"model": model, "suite": suite,
                         **paired_difference(a, b, den, bounds=None if low is None else (low, high),
                                             n_resamples=n_boot)})
    return rows


def gate(paired: list[dict], tolerance: dict[str, float], gated: list[str]) -> dict[str, dict]:
    """{model: {"outcome", "passed", "failures", "decisions": {suite: Decision dict}}} for the gated models:
    non-inferiority vs base per suite with margin tolerance[suite] (module doc). "failures" lists the suites that
    failed (a drop shown beyond the margin: the flow retrains on those), "passed" is true only when every suite
    passed (an inconclusive gate promotes nothing)."""
    out = {}
    for model in gated:
        rows = [r for r in paired if r["model"] == model]
        if not rows:
            continue
        decisions = {r["suite"]: decide(r, "noninferiority", tolerance[r["suite"]],
                                        floor=BOUNDS[r["suite"]][0], ceiling=BOUNDS[r["suite"]][1]) for r in rows}
        outcome = combine([d.outcome for d in decisions.values()])
        out[model] = {"outcome": outcome, "passed": outcome == "pass",
                      "failures": [f"{s}: {d.line}" for s, d in decisions.items() if d.outcome == "fail"],
                      "decisions": {s: d.to_dict() for s, d in decisions.items()}}
    return out


def gate_summary(g: dict) -> str:
    """One line per gate: its outcome and each suite that did not pass."""
    rest = [f"{s}: {d['line']}" for s, d in (g.get("decisions") or {}).items() if d["outcome"] != "pass"]
    return g["outcome"] + (": " + "; ".join(rest) if rest else "")


def markdown(results: dict[str, dict], paired: list[dict], gates: dict[str, dict], tolerance: dict) -> str:
    """The general suites' report (eval_general's report section, and the student's in distill)."""
    models = list(results)
    suites = [s for s in SUITES if s in results[models[0]]]
    decisions = {(m, s): d for m, g in gates.items() for s, d in (g.get("decisions") or {}).items()}
    sandbox = results[models[0]].get("humaneval", {}).get("summary", {}).get("sandbox")  # its mechanisms on this host
    lines = ["# General capability: " + " / ".join(models), "",
             "Per suite (n items): ifeval = prompt-level strict accuracy, humaneval = greedy pass@1, qa = accuracy, "
             "perplexity on held-out text (lower is better)."
             + (f" Not run (general.sizes 0): {', '.join(s for s in SUITES if s not in suites)}." if len(suites) < len(SUITES) else ""),
             "", table(["suite", "n"] + models, [[suite, results[models[0]][suite]["summary"]["n"]]
                                                  + [results[m][suite]["score"] for m in models] for suite in suites]),
             *(["", f"humaneval sandbox: {sandbox}."] if sandbox else []),
             "", "## Paired differences vs base: non-inferiority on the 95% score interval", "",
             "Pass: the interval's lower bound is >= -margin (a one-sided 97.5% bound) and the suite is powered; "
             "fail: its upper bound is below -margin; inconclusive: it straddles the margin, or n is too small for "
             "the margin (power: the chance an equal model passes, at least 0.80 to pass); uninformative: both "
             "models at the metric's floor or ceiling. MDE: how far above -margin a true difference must lie to "
             "pass 80% of the time. perplexity row: base nll - model nll (nats/token); negative = "
             "the model got worse.", "",
             table(["model", "suite", "outcome", "difference [95% CI], p; n, MDE", "margin"],
                   [[r["model"], r["suite"], (decisions.get((r["model"], r["suite"])) or {}).get("outcome", "-"),
                     (decisions.get((r["model"], r["suite"])) or {}).get("line", "").split(": ", 1)[-1].split("; non-")[0]
                     or str(r.get("diff")), f"-{tolerance[r['suite']]:g}"] for r in paired]),
             "", "## Gate", "",
             "Against base: the flow's retrain trigger (general.gated), and the promotion gate where there is no "
             "champion. The registry gates a candidate against the champion's answers to these items, paired the "
             "same way, whenever the champion's were registered with it (the promotion report names the reference).",
             ""]
    for model, g in gates.items():
        outcome = g.get("outcome") or ("pass" if g["passed"] else "fail")
        lines.append(f"- {model}: **{outcome}**" + (f" ({'; '.join(g['failures'])})" if g["failures"] else ""))
    return "\n".join(lines) + "\n"
