"""The general suites on one model, paired comparisons against the base model, and the general gate.

Each suite gives a per-item score (higher is better) so two models that answered the same items compare
by paired difference (rubricrl.metrics.paired: bootstrap CI and sign-flip permutation p):
- ifeval: 1 when every instruction of the prompt is followed (prompt-level strict accuracy);
- humaneval: 1 when the completion passes the problem's tests in the sandbox (greedy pass@1);
- qa: 1 when an accepted answer appears in the reply (accuracy);
- perplexity: minus the paragraph's summed negative log-likelihood over its token count, so the paired
  difference is base nll - model nll in nats per token (token-weighted); negative when the model got worse.
The gate: a model fails when any suite's paired difference (model - base) is below -general.tolerance[suite].
Nothing here shares code with the rubric reward or the task metric.
"""

from __future__ import annotations

from pathlib import Path

from rubricrl.core.tables import table
from rubricrl.metrics.paired import describe, paired_difference
from rubricrl.general import code, ifeval, perplexity, qa

GENERATION = {"ifeval": ifeval, "humaneval": code, "qa": qa}
SUITES = (*GENERATION, "perplexity")
HEADLINE = {"ifeval": "prompt_strict", "humaneval": "pass@1", "qa": "accuracy", "perplexity": "perplexity"}


def evaluate(model_dir: str | Path, cfg, desc: str = "", model_and_tokenizer=None) -> dict:
    """{suite: {"summary": {...}, "score": headline number, "items": [per-item rows]}} for one model.

    cfg: GeneralParams. Greedy replies to each prompt as a single user turn, through the model's chat template."""
    from rubricrl.inference import llamacpp
    from rubricrl.inference.generate import default_threads, greedy_chat, load_for_generation

    model, tokenizer = model_and_tokenizer or load_for_generation(model_dir)
    out = {}
    for suite, module in GENERATION.items():
        items = module.load(getattr(cfg.sizes, suite))
        limit = cfg.max_new_tokens[suite]
        chats = [[{"role": "user", "content": it["prompt"]}] for it in items]
        if cfg.engine == "llama_cpp" and model_and_tokenizer is None:
            replies = llamacpp.generate_chat(model_dir, chats, limit, default_threads(), desc=f"{desc} {suite}".strip())[0]
        else:
            replies = greedy_chat(model, tokenizer, chats, batch_size=cfg.batch_size, max_new_tokens=limit,
                                  desc=f"{desc} {suite}".strip())
        scored = [module.score(it, r, timeout_s=cfg.code_timeout_s) if suite == "humaneval" else module.score(it, r)
                  for it, r in zip(items, replies)]
        rows = [{"id": it["id"], "lang": it.get("lang"), "response": r, **s} for it, r, s in zip(items, replies, scored)]
        summary = module.summarize(scored)
        out[suite] = {"summary": summary, "score": summary[HEADLINE[suite]], "items": rows}
    items = perplexity.load(cfg.sizes.perplexity)
    rows = perplexity.nll(model, tokenizer, items, max_tokens=cfg.perplexity_max_tokens, batch_size=cfg.batch_size)
    summary = perplexity.summarize(rows)
    out["perplexity"] = {"summary": summary, "score": summary["perplexity"],
                         "items": [{**r, "score": -r["nll"]} for r in rows]}
    return out


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
        for suite in SUITES:
            a, b, den = _paired_arrays(suite, suites[suite]["items"], results[base][suite]["items"])
            rows.append({"model": model, "suite": suite,
                         **paired_difference(a, b, den, n_resamples=n_boot)})
    return rows


def gate(paired: list[dict], tolerance: dict[str, float], gated: list[str]) -> dict[str, dict]:
    """{model: {"passed", "failures": ["qa: -0.250 [-0.44, -0.06] below -0.10", ...]}} for the gated models."""
    out = {}
    for model in gated:
        rows = [r for r in paired if r["model"] == model]
        if not rows:
            continue
        failures = [f"{r['suite']}: {describe(r)} is a drop beyond the tolerance {tolerance[r['suite']]:g}"
                    for r in rows if r["diff"] is not None and r["diff"] < -tolerance[r["suite"]]]
        out[model] = {"passed": not failures, "failures": failures}
    return out


def markdown(results: dict[str, dict], paired: list[dict], gates: dict[str, dict], tolerance: dict) -> str:
    """The general suites' report (eval_general's report section, and the student's in distill)."""
    models = list(results)
    lines = ["# General capability: " + " / ".join(models), "",
             "Per suite (n items): ifeval = prompt-level strict accuracy, humaneval = greedy pass@1, qa = accuracy, "
             "perplexity on held-out text (lower is better).", "",
             table(["suite", "n"] + models, [[suite, results[models[0]][suite]["summary"]["n"]]
                                             + [results[m][suite]["score"] for m in models] for suite in SUITES]),
             "", "## Paired differences vs base (95% bootstrap CI, permutation p)", "",
             "perplexity row: base nll - model nll (nats/token); negative = the model got worse.", "",
             table(["model", "suite", "difference", "tolerance", "within"],
                   [[r["model"], r["suite"], describe(r), f"-{tolerance[r['suite']]:g}",
                     "yes" if r["diff"] is None or r["diff"] >= -tolerance[r["suite"]] else "**no**"] for r in paired]),
             "", "## Gate", ""]
    for model, g in gates.items():
        lines.append(f"- {model}: " + ("passed" if g["passed"] else "**failed**: " + "; ".join(g["failures"])))
    return "\n".join(lines) + "\n"
