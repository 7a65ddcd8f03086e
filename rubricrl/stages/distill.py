"""DVC stage `distill`: the GRPO policy (teacher) into a smaller student with TRL's GKD on the hardest prompts;
student before and after, and teacher, on the same test tasks. Its report section is outputs/distill/report.md."""

from __future__ import annotations

import json
from pathlib import Path

from rubricrl import tracking
from rubricrl.config import DistillParams, GeneralParams, Params, load_params
from rubricrl.core.atomic import write_json, write_jsonl, write_text
from rubricrl.core.entry import stage_main
from rubricrl.core.errors import ConfigError
from rubricrl.core.jsonio import read_jsonl
from rubricrl.core.resume import ResumeDir, model_digest, tasks_digest
from rubricrl.core.tables import table
from rubricrl.core.taskfile import Task, load_tasks
from rubricrl.reward.load import load_rubric
from rubricrl.reward.scoring import RubricScorer
from rubricrl.stages.base import Result
from rubricrl.stages.paths import DATA, EVAL_GENERAL, EVAL_TASK, GRPO, RUBRIC
from rubricrl.stages.paths import DISTILL as PATHS

TEACHER = GRPO.model
OUT = Path(PATHS.out)
GENERAL_BASE = Path(EVAL_GENERAL.rows("base"))  # eval_general's per-item rows of the base model
NUMBERS = ("reward_mean", "field_accuracy", "null_for_present_rate", "invented_rate")


def numbers(metrics: dict) -> dict:
    """Per test part (and all): reward, strict field accuracy, null-for-present and invented rates."""
    out = {}
    for part, g in {"all": metrics["all"], **metrics["parts"]}.items():
        strict = g.get("strict") or {}
        out[part] = {"n": g["n"], "reward_mean": g["reward_mean"],
                     **{k: strict.get(k) for k in NUMBERS[1:]}}
    return out


class DistillResult(Result):
    """metrics/distill.json: the student, its training, student before/after and teacher per test part, the
    retention (student after / teacher) and, with distill.general, the student's general suites."""

    models: dict[str, dict[str, dict]]
    student: dict = {}
    train: dict = {}
    retention: dict[str, float | None] = {}
    general: dict | None = None
    divergence: dict = {}  # mean KL(teacher || student) on held-out test conversations: before, after
    gate: dict = {}  # the student's own gate: outcome (pass/fail/inconclusive), line; only a pass is registered


def student_gate(divergence: dict, teacher_rows: list[dict], student_rows: list[dict], margin: float,
                 n_boot: int) -> dict:
    """Pass when the divergence on held-out conversations fell and the student's strict field accuracy is not
    worse than the teacher's by more than `margin` on the paired 95% interval (rubricrl.metrics.decide)."""
    from rubricrl.metrics.compare import paired_comparisons
    from rubricrl.metrics.decide import combine, decide

    rows = paired_comparisons({"teacher": teacher_rows, "student": student_rows}, n_resamples=n_boot)
    row = next((r for r in rows if r["part"] == "all" and r["metric"] == "field_accuracy"), None)
    d = decide(row or {"n": 0}, "noninferiority", margin)
    fell = divergence["after"] < divergence["before"]
    outcome = combine([d.outcome, "pass" if fell else "fail"])
    return {"outcome": outcome, "line": f"divergence {divergence['before']:.3f} -> {divergence['after']:.3f} "
                                        f"({'fell' if fell else 'did not fall'}); field accuracy vs teacher {d.line}",
            "decision": d.to_dict()}


def markdown(info: dict, train: dict, numbers_table: dict, retention: dict) -> str:
    return "\n".join([
        "# Distillation", "",
        f"Student: {info['student']}: {info['student_params'] / 1e6:.1f}M parameters, {info['ratio']:.0%} of the "
        f"teacher's {info['teacher_params'] / 1e6:.1f}M" + (f" (layers {info['layers']} of {info['teacher_layers']})"
                                                             if info.get("layers") else "") + ".",
        f"GKD: {train['steps']} steps on the {info['n_prompts']} hardest of {info['pool']} prompts "
        f"(mean KL teacher||student on the teacher's answers {info['hardness_kept']:.3f} kept vs "
        f"{info['hardness_pool']:.3f} pool); loss {train['first_loss']} -> {train['last_loss']}, "
        f"{train['train_seconds']} s.", "",
        table(["model", "part", "n", "reward", "field acc", "null-for-present", "invented"],
              [[model, part, r["n"], *[r[k] for k in NUMBERS]] for model, parts in numbers_table.items()
               for part, r in parts.items()]),
        "", "Retention (student after / teacher, all tasks): "
        + ", ".join(f"{k} {v}" for k, v in retention.items()) + ".",
        "", f"GKD loss per step: {train.get('losses')}."]) + "\n"


def gate_markdown(gate: dict) -> str:
    return (f"\n## The student's gate: **{gate['outcome']}**\n\n{gate['line']}.\n"
            + ("" if gate["outcome"] == "pass" else "\nThe student is not registered (only a passing student is).\n"))


def general_base_rows(general) -> dict:
    """eval_general's per-item rows of the base model, per suite it runs (checked before any training)."""
    from rubricrl.general.run import active_suites

    base = {}
    for suite in active_suites(general):
        path = GENERAL_BASE / f"{suite}.jsonl"
        if not path.exists():
            raise FileNotFoundError(f"{path}: the base model's general rows (run the eval_general stage, or set "
                                    f"distill.general: false)")
        base[suite] = {"items": read_jsonl(path)}
    return base


def general_suites(student_dir: Path, cfg, base: dict, resume: ResumeDir | None = None) -> dict:
    """The student on the general suites, paired vs base's rows: metrics/general.json's shape (its rows and
    eval_general's report format in outputs/distill/general/). `resume`: its replies journaled there."""
    from rubricrl.general.run import compare, evaluate, gate, markdown, rows_stamp

    results = evaluate(student_dir, cfg, desc="general student",
                       journals=(lambda suite: resume.journal(f"general-{suite}")) if resume else None)
    for suite in results:
        write_jsonl(Path(PATHS.general_rows) / f"{suite}.jsonl", results[suite]["items"])
    paired = compare({"base": base, "student": results}, n_boot=cfg.n_boot)
    gates = gate(paired, cfg.tolerance, ["student"])
    write_text(Path(PATHS.general_rows) / "report.md", markdown({"student": results}, paired, gates, cfg.tolerance))
    return {"models": {"student": {s: {"score": r["score"], **r["summary"]} for s, r in results.items()}},
            "paired": paired, "gates": gates, "tolerance": cfg.tolerance, "stamp": rows_stamp(cfg)}


def resume_stamp(cfg: DistillParams, seed: int, general: GeneralParams | None, eval_tokens: int, pool: list[Task],
                 tests: list[Task], teacher: str | Path) -> tuple:
    """What distill's resume state is made of: the settings as this host runs them (precision resolved for GKD, and
    the device and dtype the teacher and the students are loaded in), the engine, the pool and the test tasks by
    content, the teacher (weights, tokenizer, template), and the general suites' and the eval's settings that its
    journals follow (general: None when the student is not run on the suites)."""
    from rubricrl.inference.generate import resolve_engine
    from rubricrl.inference.hf import placement, resolve_precision

    device, dtype = placement(cfg.device, cfg.precision)
    as_run = {**cfg.model_dump(mode="json"), "precision": resolve_precision(cfg.device, cfg.precision),
              "placement": [device.type, str(dtype)]}
    return (as_run, seed, resolve_engine(cfg.engine), tasks_digest(pool), tasks_digest(tests), model_digest(teacher),
            general.model_dump(mode="json") if general else None, eval_tokens)


def run(params: Params) -> DistillResult:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rubricrl.inference.hf import placement

    from rubricrl.release.distill import (build_student, gkd_train, hardness, layer_importance, load_pair,
                                          named_student)
    from rubricrl.inference.generate import generate_journaled
    from rubricrl.train.checkpoints import publish_dir, temp_dir_for
    from rubricrl.evaluate.task import evaluate_responses, test_slice
    from rubricrl.core.prompt import task_messages
    from rubricrl.core.slices import stratified

    cfg = params.distill
    base_general = general_base_rows(params.general) if cfg.general else None
    train_tasks = load_tasks(DATA.train)
    if cfg.pool > len(train_tasks):
        raise ConfigError(f"distill.pool: {cfg.pool} candidate prompts asked for, the train split has "
                          f"{len(train_tasks)} tasks (data.n_train); lower distill.pool and n_prompts")
    # candidates from the train split's second half (SFT trains on its first tasks), every domain in turn
    pool = stratified(train_tasks[len(train_tasks) // 2:], cfg.pool)
    tests = stratified(test_slice(load_tasks(DATA.test), params.eval.max_per_part), cfg.eval_tasks)
    scorer = RubricScorer(load_rubric(RUBRIC.rubric), judge_override=params.scoring.judge_config(),
                          policy_model=params.policy.model)
    # What a rerun after a kill reads back (the same settings, data and teacher only): the teacher's answers, the
    # initial student, GKD's checkpoints and the students' eval answers (rubricrl.core.resume).
    resume = ResumeDir("distill", *resume_stamp(cfg, params.data.seed, params.general if cfg.general else None,
                                                params.eval.max_new_tokens, pool, tests, TEACHER))
    with tracking.stage_run(params.tracking, "distill", {"distill": cfg.model_dump()}) as run:
        init = resume.folder("student_init")
        # The teacher's answers, once; the conversations GKD trains on.
        answers, _ = generate_journaled(TEACHER, pool, resume.journal("teacher"), cfg.save_every,
                                        batch_size=cfg.batch_eval, max_new_tokens=cfg.max_new_tokens,
                                        desc="teacher answers", engine=cfg.engine)
        write_jsonl(OUT / "teacher.jsonl", ({"id": t.id, "answer": a} for t, a in zip(pool, answers)))
        conversations = [task_messages(t) + [{"role": "assistant", "content": a}] for t, a in zip(pool, answers)]
        tok = AutoTokenizer.from_pretrained(TEACHER)
        info_file = resume.folder("student_init.json")
        if info_file.exists():  # built before a kill (published whole, then its description written)
            info = json.loads(info_file.read_text(encoding="utf-8"))
        elif cfg.student == "layers":
            importance = None
            if cfg.layers_by == "importance":
                teacher = AutoModelForCausalLM.from_pretrained(TEACHER, dtype=placement(cfg.device, cfg.precision)[1])
                importance = layer_importance(teacher.to(placement(cfg.device, cfg.precision)[0]).eval(), tok,
                                              conversations)
                del teacher
            tmp = temp_dir_for(init)
            info = {"student": f"{cfg.student_layers}-layer SmolLM2 from the teacher's layers (by {cfg.layers_by})",
                    **build_student(TEACHER, tmp, cfg.student_layers, importance)}
            publish_dir(tmp, init)
            if importance is not None:
                info["importance"] = [round(x, 4) for x in importance]
        else:
            tmp = temp_dir_for(init)
            info = {"student": cfg.student, **named_student(cfg.student, TEACHER, tmp)}
            publish_dir(tmp, init)
        write_json(info_file, info)
        # Held-out conversations: the test slice with the teacher's eval answers (its divergence is the gate's).
        by_id = {r["id"]: r["response"] for r in read_jsonl(EVAL_TASK.responses("grpo"))}
        heldout = [task_messages(t) + [{"role": "assistant", "content": by_id[t.id]}] for t in tests]
        teacher, student = load_pair(TEACHER, init, cfg.device, cfg.precision)  # vocabularies aligned
        kl = hardness(teacher, student, tok, conversations)
        divergence = {"before": sum(k := hardness(teacher, student, tok, heldout)) / len(k)}
        del teacher, student
        hardest = sorted(range(len(kl)), key=lambda i: -kl[i])[:cfg.n_prompts]
        info.update(pool=len(pool), n_prompts=len(hardest), hardness_pool=sum(kl) / len(kl),
                    hardness_kept=sum(kl[i] for i in hardest) / len(hardest),
                    prompts=[pool[i].id for i in hardest])
        train = gkd_train(init, TEACHER, [conversations[i] for i in hardest], PATHS.student, cfg,
                          seed=params.data.seed, checkpoints=resume.folder("gkd"))
        teacher, student = load_pair(TEACHER, PATHS.student, cfg.device, cfg.precision)
        divergence["after"] = sum(k := hardness(teacher, student, tok, heldout)) / len(k)
        del teacher, student
        by_model = {}
        for name, model_dir in (("student before", init), ("student after", Path(PATHS.student))):
            # the eval's budget: the teacher's rows (and the champion's) were answered with it, so the paired gate
            # compares models, not token limits (distill.max_new_tokens is the teacher's training answers')
            responses, _ = generate_journaled(model_dir, tests, resume.journal(f"eval-{name.replace(' ', '-')}"),
                                              cfg.save_every, batch_size=cfg.batch_eval,
                                              max_new_tokens=params.eval.max_new_tokens, desc=f"eval {name}",
                                              engine=cfg.engine)
            metrics = evaluate_responses(tests, responses, scorer)
            by_model[name] = numbers(metrics)
        # The distilled student's answers, in the eval's row format: the export stage's retention baseline.
        write_jsonl(PATHS.responses, ({k: s[k] for k in ("id", "part", "response", "total", "strict")}
                                              for s in metrics["samples"]))
        teacher_metrics = evaluate_responses(tests, [by_id[t.id] for t in tests], scorer)
        by_model["teacher"] = numbers(teacher_metrics)
        gate = student_gate(divergence, teacher_metrics["samples"], metrics["samples"], cfg.margin, params.eval.n_boot)
        after, teacher = by_model["student after"]["all"], by_model["teacher"]["all"]
        retention = {k: round(after[k] / teacher[k], 4) if after[k] is not None and teacher[k] else None
                     for k in ("field_accuracy", "reward_mean")}
        general = general_suites(Path(PATHS.student), params.general, base_general, resume) if cfg.general else None
        report = markdown(info, train, by_model, retention) + gate_markdown(gate)
        if general:
            report += "\n" + (Path(PATHS.general_rows) / "report.md").read_text(encoding="utf-8").replace("# ", "## ", 1)
        write_text(PATHS.section, report)
        result = DistillResult(student=info, train=train, models=by_model, retention=retention, general=general,
                               divergence=divergence, gate=gate)
        result.write(PATHS.result)
        run.log_metrics({"params_ratio": info["ratio"], **{f"retention.{k}": v for k, v in retention.items()},
                         **{f"divergence.{k}": v for k, v in divergence.items()},
                         **{f"{m.replace(' ', '_')}.{k}": v for m, parts in by_model.items()
                            for k, v in parts["all"].items() if isinstance(v, (int, float))}})
        if general:
            run.log_metrics({f"general.{s}": v["score"] for s, v in general["models"]["student"].items()})
        run.log_artifact(PATHS.section, "distill")
    resume.clear()
    print(f"distill: {PATHS.section}")
    return result


def main() -> None:
    """The stage: tasks/distill.py (dvc.yaml's command) and `python -m` run it under stage_main."""
    run(load_params())


if __name__ == "__main__":
    stage_main(main)
