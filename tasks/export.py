"""DVC stage `export`: GGUF Q8_0 and Q4_K_M and GPTQ 4-bit of the GRPO policy and the distilled student, each
reloaded and scored on test tasks (retention vs the source's own answers: the eval's for the policy, the distill
stage's for the student), tokens/s vs HF fp32, and a llama_cpp.server + openai serve check."""

import json
from pathlib import Path

from rubricrl import tracking
from rubricrl.atomic import write_json, write_text
from rubricrl.cli_support import stage_main
from rubricrl.config import load_params
from rubricrl.errors import RubricRLError
from rubricrl.rubric.scoring import RubricScorer
from rubricrl.rubric.spec import load_rubric
from rubricrl.taskfile import load_tasks

# source -> (model folder, its greedy answers to the test slice in the eval's row format)
SOURCES = {"grpo": ("outputs/grpo/model", "outputs/eval/grpo/responses.jsonl"),
           "student": ("outputs/distill/student", "outputs/distill/responses.jsonl")}
OUT, METRICS = Path("outputs/export"), "metrics/export.json"


def source_numbers(responses: str, ids: list[str]) -> dict:
    """The source model's strict field accuracy and reward on these tasks, from the answers its stage wrote."""
    rows = {r["id"]: r for r in map(json.loads, Path(responses).read_text(
        encoding="utf-8").splitlines()) if r["id"] in ids}
    missing = [i for i in ids if i not in rows]
    if missing:
        raise RubricRLError(f"{responses}: no answers for test task(s) {', '.join(missing[:5])}: "
                            "export.n_tasks exceeds the tasks its stage answered")
    fields = sum(rows[i]["strict"]["fields"] for i in ids)
    return {"field_accuracy": sum(rows[i]["strict"]["right"] for i in ids) / fields if fields else None,
            "reward": sum(rows[i]["total"] for i in ids) / len(ids)}


def markdown(results: dict, cfg) -> str:
    lines = ["# Exports", "", "Each artifact reloaded and scored on the same test tasks as its source; retention = "
             "artifact / source. tokens/s: one prompt at a time, the same prompts, side by side in one run. "
             f"GGUF: llama.cpp; GPTQ: {cfg.gptq.bits}-bit, group size {cfg.gptq.group_size}, GPTQModel (HF generate).",
             "",
             "| source | artifact | size MB | field acc | retention | reward | tokens/s | vs HF fp32 | goal met |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        src = r["source"]
        lines.append(f"| {name} | HF fp32 (source) | {r['source_size_mb']} | {src['field_accuracy']:.3f} | 1 | "
                     f"{src['reward']:.2f} | {r['hf_tokens_per_s']:.1f} | 1.00x | |")
        for kind, a in r["artifacts"].items():
            if "error" in a:
                lines.append(f"| {name} | {kind} | | | | | | | **verification failed**: {a['error']} |")
                continue
            lines.append(f"| {name} | {kind} | {a['size_mb']} | {a['field_accuracy']:.3f} | "
                         f"{a['retention']['field_accuracy']} | {a['reward']:.2f} | {a['tokens_per_s']:.1f} | "
                         f"{a['tokens_per_s'] / r['hf_tokens_per_s']:.2f}x | {'yes' if a['meets_goal'] else 'no'} |")
    for name, r in results.items():
        if r.get("serve"):
            s = r["serve"]
            lines += ["", f"Serve check ({name}, Q4_K_M via llama_cpp.server + openai client): task {s['task']}, "
                          f"reward {s['reward']:.2f}, field accuracy {s['field_accuracy']:.3f}, {s['seconds']} s.", "",
                      "```json", s["answer"][:800], "```"]
    return "\n".join(lines) + "\n"


def calibration_texts(model_dir: str, n: int) -> list[str]:
    """GPTQ calibration: the first n training prompts with their gold answers, as the model's chat template
    renders them (the distribution the quantized model will serve)."""
    from transformers import AutoTokenizer

    from rubricrl.evals.generate import chat_texts
    from rubricrl.prompt import task_messages

    tasks = [t for t in load_tasks("data/train.jsonl") if t.reference is not None][:n]
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    return chat_texts(tokenizer, [task_messages(t) + [{"role": "assistant", "content": json.dumps(
        t.reference, ensure_ascii=False)}] for t in tasks])


def main() -> None:
    from rubricrl.evals.generate import default_threads
    from rubricrl.evals.llamacpp import gguf_for
    from rubricrl.export import (ExportError, gptq_group_check, gptq_quantize, quantize, retention, serve_check,
                                 tokens_per_s_gguf, tokens_per_s_hf, verify_gguf, verify_gptq)
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
        for name, kinds in ((n, k) for n, k in cfg.artifacts.items() if k):
            model_dir, responses = SOURCES[name]
            source = source_numbers(responses, [t.id for t in tasks])
            if "gptq" in kinds:
                gptq_group_check(model_dir, cfg.gptq.group_size)  # a setting error: fail the stage, name the key
            r = {"source": source, "source_size_mb": round(sum(p.stat().st_size for p in Path(model_dir).glob(
                "*.safetensors")) / 2**20, 1), "hf_tokens_per_s": tokens_per_s_hf(model_dir, speed, cfg.speed_tokens,
                                                                                  threads), "artifacts": {}}

            def verified(kind: str, path: Path, make) -> None:
                """Make and verify one artifact; a failure is recorded with its message (it blocks promotion)."""
                try:
                    a = make()
                except ExportError as err:
                    r["artifacts"][kind] = {"artifact": str(path), "verified": False, "error": str(err)}
                    return
                a["retention"] = retention(a, source)
                kept = a["retention"]["field_accuracy"]
                goal = cfg.goals.get(kind)
                a["meets_goal"] = goal is None or (kept is not None and kept >= goal)
                a["verified"] = a["meets_goal"] or not cfg.gate_on_retention
                r["artifacts"][kind] = a
                run.log_metrics({f"{name}.{kind}.{k}": a[k] for k in ("size_mb", "field_accuracy", "reward",
                                                                       "tokens_per_s")}
                                | {f"{name}.{kind}.retention": kept})

            def gguf(kind: str, path: Path) -> dict:
                quantize(gguf_for(model_dir, "f16"), path, kind, threads)
                a = verify_gguf(path, model_dir, tasks, scorer, cfg.max_new_tokens, threads)
                return a | {"tokens_per_s": tokens_per_s_gguf(path, model_dir, speed, cfg.speed_tokens, threads)}

            def gptq(path: Path) -> dict:
                gptq_quantize(model_dir, path, calibration_texts(model_dir, cfg.gptq.calibration), cfg.gptq.bits,
                              cfg.gptq.group_size)
                return verify_gptq(path, tasks, scorer, cfg.max_new_tokens, threads, speed, cfg.speed_tokens,
                                   batch_size=params.eval.batch_size)

            for kind in kinds:
                if kind == "gptq":
                    verified(kind, OUT / name / "gptq", lambda: gptq(OUT / name / "gptq"))
                else:
                    path = OUT / name / f"model-{kind}.gguf"
                    verified(kind, path, lambda: gguf(kind, path))
            if cfg.serve_check and "q4_k_m" in r["artifacts"] and r["artifacts"]["q4_k_m"].get("size_mb"):
                r["serve"] = serve_check(OUT / name / "model-q4_k_m.gguf", tasks[0], scorer)
            results[name] = r
        write_text(OUT / "report.md", markdown(results, cfg))
        write_json(METRICS, {name: {**{k: v for k, v in r.items() if k != "artifacts"},
                                    "artifacts": {k: {x: y for x, y in a.items() if x != "rows"}
                                                  for k, a in r["artifacts"].items()}} for name, r in results.items()})
        run.log_artifacts(OUT, "export")  # the report and the quantized files themselves
        print(f"export: {OUT / 'report.md'}")


if __name__ == "__main__":
    stage_main(main)
