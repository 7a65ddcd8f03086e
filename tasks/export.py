"""DVC stage `export`: GGUF Q8_0 and Q4_K_M of the GRPO policy, each reloaded and scored on test tasks
(retention vs the policy's own eval answers), tokens/s vs HF fp32, and a llama_cpp.server + openai serve check."""

import json
from pathlib import Path

from rubricrl import tracking
from rubricrl.atomic import write_json, write_text
from rubricrl.cli_support import stage_main
from rubricrl.config import load_params
from rubricrl.rubric.scoring import RubricScorer
from rubricrl.rubric.spec import load_rubric
from rubricrl.taskfile import load_tasks

SOURCES = {"grpo": "outputs/grpo/model"}
OUT, METRICS = Path("outputs/export"), "metrics/export.json"


def source_numbers(name: str, ids: list[str]) -> dict:
    """The source model's strict field accuracy and reward on these tasks, from its eval_task answers."""
    rows = {r["id"]: r for r in map(json.loads, Path(f"outputs/eval/{name}/responses.jsonl").read_text(
        encoding="utf-8").splitlines()) if r["id"] in ids}
    fields = sum(rows[i]["strict"]["fields"] for i in ids)
    return {"field_accuracy": sum(rows[i]["strict"]["right"] for i in ids) / fields if fields else None,
            "reward": sum(rows[i]["total"] for i in ids) / len(ids)}


def markdown(results: dict) -> str:
    lines = ["# Exports", "", "Each artifact reloaded and scored on the same test tasks as its source; retention = "
             "artifact / source. tokens/s: one prompt at a time, the same prompts, side by side in one run.", "",
             "| source | artifact | size MB | field acc | retention | reward | tokens/s | vs HF fp32 | goal met |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        src = r["source"]
        lines.append(f"| {name} | HF fp32 (source) | {r['source_size_mb']} | {src['field_accuracy']:.3f} | 1 | "
                     f"{src['reward']:.2f} | {r['hf_tokens_per_s']:.1f} | 1.00x | |")
        for kind, a in r["artifacts"].items():
            if not a.get("verified"):
                lines.append(f"| {name} | {kind} | | | | | | | **verification failed**: {a.get('error')} |")
                continue
            lines.append(f"| {name} | {kind} | {a['size_mb']} | {a['field_accuracy']:.3f} | "
                         f"{a['retention']['field_accuracy']} | {a['reward']:.2f} | {a['tokens_per_s']:.1f} | "
                         f"{a['tokens_per_s'] / r['hf_tokens_per_s']:.2f}x | {'yes' if a['meets_goal'] else 'no'} |")
        if r.get("serve"):
            s = r["serve"]
            lines += ["", f"Serve check ({name}, Q4_K_M via llama_cpp.server + openai client): task {s['task']}, "
                          f"reward {s['reward']:.2f}, field accuracy {s['field_accuracy']:.3f}, {s['seconds']} s.", "",
                      "```json", s["answer"][:800], "```"]
    return "\n".join(lines) + "\n"


def main() -> None:
    from rubricrl.evals.generate import default_threads
    from rubricrl.evals.llamacpp import gguf_for
    from rubricrl.export import (ExportError, quantize, retention, serve_check, tokens_per_s_gguf, tokens_per_s_hf,
                                 verify_gguf)
    from rubricrl.evals.task_eval import test_slice

    params = load_params()
    cfg = params.export
    tasks = test_slice(load_tasks("data/test.jsonl"), params.eval.max_per_part)[:cfg.n_tasks]
    speed = tasks[:cfg.speed_tasks]
    scorer = RubricScorer(load_rubric("outputs/rubric/rubric.yaml"), judge_override=params.scoring.judge_config(),
                          policy_model=params.policy.model)
    threads = default_threads()
    results = {}
    with tracking.stage_run(params.tracking, "export", {"export": cfg.model_dump()}) as run:
        for name in cfg.sources:
            model_dir = SOURCES[name]
            source = source_numbers(name, [t.id for t in tasks])
            f16 = gguf_for(model_dir, "f16")
            r = {"source": source, "source_size_mb": round(sum(p.stat().st_size for p in Path(model_dir).glob(
                "*.safetensors")) / 2**20, 1), "hf_tokens_per_s": tokens_per_s_hf(model_dir, speed, cfg.speed_tokens,
                                                                                  threads), "artifacts": {}}
            for kind in cfg.gguf:
                path = quantize(f16, OUT / name / f"model-{kind}.gguf", kind, threads)
                try:
                    a = verify_gguf(path, model_dir, tasks, scorer, cfg.max_new_tokens, threads)
                except ExportError as err:
                    r["artifacts"][kind] = {"artifact": str(path), "verified": False, "error": str(err)}
                    continue
                a["retention"] = retention(a, source)
                kept = a["retention"]["field_accuracy"]
                a["meets_goal"] = kept is not None and kept >= cfg.goals[kind]
                a["tokens_per_s"] = tokens_per_s_gguf(path, model_dir, speed, cfg.speed_tokens, threads)
                a["verified"] = a["meets_goal"] or not cfg.gate_on_retention
                r["artifacts"][kind] = a
                run.log_metrics({f"{name}.{kind}.{k}": a[k] for k in ("size_mb", "field_accuracy", "reward",
                                                                       "tokens_per_s")}
                                | {f"{name}.{kind}.retention": kept})
            if cfg.serve_check and "q4_k_m" in r["artifacts"] and r["artifacts"]["q4_k_m"].get("size_mb"):
                r["serve"] = serve_check(OUT / name / "model-q4_k_m.gguf", tasks[0], scorer)
            results[name] = r
        write_text(OUT / "report.md", markdown(results))
        write_json(METRICS, {name: {**{k: v for k, v in r.items() if k != "artifacts"},
                                    "artifacts": {k: {x: y for x, y in a.items() if x != "rows"}
                                                  for k, a in r["artifacts"].items()}} for name, r in results.items()})
        run.log_artifacts(OUT, "export")  # the report and the quantized files themselves
        print(f"export: {OUT / 'report.md'}")


if __name__ == "__main__":
    stage_main(main)
