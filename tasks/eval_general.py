"""DVC stage `eval_general`: base, SFT and GRPO on the general suites (instruction following, code, knowledge QA,
perplexity), paired differences vs base, and the general gate (the flow retrains GRPO when it fails)."""

from pathlib import Path

from rubricrl import tracking
from rubricrl.atomic import write_json, write_jsonl, write_text
from rubricrl.cli_support import stage_main
from rubricrl.config import load_params

MODELS = {"base": "outputs/models/base", "sft": "outputs/models/sft", "grpo": "outputs/grpo/model"}
OUT, METRICS = Path("outputs/general"), "metrics/general.json"


def main() -> None:
    from rubricrl.general.run import SUITES, compare, evaluate, gate, markdown

    params = load_params()
    cfg = params.general
    results = {}
    with tracking.stage_run(params.tracking, "eval_general", {"general": cfg.model_dump()}) as run:
        for name, model_dir in MODELS.items():
            results[name] = evaluate(model_dir, cfg, desc=f"general {name}")
            for suite in SUITES:
                write_jsonl(OUT / name / f"{suite}.jsonl", results[name][suite]["items"])
                run.log_metrics({f"{name}.{suite}.{k}": v for k, v in results[name][suite]["summary"].items()
                                 if isinstance(v, (int, float))})
        paired = compare(results, n_boot=cfg.n_boot)
        gates = gate(paired, cfg.tolerance, [m for m in MODELS if m != "base"])  # registry tags use every one
        write_text(OUT / "report.md", markdown(results, paired, gates, cfg.tolerance))
        write_json(METRICS, {
            "models": {m: {s: {"score": r[s]["score"], **r[s]["summary"]} for s in SUITES} for m, r in results.items()},
            "paired": paired, "gates": gates, "gated": cfg.gated, "tolerance": cfg.tolerance})
        run.log_metrics({f"paired.{r['model']}-base.{r['suite']}": r["diff"] for r in paired})
        run.set_tags({f"gate.{m}": "passed" if g["passed"] else "failed" for m, g in gates.items()})
        run.log_artifact(OUT / "report.md", "general")
        for m, g in gates.items():
            print(f"eval_general: {m}: general gate " + ("passed" if g["passed"] else "FAILED: " + "; ".join(g["failures"])))
        print(f"eval_general: {OUT / 'report.md'}")


if __name__ == "__main__":
    stage_main(main)
