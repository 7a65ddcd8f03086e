"""DVC stage `grpo`: GRPO on the calibrated rubric, after the rubric gate; resumes after a crash. Its section of
the run report is the training report (outputs/grpo/report.md) with the reward, KL and hack-monitor plots.

One process (`python -m rubricrl.stages.grpo`) or several, with the same code:
`accelerate launch --config_file configs/accelerate_zero3.yaml -m rubricrl.stages.grpo` on GPUs, or
`accelerate launch --multi_gpu --num_processes N -m rubricrl.stages.grpo` for N CPU processes (DDP over gloo;
accelerate's `--cpu --num_processes N` starts only one process without an MPI hostfile). Every rank
checks the gate and trains; only the main process touches the output folder and MLflow.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from contextlib import nullcontext
from pathlib import Path

from rubricrl import tracking
from rubricrl.calibrate.gate import check_gate
from rubricrl.config import GRPOSettings, Params, ScoringParams, load_params
from rubricrl.core.atomic import write_csv, write_json, write_text
from rubricrl.core.entry import stage_main
from rubricrl.core.resume import model_digest, tasks_digest
from rubricrl.core.slices import stratified
from rubricrl.core.taskfile import Task, load_tasks
from rubricrl.metrics.checklist_judge import checklist_panel
from rubricrl.reward.functions import RubricReward
from rubricrl.reward.load import load_rubric
from rubricrl.reward.scoring import RubricScorer
from rubricrl.stages.base import Result
from rubricrl.stages.launch import rank_run, relaunch_under_accelerate
from rubricrl.stages.paths import DATA, POLICIES, RUBRIC
from rubricrl.stages.paths import GRPO as PATHS
from rubricrl.train.nets import Net

OUT = Path(PATHS.out)


class GRPOResult(Result):
    """metrics/grpo.json."""

    steps: int
    resumed_from_step: int
    rollbacks: int
    final_beta: float
    hack_rollbacks: int
    wall_seconds: float
    reward_first: float | None  # mean training reward of the first trend window of logged steps
    reward_last: float | None  # ... and of the last (rubricrl.train.section.reward_trend)
    learning_rate: float | None = None  # as trained (an overlay may differ from params.yaml)
    beta: float | None = None
    processes: int = 1  # training processes (accelerate)
    precision: str = "fp32"  # as trained (grpo.precision resolved)
    skipped_updates: list[int] = []  # steps whose non-finite update was skipped (rubricrl/train/nonfinite.py)
    judge_calls: int = 0  # HTTP calls to the openai judge endpoint, every process (0: no remote judge; cache hits)
    nets: list[Net] = []  # each safety net: armed, from which step, how many checks (rubricrl/train/nets.py)
    micro_batch: int | None = None  # completions a micro-step as trained (grpo.per_device_batch_size resolved)
    grad_accum: int | None = None  # micro-steps a step as trained
    peak_memory_mib: dict = {}  # the process's peak: rss_mib, and gpu_allocated_mib / gpu_reserved_mib on a GPU
    rollout_tokens_per_s: float | None = None  # the rollouts' sampling speed (transformers generate; None under vLLM)


def fingerprint(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def resume_stamp(cfg: GRPOSettings, scoring: ScoringParams, tasks: list[Task], monitor_tasks: list[Task],
                 model_dir: str | Path, rubric_text: str) -> tuple:
    """What GRPO's checkpoints are made of: the settings as this host trains with them (precision resolved, the
    accelerate config by content), the training and monitor tasks by content, the reward (the rubric and the judge
    that scoring.judge puts in its place) and the starting model (weights, tokenizer, template)."""
    from rubricrl.train.trainer_args import stamp_settings

    return (stamp_settings(cfg), tasks_digest(tasks), tasks_digest(monitor_tasks), rubric_text,
            scoring.model_dump(mode="json"), model_digest(model_dir))


def run(params: Params) -> GRPOResult | None:
    """Train (every rank); the main process writes the outputs and returns the result, the others None."""
    from accelerate.utils import broadcast_object_list, gather_object

    from rubricrl.train.grpo import process_state, train_grpo
    from rubricrl.train.section import HISTORY_COLUMNS, MONITOR_COLUMNS, history_rows, monitor_rows, reward_trend

    cfg = params.grpo
    report = json.loads(Path(RUBRIC.report).read_text(encoding="utf-8"))
    # Every rank reads the same report, so a failed gate stops them all here, before any process group exists.
    overridden = check_gate(report, params.rubric, params.rubric.allow_gate_failures)
    tasks = load_tasks(DATA.train)[: cfg.max_tasks]
    # The hack monitor's fixed slice: validation tasks with gold answers, every domain in turn.
    monitor_tasks = stratified([t for t in load_tasks(DATA.val) if t.reference is not None], cfg.monitor.n_tasks)
    model_dir = POLICIES[cfg.start_from]
    rubric_text = Path(RUBRIC.rubric).read_text(encoding="utf-8")
    main_process = process_state(cfg).is_main_process
    resume = None
    if main_process:
        for fail in overridden:
            print(f"warning: training despite a failed rubric gate (rubric.allow_gate_failures): {fail}", file=sys.stderr)
        # Checkpoints of another configuration must never be resumed: start over when anything changed.
        stamp = fingerprint(*resume_stamp(cfg, params.scoring, tasks, monitor_tasks, model_dir, rubric_text))
        stamp_file = OUT / "fingerprint.json"
        resume = stamp_file.exists() and json.loads(stamp_file.read_text()).get("fingerprint") == stamp
        if not resume and OUT.exists():
            shutil.rmtree(OUT)
        write_json(stamp_file, {"fingerprint": stamp})
    # The main process decides; the others wait here until its folder work is done, then do the same.
    [resume] = broadcast_object_list([resume])
    scorer = RubricScorer(load_rubric(RUBRIC.rubric), judge_override=params.scoring.judge_config(),
                          policy_model=params.policy.model)
    reward = RubricReward(scorer, {t.id: t for t in tasks})
    # The hack monitor reads the free-text checklist through the judge panel (scoring.checklist_judge) when set.
    with rank_run(main_process, lambda: tracking.stage_run(params.tracking, "grpo", {"grpo": cfg.model_dump(mode="json")},
                                                           inputs=[DATA.train, RUBRIC.rubric])) as run, \
            (checklist_panel(params.scoring.checklist_judge, params.policy.model) or nullcontext()) as checklist_judge:
        if overridden:
            run.set_tag("rubric.gate_override", " | ".join(overridden))
        result = train_grpo(model_dir, tasks, OUT, cfg, reward, resume=resume, monitor_tasks=monitor_tasks,
                            checklist_judge=checklist_judge)
        judge_calls = sum(gather_object([sum(getattr(j, "calls", 0) for j in scorer.judges.values())]))
        if not main_process:
            return None
        trend = reward_trend(result["log_history"])
        out = GRPOResult(steps=result["global_step"], resumed_from_step=result["resumed_from_step"] or 0,
                         rollbacks=len(result["rollbacks"]), final_beta=result["beta"],
                         hack_rollbacks=sum(r.get("kind") == "reward_hacking" for r in result["rollbacks"]),
                         wall_seconds=round(result["train_seconds"], 1),
                         reward_first=round(trend[0], 4) if trend else None,
                         reward_last=round(trend[1], 4) if trend else None,
                         learning_rate=cfg.learning_rate, beta=cfg.beta, processes=result["world_size"],
                         precision=result["precision"], skipped_updates=result["skipped_updates"],
                         judge_calls=judge_calls, nets=result["nets"],
                         micro_batch=result["memory"]["plan"]["micro_batch"],
                         grad_accum=result["memory"]["plan"]["grad_accum"], peak_memory_mib=result["memory"]["peak"],
                         rollout_tokens_per_s=(result["rollouts"] or {}).get("tokens_per_s"))
        rows = history_rows(result["log_history"])
        criteria = sorted({k for e in rows for k in e if k.startswith("rewards/") and k.endswith("/mean")})
        write_csv(PATHS.history, rows, {**HISTORY_COLUMNS, **{k: k for k in criteria}})  # `dvc plots`
        write_json(PATHS.rollbacks, {"rollbacks": result["rollbacks"]})
        write_csv(PATHS.monitor, monitor_rows(result["log_history"]), MONITOR_COLUMNS)
        write_section(result, scorer.rubric)
        out.write(PATHS.result)
        run.log_metrics({f"grpo.{k}": v for k, v in out.model_dump().items() if isinstance(v, (int, float))}
                        | {"grpo.skipped_updates": len(out.skipped_updates)})
        run.set_tag("rubricrl.precision.grpo", out.precision)
        run.log_artifact(PATHS.section, "grpo")
    return out


def write_section(result: dict, rubric) -> None:
    """The training report with its three plots beside it (reward per criterion, KL, the hack monitor)."""
    from rubricrl.train.plots import plot_kl, plot_monitor, plot_reward
    from rubricrl.train.section import criterion_series, history_rows, monitor_rows, training_markdown

    history, rollbacks = history_rows(result["log_history"]), result["rollbacks"]
    kinds = {c.id: c.kind for c in rubric.criteria} | {p.id: "penalty" for p in rubric.penalties}
    plot_reward(history, criterion_series(result["log_history"]), kinds, rollbacks, OUT)
    plot_kl(history, rollbacks, OUT)
    plot_monitor(monitor_rows(result["log_history"]), rollbacks, OUT)
    write_text(PATHS.section, training_markdown(result, figures=True))


def main() -> None:
    params = load_params()
    relaunch_under_accelerate(params.grpo.accelerate_config, __spec__.name)
    run(params)


if __name__ == "__main__":
    stage_main(main)
