"""DVC stage `export`: GGUF Q8_0, the smallest 4-bit GGUF type that keeps the source's answers (`q4`: every type of
export.four_bit tried, its fallback tensors named) and GPTQ 4-bit of the GRPO policy and the distilled student, each
reloaded and scored on test tasks (retention vs the source's own answers: the eval's for the policy, the distill
stage's for the student), tokens/s vs HF fp32, and a llama_cpp.server + openai serve check. A rerun after a kill
puts back each artifact verified before it (hard links kept in .cache/resume/export, checked against their md5)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from pydantic import RootModel

from rubricrl import tracking
from rubricrl.config import EvalParams, ExportParams, Params, ScoringParams, load_params
from rubricrl.core.atomic import write_json, write_text
from rubricrl.core.entry import stage_main
from rubricrl.core.errors import RubricRLError
from rubricrl.core.jsonio import read_jsonl
from rubricrl.core.resume import ResumeDir, file_digest, model_digest, tasks_digest
from rubricrl.core.tables import table
from rubricrl.core.taskfile import load_tasks
from rubricrl.inference.batching import cpu_batch
from rubricrl.reward.load import load_rubric
from rubricrl.reward.scoring import RubricScorer
from rubricrl.stages.paths import DATA, RUBRIC
from rubricrl.stages.paths import EXPORT as PATHS
from rubricrl.stages.paths import EXPORT_SOURCES as SOURCES

OUT = Path(PATHS.out)


class ExportResult(RootModel[dict[str, dict]]):
    """metrics/export.json: per source model its numbers (source, source_size_mb, hf_tokens_per_s, serve) and its
    artifacts (q8_0, q4_k_m, gptq: size, field accuracy, reward, retention, tokens/s, verified or error)."""

    @classmethod
    def read(cls, path: str | Path) -> "ExportResult":
        return cls.model_validate(json.loads(Path(path).read_text(encoding="utf-8")))


def source_numbers(responses: str, tasks: list) -> dict:
    """The source model's strict field accuracy, valid-JSON rate and reward on these tasks (and per-task rows, as
    rubricrl.release.export.strict_and_reward gives them), from the answers its stage wrote."""
    from rubricrl.metrics.strict import parse_answer
    from rubricrl.release.export import rates

    rows = {r["id"]: r for r in read_jsonl(responses) if r["id"] in {t.id for t in tasks}}
    missing = [t.id for t in tasks if t.id not in rows]
    if missing:
        raise RubricRLError(f"{responses}: no answers for test task(s) {', '.join(missing[:5])}: "
                            "export.n_tasks exceeds the tasks its stage answered")
    per_task = [{"id": t.id, "part": str(t.meta.get("part") or "all"), "right": rows[t.id]["strict"]["right"],
                 "fields": rows[t.id]["strict"]["fields"],
                 "json": parse_answer(rows[t.id]["response"]) is not None if t.schema is not None else None}
                for t in tasks]
    return {**rates(per_task), "reward": sum(rows[t.id]["total"] for t in tasks) / len(tasks), "rows": per_task}


def markdown(results: dict, cfg) -> str:
    rows = []
    for name, r in results.items():
        src = r["source"]
        rows.append([name, "HF fp32 (source)", str(r["source_size_mb"]), f"{src['field_accuracy']:.3f}", "1",
                     f"{src['reward']:.2f}", f"{r['hf_tokens_per_s']:.1f}", "1.00x", ""])
        for kind, a in r["artifacts"].items():
            if a.get("kept") is False:
                rows.append([name, kind, "", "", "", "", "", "", f"**none kept**: {a['error']}"])
                continue
            if "error" in a:
                rows.append([name, kind, "", "", "", "", "", "", f"**verification failed**: {a['error']}"])
                continue
            rows.append([name, f"{kind} ({a['type']})" if a.get("type") else kind, str(a["size_mb"]),
                         f"{a['field_accuracy']:.3f}", str(a["retention"]["field_accuracy"]),
                         f"{a['reward']:.2f}", f"{a['tokens_per_s']:.1f}",
                         f"{a['tokens_per_s'] / r['hf_tokens_per_s']:.2f}x", "yes" if a["meets_goal"] else "no"])
    lines = ["# Exports", "", "Each artifact reloaded and scored on the same test tasks as its source; retention = "
             "artifact / source. tokens/s: one prompt at a time, the same prompts, side by side in one run. "
             f"GGUF: llama.cpp; GPTQ: {cfg.gptq.bits}-bit, group size {cfg.gptq.group_size}, GPTQModel (HF generate).",
             "", table(["source", "artifact", "size MB", "field acc", "retention", "reward", "tokens/s", "vs HF fp32",
                        "goal met"], rows, limit=400)]
    for name, r in results.items():
        lines += four_bit_markdown(name, r, cfg)
    for name, r in results.items():
        if r.get("serve"):
            s = r["serve"]
            lines += ["", f"Serve check ({name}, {s.get('kind', 'q4_k_m')} via llama_cpp.server + openai client): "
                          f"task {s['task']}, "
                          f"reward {s['reward']:.2f}, field accuracy {s['field_accuracy']:.3f}, {s['seconds']} s.", "",
                      "```json" if s["answer"].lstrip().startswith("{") else "```text", s["answer"][:800], "```"]
    return "\n".join(lines) + "\n"


def _fmt(x, spec: str = ".3f") -> str:
    return "-" if x is None else format(x, spec)


def four_bit_markdown(name: str, r: dict, cfg) -> list[str]:
    """The q4 selection of one source: every type tried (size, bits per weight, fallback tensors, field accuracy and
    valid JSON with their retention, per test part) and which was registered; the fallback tensors named."""
    a = r["artifacts"].get("q4")
    if not a or not a.get("tries"):
        return []
    src = r["source"]
    wider = a.get("against") or {}
    rows, notes = [], []
    for t in a["tries"]:
        ret, parts = t.get("retention") or {}, t.get("parts") or {}
        rows.append([t["type"], str(t.get("n") or "-"), str(t["size_mb"]), _fmt(t.get("bits_per_weight"), ".2f"),
                     f"{t['fallback']} of {t['tensors']}", _fmt(t.get("field_accuracy")), _fmt(t.get("valid_json")),
                     _fmt(ret.get("field_accuracy")), _fmt(ret.get("valid_json")),
                     "; ".join(f"{p} {_fmt(v['retention'].get('field_accuracy'))} / "
                               f"{_fmt(v['retention'].get('valid_json'))}" for p, v in parts.items()) or "-",
                     t["outcome"]])
        if t["fallback"]:
            notes.append(f"- {t['type']}: {t['fallback']} of {t['tensors']} tensors have rows that its blocks do not "
                         "divide, stored as " + ", ".join(f"`{f['name']}` {f['stored']} x{f['count']}"
                                                          for f in t["fallback_tensors"]))
    chosen = (f"registered: **{a['type']}** (`{name}-q4`), the smallest that kept it" if a.get("type")
              else "registered: **none** (no type kept it; promotion is not blocked)")
    return ["", f"## 4-bit: the smallest type that keeps {cfg.four_bit.retain:g} of the source ({name})", "",
            f"The source on these {len(src.get('rows') or []) or cfg.n_tasks} tasks: field accuracy "
            f"{_fmt(src.get('field_accuracy'))}, valid JSON {_fmt(src.get('valid_json'))}. Each type quantized from "
            f"the F16 GGUF, then reloaded and scored smallest file first until one keeps {cfg.four_bit.retain:g} of "
            f"both" + (f" (a try at or above {cfg.four_bit.screen:g} of the source on these tasks is scored on "
                       f"{cfg.four_bit.confirm_tasks} and decided there)" if cfg.four_bit.confirm_tasks else "")
            + f"; {chosen}." + (f" The source on the {wider['n']} tasks it was decided on: field accuracy "
                                f"{_fmt(wider.get('field_accuracy'))}, valid JSON {_fmt(wider.get('valid_json'))}."
                                if wider.get("n") and wider["n"] != len(src.get("rows") or []) else ""), "",
            table(["type", "tasks", "MB", "bits/weight", "fallback tensors", "field acc", "valid JSON", "retention field",
                   "retention JSON", "per part (field / JSON)", "outcome"], rows, limit=400),
            *([""] + notes if notes else [])]


def calibration_texts(model_dir: str, n: int) -> list[str]:
    """GPTQ calibration: the first n training prompts with their gold answers, as the model's chat template
    renders them (the distribution the quantized model will serve)."""
    from transformers import AutoTokenizer

    from rubricrl.inference.generate import chat_texts
    from rubricrl.core.prompt import gold_completion, task_messages

    tasks = [t for t in load_tasks(DATA.train) if t.reference is not None][:n]
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    return chat_texts(tokenizer, [task_messages(t) + [{"role": "assistant", "content": gold_completion(t)}]
                                  for t in tasks])


def resume_stamp(cfg: ExportParams, eval_cfg: EvalParams, scoring: ScoringParams, tasks: list,
                 sources: dict[str, tuple]) -> tuple:
    """What export's kept artifacts and their records are made of: the export settings, the eval's (its test slice
    and batch) and the scoring (the judge and the rubric file) they were verified under, the tasks by content, and
    per source its model (weights, tokenizer, template) and the answers its retention is measured against, so a
    record's retention is never restored beside a source recomputed under other settings. The train split: GPTQ
    calibrates on its first tasks."""
    return (cfg.model_dump(mode="json"), eval_cfg.model_dump(mode="json"), scoring.model_dump(mode="json"),
            file_digest(RUBRIC.rubric), tasks_digest(tasks), file_digest(DATA.train),
            {n: [model_digest(model_dir), file_digest(responses)] for n, (model_dir, responses) in sources.items()})


def run(params: Params) -> ExportResult:
    from rubricrl.inference.generate import default_threads
    from rubricrl.inference.conversion import gguf_for
    from rubricrl.release.export import (ExportError, NoneKept, gptq_group_check, gptq_quantize, quantize, retention,
                                         select_quantization, serve_check, tensor_types, tokens_per_s_gguf,
                                         tokens_per_s_hf, verify_gguf, verify_gptq)
    from rubricrl.evaluate.task import test_slice
    from rubricrl.core.slices import stratified

    cfg = params.export
    tasks = stratified(test_slice(load_tasks(DATA.test), params.eval.max_per_part), cfg.n_tasks)
    speed = tasks[:cfg.speed_tasks]
    scorer = RubricScorer(load_rubric(RUBRIC.rubric), judge_override=params.scoring.judge_config(),
                          policy_model=params.policy.model)
    threads = default_threads()
    results = {}
    active = {n: k for n, k in cfg.artifacts.items() if k}
    # Artifacts made and verified before a kill (of the same resume_stamp only) are kept in the
    # resume folder with their records and put back instead of being made again (rubricrl.core.resume).
    resume = ResumeDir("export", *resume_stamp(cfg, params.eval, params.scoring, tasks,
                                                {n: SOURCES[n] for n in active}))
    done = resume.journal("artifacts")
    with tracking.stage_run(params.tracking, "export", {"export": cfg.model_dump()}) as run:
        for name, kinds in active.items():
            model_dir, responses = SOURCES[name]
            source = source_numbers(responses, tasks)
            if "gptq" in kinds:
                gptq_group_check(model_dir, cfg.gptq.group_size)  # a setting error: fail the stage, name the key
            if f"{name}/hf" not in done.rows:  # timed once: a rerun keeps the measurement
                done.add([{"id": f"{name}/hf", "tokens_per_s": tokens_per_s_hf(model_dir, speed, cfg.speed_tokens,
                                                                              threads)}])
            r = {"source": source, "source_size_mb": round(sum(p.stat().st_size for p in Path(model_dir).glob(
                "*.safetensors")) / 2**20, 1), "hf_tokens_per_s": done.rows[f"{name}/hf"]["tokens_per_s"],
                "artifacts": {}}

            def verified(kind: str, path: Path, make) -> None:
                """Make and verify one artifact; a failure is recorded with its message (it blocks promotion). A
                4-bit selection that no type survived (NoneKept) is recorded with its tries and blocks nothing:
                the source simply has no 4-bit export."""
                copy = resume.folder("kept") / path.relative_to(OUT)
                record = done.rows.get(f"{name}/{kind}")
                if record and record["record"].get("kept") is False:
                    r["artifacts"][kind] = record["record"]
                    return
                if record and restore(copy, path, record["record"].get("md5")):
                    a = record["record"]
                else:
                    try:
                        a = make()
                    except NoneKept as err:
                        r["artifacts"][kind] = {"artifact": None, "verified": False, "kept": False,
                                                "error": str(err), "tries": err.tries}
                        done.add([{"id": f"{name}/{kind}", "record": r["artifacts"][kind]}])
                        return
                    except ExportError as err:
                        r["artifacts"][kind] = {"artifact": str(path), "verified": False, "error": str(err)}
                        return
                    a["md5"] = tracking.artifact_md5(path)  # the bytes verified: the registry publishes only these
                    a["retention"] = retention(a, a.get("against") or source)  # q4: the tasks it was decided on
                    goal = cfg.goals.get(kind)
                    kept = a["retention"]["field_accuracy"]
                    a["meets_goal"] = goal is None or (kept is not None and kept >= goal)
                    a["verified"] = a["meets_goal"] or not cfg.gate_on_retention
                    keep(path, copy)
                    done.add([{"id": f"{name}/{kind}", "record": a}])
                r["artifacts"][kind] = a
                run.log_metrics({f"{name}.{kind}.{k}": a[k] for k in ("size_mb", "field_accuracy", "reward",
                                                                       "tokens_per_s")}
                                | {f"{name}.{kind}.retention": a["retention"]["field_accuracy"]})

            def confirm():
                """(verify on the confirm tasks beyond the first n_tasks, the source on all of them), or None: the confirm
                tasks are those of the slice the source's stage answered, up to export.four_bit.confirm_tasks."""
                n = cfg.four_bit.confirm_tasks
                if n is None or n <= len(tasks):
                    return None
                answered = {r["id"] for r in read_jsonl(responses)}  # the source's stage may have answered fewer
                wider = stratified([t for t in test_slice(load_tasks(DATA.test), params.eval.max_per_part)
                                    if t.id in answered], n)
                more = [t for t in wider if t.id not in {x.id for x in tasks}][:n - len(tasks)]
                if not more:
                    return None
                return (lambda file: verify_gguf(file, model_dir, more, scorer, cfg.max_new_tokens, threads,
                                                 cpu_batch(params.eval.batch_size, 8)),
                        source_numbers(responses, tasks + more))

            def gguf(kind: str, path: Path) -> dict:
                f16 = gguf_for(model_dir, "f16")

                def check(file: Path) -> dict:
                    return verify_gguf(file, model_dir, tasks, scorer, cfg.max_new_tokens, threads,
                                       cpu_batch(params.eval.batch_size, 8), reference=f16)

                if kind == "q4":  # the smallest 4-bit type that keeps export.four_bit.retain of the source
                    a = select_quantization(f16, path, cfg.four_bit.types, check, source, cfg.four_bit.retain,
                                            threads, confirm=confirm(), screen=cfg.four_bit.screen)
                else:
                    quantize(f16, path, kind, threads)
                    a = check(path) | tensor_types(path, kind)
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
            four = next((k for k in ("q4", "q4_k_m") if (r["artifacts"].get(k) or {}).get("verified")), None)
            if cfg.serve_check and four:  # the 4-bit file a user would serve
                r["serve"] = serve_check(OUT / name / f"model-{four}.gguf", tasks[0], scorer) | {"kind": four}
            results[name] = r
        write_text(PATHS.section, markdown(results, cfg))
        result = ExportResult({name: {**{k: v for k, v in r.items() if k not in ("artifacts", "source")},
                                      "source": {k: v for k, v in r["source"].items() if k != "rows"},
                                      "artifacts": {k: {x: y for x, y in a.items() if x != "rows"}
                                                    for k, a in r["artifacts"].items()}} for name, r in results.items()})
        write_json(PATHS.result, result.model_dump(mode="json"))
        run.log_artifacts(OUT, "export")  # the report and the quantized files themselves
        print(f"export: {PATHS.section}")
    resume.clear()
    return result


def keep(path: Path, kept: Path) -> None:
    """Hard links of a verified artifact's files in the resume folder (the same filesystem: no copy); DVC deletes
    the stage's outputs before a rerun, the links keep the bytes."""
    shutil.rmtree(kept, ignore_errors=True) if kept.is_dir() else kept.unlink(missing_ok=True)
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for f in files:
        target = kept if path.is_file() else kept / f.relative_to(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.link(f, target)


def restore(kept: Path, path: Path, md5: str | None) -> bool:
    """Put a kept artifact back at `path` when its bytes still have the verified md5; False: make it again."""
    if md5 is None or not kept.exists() or tracking.artifact_md5(kept) != md5:
        return False
    if path.exists():
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    files = [kept] if kept.is_file() else sorted(p for p in kept.rglob("*") if p.is_file())
    for f in files:
        target = path if kept.is_file() else path / f.relative_to(kept)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.link(f, target)
    print(f"export: {path}: verified before an interruption, put back ({md5})")
    return True


def main() -> None:
    """The stage: tasks/export.py (dvc.yaml's command) and `python -m` run it under stage_main."""
    run(load_params())


if __name__ == "__main__":
    stage_main(main)
