"""DVC stage `eval_general`: base, SFT and GRPO on the general suites (instruction following, code, knowledge QA,
perplexity), paired differences vs base, and the general gate vs base (the flow retrains GRPO when it fails); its
report section is outputs/general/report.md. Each model's per-item rows are kept (outputs/general/<model>/): the
registry registers them with the model, and its promotion gates a challenger against the champion's rows."""

from __future__ import annotations

from pathlib import Path

from rubricrl import tracking
from rubricrl.config import GeneralParams, Params, load_params
from rubricrl.core.atomic import write_jsonl, write_text
from rubricrl.core.entry import stage_main
from rubricrl.core.resume import ResumeDir, model_digest, twins
from rubricrl.stages.base import Result
from rubricrl.stages.paths import EVAL_GENERAL as PATHS
from rubricrl.stages.paths import MODELS


class GeneralResult(Result):
    """metrics/general.json: each model's score per suite, the paired differences vs base, each model's gate."""

    models: dict[str, dict[str, dict]]
    paired: list[dict] = []
    gates: dict[str, dict] = {}
    gated: list[str] | None = None  # the models whose failed gate makes the flow retrain (general.gated)
    tolerance: dict[str, float] = {}
    generation: dict[str, dict | None] = {}  # per model: new tokens, seconds, tokens/s of its suites' replies
    # what another model's rows must share to be paired with these (general.run.rows_stamp): the registry compares
    # a challenger with a champion of an earlier run only on rows of the same stamp
    stamp: str = ""


def resume_stamp(cfg: GeneralParams, models: dict[str, str | Path]) -> tuple:
    """What eval_general's journaled replies are made of: the general settings and the engine they resolve to here,
    the suites' items by content and each model (weights, tokenizer, template)."""
    from rubricrl.inference.generate import resolve_engine

    return (cfg.model_dump(mode="json"), resolve_engine(cfg.engine), tracking.data_hashes([PATHS.suites]),
            {name: model_digest(d) for name, d in models.items()})


def run(params: Params) -> GeneralResult:
    from rubricrl.general.run import compare, evaluate, gate, gate_summary, generation_speed, markdown, rows_stamp

    cfg = params.general
    results = {}
    # Replies already generated for these settings, items and models are read back (a rerun after a kill).
    resume = ResumeDir("eval_general", *resume_stamp(cfg, MODELS))
    same = twins(MODELS)  # a model that is an earlier one (GRPO stopped on its SFT weights) reads its replies back
    with tracking.stage_run(params.tracking, "eval_general", {"general": cfg.model_dump()}) as run:
        for name, model_dir in MODELS.items():
            if same[name] != name:
                print(f"eval_general: {name} is the same model as {same[name]} (weights, tokenizer, template): its "
                      f"replies are {same[name]}'s, read back")
            results[name] = evaluate(model_dir, cfg, desc=f"general {name}",
                                     journals=lambda suite, twin=same[name]: resume.journal(f"{twin}-{suite}"))
            for suite in results[name]:
                write_jsonl(Path(PATHS.rows(name)) / f"{suite}.jsonl", results[name][suite]["items"])
                run.log_metrics({f"{name}.{suite}.{k}": v for k, v in results[name][suite]["summary"].items()
                                 if isinstance(v, (int, float))})
        paired = compare(results, n_boot=cfg.n_boot)
        gates = gate(paired, cfg.tolerance, [m for m in MODELS if m != "base"])  # registry tags use every one
        speed = {m: generation_speed(r) for m, r in results.items()}
        lines = [f"- {m}: {g['new_tokens']} reply tokens in {g['seconds']:.1f} s ({g['tokens_per_s']:.1f} tokens/s)"
                 for m, g in speed.items() if g]
        write_text(PATHS.section, markdown(results, paired, gates, cfg.tolerance).rstrip("\n") + "\n\n"
                   + ("Decoding:\n\n" + "\n".join(lines) + "\n" if lines else ""))
        result = GeneralResult(
            models={m: {s: {"score": r[s]["score"], **r[s]["summary"]} for s in r} for m, r in results.items()},
            paired=paired, gates=gates, gated=cfg.gated, tolerance=cfg.tolerance, generation=speed,
            stamp=rows_stamp(cfg))
        result.write(PATHS.result)
        run.log_metrics({f"paired.{r['model']}-base.{r['suite']}": r["diff"] for r in paired})
        run.set_tags({f"gate.{m}": g["outcome"] for m, g in gates.items()})
        run.log_artifact(PATHS.section, "general")
        for m, g in gates.items():
            print(f"eval_general: {m}: general gate {gate_summary(g)}")
        print(f"eval_general: {PATHS.section}")
    resume.clear()
    return result


def main() -> None:
    """The stage: tasks/eval_general.py (dvc.yaml's command) and `python -m` run it under stage_main."""
    run(load_params())


if __name__ == "__main__":
    stage_main(main)
