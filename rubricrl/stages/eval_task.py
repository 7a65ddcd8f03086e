"""DVC stage `eval_task`: greedy generations on the test split from base, SFT and GRPO, scored with the
rubric and the strict true metric, and compared by paired differences; its report section is
outputs/eval/report.md with the models and paired-differences plots."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

from rubricrl import tracking
from rubricrl.config import EvalParams, Params, ScoringParams, load_params
from rubricrl.core.atomic import write_csv, write_text
from rubricrl.core.entry import stage_main
from rubricrl.core.resume import ResumeDir, file_digest, model_digest, tasks_digest, twins
from rubricrl.core.taskfile import Task, load_tasks
from rubricrl.metrics.checklist_judge import checklist_panel
from rubricrl.reward.load import load_rubric
from rubricrl.reward.scoring import RubricScorer
from rubricrl.stages.base import Result
from rubricrl.stages.paths import DATA, MODELS, RUBRIC
from rubricrl.stages.paths import EVAL_TASK as PATHS

OUT = Path(PATHS.out)
HEADLINE = ("n", "reward_mean", "reward_ci", "json_valid_rate", "clean_json_rate", "extra_text_rate", "strict",
            "components")


def headline(group: dict) -> dict:
    """The numbers a person compares first, with their 95% bootstrap intervals."""
    return {k: group[k] for k in HEADLINE}


def flat_metrics(name: str, part: str, h: dict) -> dict:
    """MLflow metrics of one model and part: the reward, rates and strict metrics (numbers only)."""
    flat = {k: v for k, v in h.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    flat.update({f"strict.{k}": v for k, v in (h.get("strict") or {}).items()
                 if isinstance(v, (int, float)) and not isinstance(v, bool)})
    return {f"{name}.{part}.{k}": v for k, v in flat.items()}


def summary_rows(summary: dict) -> list[dict]:
    """One row per model and test part: reward and strict field accuracy with their 95% CIs."""
    rows = []
    for model, parts in summary.items():
        for part, h in parts.items():
            strict = h.get("strict") or {}
            (lo, hi), (alo, ahi) = h.get("reward_ci") or (None, None), strict.get("field_accuracy_ci") or (None, None)
            rows.append({"label": f"{model}/{part}", "model": model, "part": part, "n": h["n"],
                         "reward_mean": h["reward_mean"], "reward_ci_low": lo, "reward_ci_high": hi,
                         "json_valid_rate": h["json_valid_rate"], "field_accuracy": strict.get("field_accuracy"),
                         "field_accuracy_ci_low": alo, "field_accuracy_ci_high": ahi})
    return rows


class EvalResult(Result):
    """metrics/eval.json: per model and test part its headline numbers (reward, strict metrics, rates, with their
    95% intervals), and the paired differences of each later model against each earlier one."""

    models: dict[str, dict[str, dict]]
    paired: list[dict] = []
    generation: dict[str, dict] = {}  # per model: answers, new tokens, seconds, tokens/s, batch, engine threads


def generation_line(generation: dict[str, dict]) -> str:
    """One report line: each model's greedy decoding speed (read back answers count 0 s)."""
    return "Generation: " + "; ".join(
        f"{name} {g['n']} answers, {g['new_tokens']} tokens in {g['seconds']:.1f} s ({g['tokens_per_s']:.1f} tokens/s, "
        f"batch {g['batch_size']})" for name, g in generation.items()) + "."


def resume_stamp(cfg: EvalParams, scoring: ScoringParams, tasks: list[Task], models: dict[str, str | Path]) -> tuple:
    """What eval_task's journaled answers are made of: the eval settings and the engine they resolve to here, the
    scoring (the judge and the rubric file), the test tasks by content and each model (weights, tokenizer,
    template)."""
    from rubricrl.inference.generate import resolve_engine

    return (cfg.model_dump(mode="json"), resolve_engine(cfg.engine), scoring.model_dump(mode="json"),
            file_digest(RUBRIC.rubric), tasks_digest(tasks), {name: model_digest(d) for name, d in models.items()})


def run(params: Params) -> EvalResult:
    from rubricrl.evaluate.plots import plot_models, plot_paired
    from rubricrl.evaluate.section import comparison_markdown
    from rubricrl.evaluate.task import evaluate_model, test_slice
    from rubricrl.metrics.compare import paired_comparisons

    cfg = params.eval
    tasks = test_slice(load_tasks(DATA.test), cfg.max_per_part)
    scorer = RubricScorer(load_rubric(RUBRIC.rubric), judge_override=params.scoring.judge_config(),
                          policy_model=params.policy.model)
    summary, samples, generation = {}, {}, {}
    # Answers already generated for these settings, tasks and models are read back (a rerun after a kill).
    resume = ResumeDir("eval_task", *resume_stamp(cfg, params.scoring, tasks, MODELS))
    same = twins(MODELS)  # a model that is an earlier one (GRPO stopped on its SFT weights) reads its answers back
    # The free-text checklist graded by the judge panel (scoring.checklist_judge) when set, else by its procedure.
    with tracking.stage_run(params.tracking, "eval_task", {"eval": cfg.model_dump()}, inputs=[DATA.test]) as run, \
            (checklist_panel(params.scoring.checklist_judge, params.policy.model) or nullcontext()) as checklist_judge:
        for name, model_dir in MODELS.items():
            # The base model on a stratified sub-slice: its gap to SFT is large (0.05 vs 0.42 here), so fewer
            # tasks decide it; the close comparison, GRPO - SFT, gets every task (eval.base_per_part).
            subset = test_slice(tasks, cfg.base_per_part) if name == "base" else tasks
            twin = same[name] if same[name] != "base" and name != "base" else name  # base answers a sub-slice
            if twin != name:
                print(f"eval_task: {name} is the same model as {twin} (weights, tokenizer, template): its answers "
                      f"are {twin}'s, read back")
            metrics = evaluate_model(model_dir, subset, scorer, OUT / name, batch_size=cfg.batch_size,
                                     max_new_tokens=cfg.max_new_tokens, n_samples_table=cfg.samples_table,
                                     n_boot=cfg.n_boot, engine=cfg.engine, journal=resume.journal(twin),
                                     save_every=cfg.save_every, checklist_judge=checklist_judge)
            groups = {"all": metrics["all"], **metrics["parts"]}
            summary[name] = {part: headline(g) for part, g in groups.items()}
            samples[name] = metrics["samples"]
            generation[name] = {k: v for k, v in metrics["generation"].items() if k != "model_dir"}
            for part, h in summary[name].items():
                run.log_metrics(flat_metrics(name, part, h))
            run.log_table({k: [row.get(k) for row in metrics["samples"]] for k in ("id", "part", "total", "response")},
                          f"eval/{name}_samples.json")
            run.log_artifacts(OUT / name, f"eval/{name}")
        paired = paired_comparisons(samples, n_resamples=cfg.n_boot)
        rows = summary_rows(summary)
        write_csv(PATHS.summary, rows, {k: k for k in rows[0]})  # `dvc plots`: models side by side
        plot_models(rows, OUT)
        plot_paired(paired, OUT)
        kinds = {t.kind for t in tasks}
        tops = {k: scorer.rubric.max_total_for(k) for k in scorer.rubric.kinds if k in kinds}
        write_text(PATHS.section, comparison_markdown(summary, paired, tops, figures=True, kinds=kinds)
                   + "\n" + generation_line(generation) + "\n")
        result = EvalResult(models=summary, paired=paired, generation=generation)
        result.write(PATHS.result)
        run.log_metrics({f"paired.{r['model']}-{r['vs']}.{r['part']}.{r['metric']}.{k}": r[k]
                         for r in paired for k in ("diff", "p")})
        run.log_artifact(PATHS.section, "eval")
        print(f"eval_task: {PATHS.section}")
    resume.clear()
    return result


def main() -> None:
    """The stage: tasks/eval_task.py (dvc.yaml's command) and `python -m` run it under stage_main."""
    run(load_params())


if __name__ == "__main__":
    stage_main(main)
