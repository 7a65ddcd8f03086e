"""GRPO on the rubric reward: crash-safe resume and KL-spike rollback around TRL's GRPOTrainer.

Layout of `out_dir`: checkpoints/checkpoint-N (marked complete once fully written), model/ (the final
HF folder, published atomically), grpo_state.json (beta and rollbacks, so a crash after a rollback
resumes with the raised beta) and train_result.json (the returned dict).
"""

from __future__ import annotations

import gc
import json
import logging
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

from transformers import TrainerCallback

from rubricrl.core.atomic import write_json
from rubricrl.reward.functions import RubricReward
from rubricrl.core.taskfile import Task
from rubricrl.train import trl_patches
from rubricrl.train.checkpoints import (
    Checkpoint, CheckpointCallback, latest_complete, newest_at_or_before, publish_checkpoint_model, publish_dir,
    remove_after, remove_incomplete, temp_dir_for,
)
from rubricrl.train.data import grpo_rows, token_count
from rubricrl.train.general import GENERAL_PREFIX
from rubricrl.train.memory import FRACTION, MIB, MicroBatchPlan, peak_memory_mib, plan_micro_batch, step_bytes
from rubricrl.train.mlflow_log import MLflowMetricsCallback, active_mlflow
from rubricrl.train.monitor import HackMonitor
from rubricrl.train.nets import armed_nets
from rubricrl.train.nonfinite import NonFiniteGuard
from rubricrl.train.reward_mix import TrainingReward
from rubricrl.train.rollback import Rollback, RollbackMonitor, Spike, SpikeDetector, TrainingError, last_good_step
from rubricrl.config import GRPOSettings
from rubricrl.train.shared_prefill import rollout_stats, share_prefill
from rubricrl.train.trainer_args import grpo_config, peft_config

log = logging.getLogger(__name__)
STATE_FILE = "grpo_state.json"
VLLM_COLOCATE_SHARE = 0.3  # TRL's vllm_gpu_memory_utilization (its default, which grpo_config keeps)
RESULT_FILE = "train_result.json"


@dataclass
class _Run:
    """What one train_grpo call works with; shared by its helpers."""

    model_dir: Path
    out: Path
    settings: GRPOSettings
    args: object  # the GRPOConfig
    dataset: object
    mix: TrainingReward
    callbacks: list
    monitor_tasks: list
    monitor_decode: object
    skipped_updates: list  # steps whose non-finite update was skipped (rubricrl.train.nonfinite), over all attempts
    rollouts: dict  # what the rollouts sampled over all attempts (rubricrl.train.shared_prefill.rollout_stats)
    checklist_judge: object = None  # the hack monitor's free-text checklist judge panel (None: its procedure)

    @property
    def run_dir(self) -> Path:
        return self.out / "checkpoints"

    @property
    def main(self) -> bool:
        return self.args.process_index == 0

    def barrier(self) -> None:
        self.args.distributed_state.wait_for_everyone()


def process_state(settings: GRPOSettings):
    """This process's accelerate PartialState, set up exactly as train_grpo's trainer will set it up (same
    backend, device and DeepSpeed flag; the trainer then reuses the process group), so that a caller can
    coordinate the ranks (is_main_process, wait_for_everyone) before training. Checks the batch sizes
    against the real number of processes too (an auto micro-batch as the CPU default's: the step is the same)."""
    return grpo_config(settings, Path("."), settings.beta, [1.0]).distributed_state


def micro_batch_plan(settings: GRPOSettings, model_dir: Path, rows: list[dict], tokenizer) -> MicroBatchPlan:
    """The step's split into micro-batches: the numbers given, or for `auto` the largest that fits the card
    (rubricrl.train.memory), the same on every process (the smallest any of them can hold)."""
    s = settings
    if s.per_device_batch_size != "auto":
        return MicroBatchPlan(s.per_device_batch_size, s.grad_accum, s.per_device_batch_size * s.grad_accum, "given",
                              checkpointing=s.gradient_checkpointing)
    import torch
    from accelerate import PartialState
    from transformers import AutoConfig, AutoModelForCausalLM

    state = None if s.device == "cpu" else PartialState()
    if state is None or state.device.type != "cuda":
        return plan_micro_batch(s.step_completions, checkpointing=s.gradient_checkpointing)
    config = AutoConfig.from_pretrained(model_dir)
    with torch.device("meta"):
        n_params = sum(p.numel() for p in AutoModelForCausalLM.from_config(config).parameters())
    tokens = max(token_count(tokenizer, r["prompt"], True) for r in rows) + s.max_completion_length
    free, total = torch.cuda.mem_get_info(state.device)
    if s.use_vllm and s.vllm_mode == "colocate":  # vLLM takes its share of the card after this look
        free -= int(VLLM_COLOCATE_SHARE * total)
    plan = plan_micro_batch(s.step_completions, free, config, tokens, s.max_completion_length, s.gradient_checkpointing,
                            n_params, s.beta > 0)
    if state.num_processes > 1:
        import torch.distributed as dist

        smallest = torch.tensor([plan.micro_batch], device=state.device)
        dist.all_reduce(smallest, op=dist.ReduceOp.MIN)
        micro = int(smallest.item())
        plan = replace(plan, micro_batch=micro, grad_accum=plan.step_completions // micro, step_mib=round(
            step_bytes(config, micro, tokens, s.max_completion_length, s.gradient_checkpointing) / MIB, 1))
    if not plan.fits:
        log.warning("grpo: even one sequence of %d tokens (%.0f MiB a micro-step) does not fit %.0f%% of the card's "
                    "%.0f MiB free beside %.0f MiB of weights and optimizer: training goes on at 1 a micro-step; set "
                    "grpo.gradient_checkpointing or shorten grpo.max_completion_length", tokens, plan.step_mib,
                    100 * FRACTION, plan.free_mib, plan.state_mib)
    return plan


def train_grpo(model_dir: str | Path, train_tasks: list[Task], out_dir: str | Path, settings: GRPOSettings,
               reward: RubricReward, callbacks: Sequence[TrainerCallback] = (), resume: bool = True,
               monitor_tasks: Sequence[Task] = (), monitor_decode=None, checklist_judge=None) -> dict:
    """Train `model_dir` with GRPO on `train_tasks`; returns (and writes to out_dir) a result dict.

    resume=True continues from the newest complete checkpoint in out_dir (after a crash or a kill);
    resume=False deletes earlier checkpoints first. `callbacks` run before the rollback monitor, so
    they see (and may change) each step's logs first. Tasks missing from `reward.tasks` are added.
    `monitor_tasks` (validation tasks with gold answers) switch on the reward-hacking monitor when
    settings.monitor.enabled; `monitor_decode` replaces its greedy decoder (tests). Null rollback windows and
    monitor.every are sized from max_steps (GRPOSettings.sized); the result's `nets` says which nets were armed.
    `checklist_judge` (rubricrl.metrics.checklist_judge.ChecklistJudge, from scoring.checklist_judge): the judge panel
    through which the monitor reads the free-text checklist; None: the checklist's procedure alone.
    """
    from rubricrl.train.data import rows_dataset
    from transformers import AutoTokenizer

    started = time.time()
    nets = [n.model_dump() for n in armed_nets(settings, len(monitor_tasks))]
    settings = settings.sized()
    reward.tasks.update({t.id: t for t in train_tasks if t.id not in reward.tasks})
    mix = TrainingReward(reward)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    rows, skipped = grpo_rows(train_tasks, tokenizer, settings.max_prompt_length, settings.general_share, settings.seed)
    if not any(not r["task_id"].startswith(GENERAL_PREFIX) for r in rows):
        raise TrainingError(f"grpo: no task prompt fits max_prompt_length ({settings.max_prompt_length} tokens)")
    plan = micro_batch_plan(settings, Path(model_dir), rows, tokenizer)
    settings = settings.split(plan.micro_batch)
    out = Path(out_dir)
    saved = _load_state(out) if resume else None
    beta = saved["beta"] if saved else settings.beta
    rollbacks = [Rollback(**r) for r in saved["rollbacks"]] if saved else []
    run = _Run(Path(model_dir), out, settings, grpo_config(settings, out / "checkpoints", beta, mix.weights),
               rows_dataset(rows), mix, list(callbacks), list(monitor_tasks), monitor_decode, [], {}, checklist_judge)
    if run.main:
        if resume:
            remove_incomplete(run.run_dir)
        else:
            shutil.rmtree(run.run_dir, ignore_errors=True)
            (out / STATE_FILE).unlink(missing_ok=True)
    run.barrier()

    start = latest_complete(run.run_dir) if resume else None
    if saved and saved.get("stopped") and rollbacks and rollbacks[-1].stopped:
        # The monitor had stopped the run (after_trip: stop) before a kill: publish its restored state again.
        if run.main:
            _publish_restored(rollbacks[-1], out / "model", run.model_dir)
        run.barrier()
        global_step, log_history = saved["stopped"]["global_step"], saved["stopped"]["log_history"]
    elif start and start.step >= settings.max_steps:
        # Already trained. transformers would run one extra step when resumed from the final checkpoint.
        if run.main:
            publish_checkpoint_model(start.path, out / "model", run.model_dir)
        run.barrier()
        global_step, log_history = start.step, _log_history(start)
    else:
        trainer, beta = _train_with_rollbacks(run, start, beta, rollbacks)
        stopped = rollbacks[-1] if rollbacks and rollbacks[-1].stopped else None
        if stopped is None:
            _save_final(trainer, out / "model", run)
        elif run.main:  # the monitor stopped the run: its restored state is the model
            _publish_restored(stopped, out / "model", run.model_dir)
        run.barrier()
        global_step, log_history = trainer.state.global_step, trainer.state.log_history
    result = {
        "model_dir": str(out / "model"),
        "checkpoints_dir": str(run.run_dir),
        "global_step": global_step,
        "resumed_from_step": start.step if start else None,
        "beta": beta,
        "rollbacks": [r.to_dict() for r in rollbacks],
        "skipped_updates": run.skipped_updates,
        "skipped_task_ids": skipped,
        "nets": nets,
        "monitor_kinds": sorted({t.kind for t in monitor_tasks}),
        "world_size": run.args.world_size,
        "precision": "bf16" if run.args.bf16 else "fp32",
        "train_seconds": round(time.time() - started, 1),
        "memory": {"plan": plan.to_dict(), "peak": peak_memory_mib()},
        "rollouts": _rollout_speed(run.rollouts),
        "log_history": log_history,
    }
    if run.main:
        write_json(out / RESULT_FILE, result)
    return result


def _train_with_rollbacks(run: _Run, start: Checkpoint | None, beta: float, rollbacks: list[Rollback]):
    """Train to max_steps; on a spike restore the last good checkpoint with a raised beta. Returns (trainer, beta)."""
    from trl import GRPOTrainer

    s = run.settings
    detector = SpikeDetector(s.rollback)
    if start:
        detector.seed(_log_history(start))
    monitor = RollbackMonitor(detector, s.rollback.enabled)
    # A non-finite update is skipped; max_skipped_updates of them in a row trip a rollback like a KL spike.
    guard = NonFiniteGuard("grpo", s.max_skipped_updates,
                           lambda step, reason: monitor.trip(Spike(step, None, None, reason, kind="nonfinite")))
    guard.skipped = run.skipped_updates
    hack = None
    if s.monitor.enabled and run.monitor_tasks:
        hack = HackMonitor(run.monitor_tasks, run.mix.reward.scorer, s.monitor, monitor, s.max_completion_length,
                           run.monitor_decode, run.checklist_judge)
        if start:
            hack.seed(_log_history(start))
    watchers = [hack, monitor] if hack else [monitor]
    keeper = CheckpointCallback(s.save_total_limit, lambda: _protected_step(run.run_dir, detector, hack))
    metrics = MLflowMetricsCallback(run.mix, s.table_every, s.table_rows)
    trl_patches.apply()  # score only the completion in the LM head on CPU too
    while True:
        run.args.beta = metrics.beta = beta  # GRPOTrainer reads args.beta when it is built
        # After a rollback the redone steps draw other prompts: the sampler's shuffle is seeded per attempt. The
        # same order would replay the same prompts with the restored RNG, so a collapse on the first redone step
        # would repeat exactly until max_rollbacks (PaLM, too, skipped the batches around a loss spike). A resume
        # after a crash reads the rollbacks back, so it keeps the order of the attempt it interrupted.
        run.args.seed = s.seed + len(rollbacks)
        trainer = GRPOTrainer(model=str(run.model_dir), reward_funcs=run.mix.funcs, args=run.args,
                              train_dataset=run.dataset, callbacks=[*run.callbacks, guard, *watchers, keeper, metrics],
                              peft_config=peft_config(s.lora))
        if not s.use_vllm:
            share_prefill(trainer.model)  # each prompt's KV cache computed once for its num_generations rollouts
        try:
            trainer.train(resume_from_checkpoint=str(start.path) if start else None)
        finally:
            for k, v in rollout_stats(trainer.model).items():
                run.rollouts[k] = run.rollouts.get(k, 0) + v
        spike = monitor.spike
        if spike is None:
            return trainer, beta
        if len(rollbacks) >= s.rollback.max_rollbacks and not (
                spike.kind == "reward_hacking" and s.monitor.after_trip == "stop"):
            raise TrainingError(
                f"grpo: step {spike.step}: {spike.reason} (KL {spike.kl}, beta {beta:g}); giving up after "
                f"{len(rollbacks)} rollback(s) (rollback.max_rollbacks). Lower learning_rate or raise beta."
            )
        good = spike.restore_step if spike.restore_step is not None else last_good_step(spike.step)
        start = newest_at_or_before(run.run_dir, good)
        stop = spike.kind == "reward_hacking" and s.monitor.after_trip == "stop"
        new_beta = beta if stop else min(beta * s.rollback.beta_factor, s.rollback.beta_max)
        rollback = Rollback(spike.step, spike.kl, spike.reward, spike.reason, beta, new_beta,
                            str(start.path) if start else None, start.step if start else 0, spike.kind,
                            spike.examples, stopped=stop)
        rollbacks.append(rollback)
        if stop:  # the restored state is the result: published by train_grpo, nothing trained on
            if run.main:  # with the steps' logs: a rerun after a kill publishes it again without training
                write_json(run.out / STATE_FILE, {"beta": beta, "rollbacks": [r.to_dict() for r in rollbacks],
                                                  "stopped": {"global_step": trainer.state.global_step,
                                                              "log_history": trainer.state.log_history}})
                _log_rollback(rollback, rollbacks)
            run.barrier()
            return trainer, beta
        run.barrier()  # every rank has chosen `start` before anything is deleted
        if run.main:
            remove_after(run.run_dir, rollback.restored_step)
            write_json(run.out / STATE_FILE, {"beta": new_beta, "rollbacks": [r.to_dict() for r in rollbacks]})
            _log_rollback(rollback, rollbacks)
        run.barrier()
        detector.forget_after(rollback.restored_step)
        if hack:
            hack.forget_after(rollback.restored_step)
        beta = new_beta
        del trainer
        gc.collect()


def _rollout_speed(stats: dict) -> dict | None:
    """The rollouts' generation speed (transformers; None where vLLM generated or nothing was sampled here)."""
    if not stats or not stats.get("sequences"):
        return None
    seconds = stats["seconds"]
    return {"sequences": stats["sequences"], "new_tokens": stats["new_tokens"], "seconds": round(seconds, 2),
            "tokens_per_s": round(stats["new_tokens"] / seconds, 1) if seconds > 0 else None}


def _publish_restored(stopped: Rollback, final: Path, model_dir: Path) -> None:
    """The model a stopping trip restored, published as the final model: its checkpoint's, or a copy of the initial
    model when no good step had a checkpoint."""
    if stopped.checkpoint:
        publish_checkpoint_model(Path(stopped.checkpoint), final, model_dir)
        return
    tmp = temp_dir_for(final)
    shutil.copytree(model_dir, tmp)
    publish_dir(tmp, final)


def _protected_step(run_dir: Path, detector: SpikeDetector, hack: HackMonitor | None = None) -> list[int]:
    """The checkpoints a rollback would restore if the next step were bad (KL spike, or a suspected hack):
    pruning must keep them."""
    goods = [last_good_step(detector.last_ok_step + 1)]
    if hack is not None and hack.protected_step() is not None:
        goods.append(hack.protected_step())
    found = [newest_at_or_before(run_dir, g) for g in goods]
    return [c.step for c in found if c]


def _load_state(out: Path) -> dict | None:
    path = out / STATE_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _log_history(ckpt: Checkpoint) -> list[dict]:
    return json.loads((ckpt.path / "trainer_state.json").read_text(encoding="utf-8"))["log_history"]


def _save_final(trainer, final: Path, run: _Run) -> None:
    tmp = temp_dir_for(final) if run.main else final.with_name(f".{final.name}.tmp")
    run.barrier()
    if run.settings.lora is not None:
        if run.main:  # a plain HF folder, loadable without peft
            trainer.model.merge_and_unload().save_pretrained(tmp)
            trainer.processing_class.save_pretrained(tmp)
    else:
        trainer.save_model(str(tmp))  # on every rank: ZeRO-3 gathers the shards; only the main process writes
    if run.main:
        publish_dir(tmp, final)
    run.barrier()


def _log_rollback(rollback: Rollback, rollbacks: list[Rollback]) -> None:
    if (mlflow := active_mlflow()) is None:
        return
    mlflow.log_dict({"rollbacks": [r.to_dict() for r in rollbacks]}, "rollbacks.json")
    if rollback.kind == "reward_hacking":
        mlflow.set_tag("rubricrl.reward_hacking", rollback.reason)
        mlflow.log_dict({"step": rollback.step, "reason": rollback.reason, "examples": rollback.examples},
                        f"reward_hacking/step_{rollback.step:06d}.json")
    mlflow.set_tag("rubricrl.rollbacks", str(len(rollbacks)))
    if rollback.kl is not None:
        mlflow.log_metric("rollback/kl", rollback.kl, step=rollback.step)
    mlflow.log_metric("rollback/restored_step", rollback.restored_step, step=rollback.step)
    mlflow.log_metric("beta", rollback.new_beta, step=rollback.restored_step)
