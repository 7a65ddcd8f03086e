"""DVC stage `distill`: the GRPO policy (teacher) into a smaller student with TRL's GKD on the hardest prompts;
student before and after, and teacher, on the same test tasks. Its report section is outputs/distill/report.md."""

from __future__ import annotations

import shutil
from pathlib import Path

from rubricrl import tracking
from rubricrl.config import Params, load_params
from rubricrl.core.atomic import write_jsonl, write_text
from rubricrl.core.entry import stage_main
from rubricrl.core.errors import ConfigError
from rubricrl.core.jsonio import read_jsonl
from rubricrl.core.tables import table
from rubricrl.core.taskfile import load_tasks
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
        + ", ".join(f"{k} {v}" for k, v in retention.items()) + "."]) + "\n"


def general_base_rows() -> dict:
    """eval_general's per-item rows of the base model, per suite (checked before any training)."""
    from rubricrl.general.run import SUITES

    base = {}
    for suite in SUITES:
        path = GENERAL_BASE / f"{suite}.jsonl"
        if not path.exists():
            raise FileNotFoundError(f"{path}: the base model's general rows (run the eval_general stage, or set "
                                    f"distill.general: false)")
        base[suite] = {"items": read_jsonl(path)}
    return base


def general_suites(student_dir: Path, cfg, base: dict) -> dict:
    """The student on the general suites, paired vs base's rows: metrics/general.json's shape (its rows and
    eval_general's report format in outputs/distill/general/)."""
    from rubricrl.general.run import SUITES, compare, evaluate, gate, markdown

    results = evaluate(student_dir, cfg, desc="general student")
    for suite in SUITES:
        write_jsonl(OUT / "general" / f"{suite}.jsonl", results[suite]["items"])
    paired = compare({"base": base, "student": results}, n_boot=cfg.n_boot)
    gates = gate(paired, cfg.tolerance, ["student"])
    write_text(OUT / "general" / "report.md", markdown({"student": results}, paired, gates, cfg.tolerance))
    return {"models": {"student": {s: {"score": r["score"], **r["summary"]} for s, r in results.items()}},
            "paired": paired, "gates": gates, "tolerance": cfg.tolerance}


def run(params: Params) -> DistillResult:
    from transformers import AutoTokenizer

    from rubricrl.release.distill import build_student, gkd_train, hardness, load_pair, named_student
    from rubricrl.inference.generate import generate_with_stats
    from rubricrl.evaluate.task import evaluate_responses, test_slice
    from rubricrl.core.prompt import task_messages

    cfg = params.distill
    base_general = general_base_rows() if cfg.general else None
    train_tasks = load_tasks(DATA.train)
    if cfg.pool > len(train_tasks):
        raise ConfigError(f"distill.pool: {cfg.pool} candidate prompts asked for, the train split has "
                          f"{len(train_tasks)} tasks (data.n_train); lower distill.pool and n_prompts")
    pool = train_tasks[-cfg.pool:]
    tests = test_slice(load_tasks(DATA.test), params.eval.max_per_part)[:cfg.eval_tasks]
    scorer = RubricScorer(load_rubric(RUBRIC.rubric), judge_override=params.scoring.judge_config(),
                          policy_model=params.policy.model)
    work = OUT.with_name(".distill.work")
    shutil.rmtree(work, ignore_errors=True)
    with tracking.stage_run(params.tracking, "distill", {"distill": cfg.model_dump()}) as run:
        init = work / "student_init"
        if cfg.student == "layers":
            info = {"student": f"{cfg.student_layers}-layer SmolLM2 from the teacher's layers",
                    **build_student(TEACHER, init, cfg.student_layers)}
        else:
            info = {"student": cfg.student, **named_student(cfg.student, TEACHER, init)}
        # The teacher's answers, once; the conversations GKD trains on.
        answers, _ = generate_with_stats(TEACHER, pool, batch_size=cfg.batch_eval, max_new_tokens=cfg.max_new_tokens,
                                         desc="teacher answers", engine=cfg.engine)
        write_jsonl(OUT / "teacher.jsonl", ({"id": t.id, "answer": a} for t, a in zip(pool, answers)))
        conversations = [task_messages(t) + [{"role": "assistant", "content": a}] for t, a in zip(pool, answers)]
        tok = AutoTokenizer.from_pretrained(TEACHER)
        teacher, student = load_pair(TEACHER, init, cfg.device, cfg.precision)  # vocabularies aligned
        kl = hardness(teacher, student, tok, conversations)
        del teacher, student
        hardest = sorted(range(len(kl)), key=lambda i: -kl[i])[:cfg.n_prompts]
        info.update(pool=len(pool), n_prompts=len(hardest), hardness_pool=sum(kl) / len(kl),
                    hardness_kept=sum(kl[i] for i in hardest) / len(hardest),
                    prompts=[pool[i].id for i in hardest])
        train = gkd_train(init, TEACHER, [conversations[i] for i in hardest], PATHS.student, cfg,
                          seed=params.data.seed)
        by_model = {}
        for name, model_dir in (("student before", init), ("student after", Path(PATHS.student))):
            responses, _ = generate_with_stats(model_dir, tests, batch_size=cfg.batch_eval,
                                               max_new_tokens=cfg.max_new_tokens, desc=f"eval {name}")
            metrics = evaluate_responses(tests, responses, scorer)
            by_model[name] = numbers(metrics)
        # The distilled student's answers, in the eval's row format: the export stage's retention baseline.
        write_jsonl(PATHS.responses, ({k: s[k] for k in ("id", "part", "response", "total", "strict")}
                                              for s in metrics["samples"]))
        by_id = {r["id"]: r["response"] for r in read_jsonl(EVAL_TASK.responses("grpo"))}
        by_model["teacher"] = numbers(evaluate_responses(tests, [by_id[t.id] for t in tests], scorer))
        after, teacher = by_model["student after"]["all"], by_model["teacher"]["all"]
        retention = {k: round(after[k] / teacher[k], 4) if after[k] is not None and teacher[k] else None
                     for k in ("field_accuracy", "reward_mean")}
        general = general_suites(Path(PATHS.student), params.general, base_general) if cfg.general else None
        report = markdown(info, train, by_model, retention)
        if general:
            report += "\n" + (OUT / "general" / "report.md").read_text(encoding="utf-8").replace("# ", "## ", 1)
        write_text(PATHS.section, report)
        result = DistillResult(student=info, train=train, models=by_model, retention=retention, general=general)
        result.write(PATHS.result)
        run.log_metrics({"params_ratio": info["ratio"], **{f"retention.{k}": v for k, v in retention.items()},
                         **{f"{m.replace(' ', '_')}.{k}": v for m, parts in by_model.items()
                            for k, v in parts["all"].items() if isinstance(v, (int, float))}})
        if general:
            run.log_metrics({f"general.{s}": v["score"] for s, v in general["models"]["student"].items()})
        run.log_artifact(PATHS.section, "distill")
    shutil.rmtree(work, ignore_errors=True)
    print(f"distill: {PATHS.section}")
    return result


if __name__ == "__main__":
    stage_main(lambda: run(load_params()))
