"""DVC stage `sft`: the seed's baseline, TRL SFTTrainer on the training prompts with gold answers.

One process, or several with the same code: with sft.accelerate_config set (production: 8 GPUs, ZeRO-3, where a
full fine-tune of the 7B policy with Adam fits; it does not fit one 80 GB GPU) the stage relaunches itself under
`accelerate launch --config_file`, as GRPO does. Every rank trains; only the main process writes the outputs
and the MLflow run."""

from __future__ import annotations

from pathlib import Path

from rubricrl import tracking
from rubricrl.config import Params, SFTSettings, load_params
from rubricrl.core.entry import stage_main
from rubricrl.core.resume import ResumeDir, model_digest, tasks_digest
from rubricrl.core.tables import table
from rubricrl.core.taskfile import Task, load_tasks
from rubricrl.stages.base import Result, write_section
from rubricrl.stages.launch import rank_run, relaunch_under_accelerate
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
    processes: int = 1  # training processes (accelerate)
    precision: str = "fp32"  # as trained (sft.precision resolved: auto becomes fp32 or bf16)
    skipped_updates: list[int] = []  # steps whose non-finite update was skipped (rubricrl/train/nonfinite.py)


def resume_stamp(cfg: SFTSettings, tasks: list[Task], model_dir: str | Path) -> tuple:
    """What SFT's checkpoints are made of: the settings as this host trains with them (precision resolved, the
    accelerate config by content), the tasks by content and the starting model (weights, tokenizer, template)."""
    from rubricrl.train.trainer_args import stamp_settings

    return stamp_settings(cfg), tasks_digest(tasks), model_digest(model_dir)


def run(params: Params) -> SFTResult | None:
    """Train (every rank); the main process writes the outputs and returns the result, the others None."""
    from rubricrl.train.sft import process_state, train_sft

    cfg = params.sft
    tasks = load_tasks(DATA.train)[: cfg.max_tasks]
    state = process_state(cfg)
    # Checkpoints of these settings, tasks and starting weights only (another configuration's are deleted): the main
    # process decides, the others wait and then find the folder as it left it.
    stamp = resume_stamp(cfg, tasks, PREPARE_MODEL.model)
    if state.is_main_process:
        resume = ResumeDir("sft", *stamp)
    state.wait_for_everyone()
    if not state.is_main_process:
        resume = ResumeDir("sft", *stamp)
    with rank_run(state.is_main_process, lambda: tracking.stage_run(
            params.tracking, "sft", {"sft": cfg.model_dump(mode="json")}, inputs=[DATA.train])) as run:
        # per-step loss goes to this MLflow run
        trained = train_sft(PREPARE_MODEL.model, tasks, PATHS.model, cfg, checkpoints=resume.folder("checkpoints"))
        if not state.is_main_process:
            return None
        result = SFTResult(train_tasks=len(tasks), wall_seconds=trained.train_seconds, examples=trained.examples,
                           steps=trained.steps, first_loss=trained.first_loss, last_loss=trained.last_loss,
                           processes=state.num_processes, precision=trained.precision,
                           skipped_updates=list(trained.skipped_updates))
        result.write(PATHS.result)
        write_section(PATHS.section, section(result, params))
        run.log_metrics({"train_tasks": result.train_tasks, "wall_seconds": result.wall_seconds,
                         "processes": result.processes, "skipped_updates": len(result.skipped_updates)})
        run.set_tag("rubricrl.precision.sft", result.precision)
        run.log_outputs([trained.model_dir / "config.json"])
    resume.clear()
    return result


def section(result: SFTResult, params: Params) -> str:
    cfg = params.sft
    budget = f"{cfg.max_steps} steps" if cfg.max_steps > 0 else f"{cfg.epochs:g} epoch(s)"
    r = result
    examples = cfg.per_device_batch_size * cfg.grad_accum * r.processes
    lines = [
        "# SFT baseline", "",
        f"TRL SFTTrainer on the gold answers of the first {r.train_tasks} training tasks (loss on the answer only), "
        f"{budget} of {examples} examples ({r.processes} process(es), {r.precision}), learning rate "
        f"{cfg.learning_rate:g}.", "",
        table(["examples", "steps", "first loss", "last loss", "wall s"],
              [[r.examples, r.steps, r.first_loss, r.last_loss, r.wall_seconds]], digits=4)]
    if r.skipped_updates:
        lines += ["", f"Non-finite updates skipped at steps {', '.join(map(str, r.skipped_updates))}."]
    return "\n".join(lines)


def main() -> None:
    params = load_params()
    relaunch_under_accelerate(params.sft.accelerate_config, __spec__.name)
    run(params)


if __name__ == "__main__":
    stage_main(main)
