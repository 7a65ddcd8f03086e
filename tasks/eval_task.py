"""DVC stage `eval_task`: greedy generations on the test split from base, SFT and GRPO, scored and compared."""

from pathlib import Path

from rubricrl import tracking
from rubricrl.atomic import write_json, write_text
from rubricrl.cli_support import stage_main
from rubricrl.config import load_params
from rubricrl.rubric.scoring import RubricScorer
from rubricrl.rubric.spec import load_rubric
from rubricrl.taskfile import load_tasks

MODELS = {"base": "outputs/models/base", "sft": "outputs/models/sft", "grpo": "outputs/grpo/model"}
OUT, METRICS = Path("outputs/eval"), "metrics/eval.json"
HEADLINE = ("reward_mean", "json_valid_rate", "clean_json_rate", "extra_text_rate", "invented_rate")


def headline(group: dict) -> dict:
    """The numbers a person compares first, with their 95% bootstrap intervals."""
    out = {"n": group["n"], **{k: group[k] for k in HEADLINE}}
    out["reward_ci"] = group["reward_ci"]
    if group.get("gold"):
        out.update(f1=group["gold"]["f1"], f1_ci=group["gold"]["f1_ci"], precision=group["gold"]["precision"],
                   recall=group["gold"]["recall"])
    out["components"] = group["components"]
    return out


def test_slice(tasks, max_per_part):
    """The first N tasks of each part, so in-domain and held-out parts stay balanced on CPU."""
    if max_per_part is None:
        return tasks
    seen: dict[str, int] = {}
    out = []
    for t in tasks:
        part = t.meta.get("part", "all")
        if seen.get(part, 0) < max_per_part:
            seen[part] = seen.get(part, 0) + 1
            out.append(t)
    return out


def main() -> None:
    from rubricrl.evals.compare import comparison_markdown
    from rubricrl.evals.task_eval import evaluate_model

    params = load_params()
    cfg = params.eval
    tasks = test_slice(load_tasks("data/test.jsonl"), cfg.max_per_part)
    scorer = RubricScorer(load_rubric("outputs/rubric/rubric.yaml"), judge_override=params.scoring.judge_config(),
                          policy_model=params.policy.model)
    summary = {}
    with tracking.stage_run(params.tracking, "eval_task", {"eval": cfg.model_dump()},
                            inputs=["data/test.jsonl"]) as mlflow:
        for name, model_dir in MODELS.items():
            metrics = evaluate_model(model_dir, tasks, scorer, OUT / name, batch_size=cfg.batch_size,
                                     max_new_tokens=cfg.max_new_tokens, n_samples_table=cfg.samples_table,
                                     n_boot=cfg.n_boot)
            groups = {"all": metrics["all"], **metrics["parts"]}
            summary[name] = {part: headline(g) for part, g in groups.items()}
            if mlflow:
                for part, h in summary[name].items():
                    mlflow.log_metrics({f"{name}.{part}.{k}": v for k, v in h.items() if isinstance(v, (int, float))})
                mlflow.log_table({k: [row.get(k) for row in metrics["samples"]] for k in ("id", "part", "total", "response")},
                                 f"eval/{name}_samples.json")
                mlflow.log_artifacts(str(OUT / name), f"eval/{name}")
        write_text(OUT / "report.md", comparison_markdown(summary, scorer.rubric.max_total))
        write_json(METRICS, summary)
        if mlflow:
            mlflow.log_artifact(str(OUT / "report.md"), "eval")
        print(f"eval_task: {OUT / 'report.md'}")


if __name__ == "__main__":
    stage_main(main)
