"""DVC stage `sft`: the seed's baseline, TRL SFTTrainer on the training prompts with gold answers."""

from __future__ import annotations

from rubricrl import tracking
from rubricrl.config import Params, load_params
from rubricrl.core.entry import stage_main
from rubricrl.core.tables import table
from rubricrl.core.taskfile import load_tasks
from rubricrl.stages.base import Result, write_section
from rubricrl.stages.paths import DATA, PREPARE_MODEL
from rubricrl.stages.paths import SFT as PATHS


class SFTResult(Result):
    """metrics/sft.json."""

    train_tasks: int
    wall_seconds: float
    examples: int | None = None  # tasks with a reference that fit max_length
    steps: int | None = None
    first_loss: float | None = None
    last_loss: float | None = None


def run(params: Params) -> SFTResult:
    from rubricrl.train.sft import train_sft

    cfg = params.sft
    tasks = load_tasks(DATA.train)[: cfg.max_tasks]
    with tracking.stage_run(params.tracking, "sft", {"sft": cfg.model_dump(mode="json")}, inputs=[DATA.train]) as run:
        trained = train_sft(PREPARE_MODEL.model, tasks, PATHS.model, cfg)  # per-step loss goes to this MLflow run
        result = SFTResult(train_tasks=len(tasks), wall_seconds=trained.train_seconds, examples=trained.examples,
                           steps=trained.steps, first_loss=trained.first_loss, last_loss=trained.last_loss)
        result.write(PATHS.result)
        write_section(PATHS.section, section(result, params))
        run.log_metrics({"train_tasks": result.train_tasks, "wall_seconds": result.wall_seconds})
        run.log_outputs([trained.model_dir / "config.json"])
    return result


def section(result: SFTResult, params: Params) -> str:
    cfg = params.sft
    budget = f"{cfg.max_steps} steps" if cfg.max_steps > 0 else f"{cfg.epochs:g} epoch(s)"
    r = result
    return "\n".join([
        "# SFT baseline", "",
        f"TRL SFTTrainer on the gold answers of the first {r.train_tasks} training tasks (loss on the answer only), "
        f"{budget} of {cfg.per_device_batch_size * cfg.grad_accum} examples, learning rate {cfg.learning_rate:g}.", "",
        table(["examples", "steps", "first loss", "last loss", "wall s"],
              [[r.examples, r.steps, r.first_loss, r.last_loss, r.wall_seconds]], digits=4)])


if __name__ == "__main__":
    stage_main(lambda: run(load_params()))
