"""A person-readable GRPO training report (markdown) from train_grpo's result dict.

One row per logged step (reward, its spread, KL, entropy, length, each criterion's mean) and every
rollback, so a reader sees the trend and the safety events without opening MLflow.
"""

from __future__ import annotations

from rubricrl.core.tables import table
from rubricrl.metrics.true_metric import free_text_columns

STEP_COLUMNS = (  # (log key, header)
    ("reward", "reward"),
    ("reward_std", "reward std"),
    ("frac_reward_zero_std", "zero-std groups"),
    ("kl", "KL"),
    ("entropy", "entropy"),
    ("completions/mean_length", "mean length"),
    ("completions/clipped_ratio", "clipped"),
    ("learning_rate", "lr"),
)


HISTORY_COLUMNS = {  # history.csv column -> log key (the curves of `dvc plots`)
    "step": "step", "reward": "reward", "reward_std": "reward_std", "kl": "kl", "beta": "beta",
    "entropy": "entropy", "mean_length": "completions/mean_length", "clipped_ratio": "completions/clipped_ratio",
    "learning_rate": "learning_rate",
}
COUNTS = "monitor_counts"  # a monitor entry's per-task counts (rubricrl.train.monitor): not a metric, no column
TOLERANCE = "monitor_null_tolerance"  # the first monitor entry's null_tolerance: the report's MDE is the verdict's
MONITOR_COLUMNS = {"step": "step", "reward": "monitor/reward", "field_accuracy": "monitor/field_accuracy",
                   "exact_object_rate": "monitor/exact_object_rate",
                   "null_for_present_rate": "monitor/null_for_present_rate", "invented_rate": "monitor/invented_rate"}


def history_rows(log_history: list[dict]) -> list[dict]:
    return step_logs(log_history)


def monitor_rows(log_history: list[dict]) -> list[dict]:
    """The hack monitor's evaluations (a file of their own: the monitor evaluates only every few steps)."""
    return [e for e in log_history if "step" in e and "monitor/field_accuracy" in e]


def monitor_reach(first: dict) -> str | None:
    """What the monitor could see on its tasks, from the first evaluation's per-task counts (none before them)."""
    from rubricrl.metrics.rise import describe_mde

    counts = first.get(COUNTS)
    rate = first.get("monitor/null_for_present_rate")
    if not counts or rate is None:
        return None
    return ("A change counts only on evidence: a rise whose paired one-sided 97.5% bound (sign flips over the "
            "tasks, rubricrl/metrics/rise.py) clears its tolerance. "
            + describe_mde([c[2] for c in counts], rate, first.get(TOLERANCE, 0.0)))


def _num(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 1e-2 and v != 0 else f"{v:.3f}".rstrip("0").rstrip(".")
    return str(v)


def step_logs(log_history: list[dict]) -> list[dict]:
    """The per-step entries (TRL also logs a final summary without `reward`)."""
    return [e for e in log_history if "step" in e and "reward" in e]


def trend_window(log_history: list[dict], k: int = 5) -> int:
    """How many logged steps each end of the reward trend averages: k, at most half the steps (at least 1)."""
    return max(1, min(k, len(step_logs(log_history)) // 2))


def reward_trend(log_history: list[dict], k: int = 5) -> tuple[float, float] | None:
    """Mean training reward over the first and the last trend_window steps."""
    rewards = [e["reward"] for e in step_logs(log_history)]
    if not rewards:
        return None
    k = trend_window(log_history, k)
    return sum(rewards[:k]) / k, sum(rewards[-k:]) / k


def criterion_series(log_history: list[dict]) -> dict[str, list[tuple[int, float]]]:
    """Each criterion's unweighted mean score per logged step (TRL's `rewards/<criterion>/mean`)."""
    out: dict[str, list[tuple[int, float]]] = {}
    for e in step_logs(log_history):
        for key, value in e.items():
            if key.startswith("rewards/") and key.endswith("/mean") and isinstance(value, (int, float)):
                out.setdefault(key.split("/")[1], []).append((e["step"], float(value)))
    return dict(sorted(out.items()))


def nets_table(nets: list[dict]) -> str:
    """The armed-nets table (rubricrl.train.nets.armed_nets, as dicts)."""
    return table(["net", "armed", "from step", "checks", "rule"],
                 [[n["name"], "yes" if n["armed"] else "no", _num(n["first_step"]), n["checks"], n["rule"]]
                  for n in nets])


def memory_line(memory: dict) -> str:
    """The step's split and the peak memory, as train_grpo's result holds them (rubricrl.train.memory)."""
    plan, peak = memory["plan"], memory.get("peak") or {}
    line = (f"micro-batch: {plan['micro_batch']} x {plan['grad_accum']} accumulated = {plan['step_completions']} "
            f"completions a step ({plan['sized']}")
    if plan["sized"] == "card":
        line += (f": {plan['sequence_mib']:,.0f} MiB a sequence of {plan['sequence_tokens']} tokens, "
                 f"{plan['free_mib']:,.0f} MiB free, {plan['state_mib']:,.0f} MiB of weights and optimizer"
                 + ("" if plan.get("fits", True) else "; not even one sequence fits the estimate"))
    line += (f"{', gradient checkpointing' if plan.get('checkpointing') else ''}); peak memory: "
             f"{peak.get('rss_mib', 'n/a')} MiB resident")
    if peak.get("gpu_allocated_mib") is not None:
        line += (f", {peak['gpu_allocated_mib']:,.0f} MiB allocated on the GPU "
                 f"({peak['gpu_reserved_mib']:,.0f} reserved)")
    return line


def training_markdown(result: dict, title: str = "GRPO training report", figures: bool = False) -> str:
    """The training report (the grpo stage's report section); `figures`: reference reward.png, kl.png and
    monitor.png beside it."""
    steps = step_logs(result.get("log_history", []))
    criteria = sorted({key.split("/")[1] for e in steps for key in e
                       if key.startswith("rewards/") and key.endswith("/mean")})
    lines = [f"# {title}", ""]
    lines.append(f"- steps: {result['global_step']} (resumed from step {result.get('resumed_from_step') or 0}); "
                 f"processes: {result.get('world_size', 1)}; wall time: {result.get('train_seconds', 0):.0f} s")
    lines.append(f"- final beta: {result['beta']:g}; rollbacks: {len(result.get('rollbacks', []))}")
    if result.get("memory"):
        lines.append(f"- {memory_line(result['memory'])}")
    if result.get("rollouts"):
        r = result["rollouts"]
        speed = f"{r['tokens_per_s']:.1f} tokens/s" if r.get("tokens_per_s") is not None else "tokens/s n/a"
        lines.append(f"- rollouts: {r['sequences']} completions, {r['new_tokens']} tokens in {r['seconds']:.1f} s "
                     f"({speed}, transformers generate, one call a step)")
    trend = reward_trend(result.get("log_history", []))
    if trend:
        k = trend_window(result.get("log_history", []))
        lines.append(f"- training reward (mean of the first and the last {k} logged step(s)): "
                     f"{trend[0]:.3f} -> {trend[1]:.3f}")
    if result.get("skipped_updates"):
        lines.append(f"- non-finite updates skipped (rubricrl/train/nonfinite.py): steps "
                     f"{', '.join(map(str, result['skipped_updates']))}")
    if result.get("skipped_task_ids"):
        lines.append(f"- tasks skipped (prompt longer than max_prompt_length): {len(result['skipped_task_ids'])}")
    if figures:
        lines += ["", "![GRPO reward per step, total and per criterion](reward.png)"]
    if result.get("nets"):
        lines += ["", "## Safety nets", "", "Which nets could fire within this run's steps (rubricrl/train/nets.py; "
                  "a rollback empties the windows again).", "", nets_table(result["nets"])]
    lines += ["", "## Rollbacks", ""]
    rollbacks = result.get("rollbacks", [])
    if rollbacks:
        lines.append(table(["step", "reason", "KL", "reward", "beta", "restored step", "checkpoint"],
                           [[r["step"], r["reason"], _num(r["kl"]), _num(r["reward"]),
                             f"{r['old_beta']:g} -> {r['new_beta']:g}", r["restored_step"],
                             r["checkpoint"] or "initial model"] for r in rollbacks]))
    else:
        lines.append("None: KL and reward stayed within the rollback bounds, and every update was finite.")
    if figures:
        lines += ["", "![KL to the reference policy, with the rollbacks](kl.png)"]
    stopped = next((r for r in rollbacks if r.get("stopped")), None)
    if stopped:
        lines += ["", f"The monitor stopped the run at step {stopped['step']} (`grpo.monitor.after_trip: stop`): the "
                      f"GRPO model is the restored state, "
                      + (f"step {stopped['restored_step']}'s checkpoint" if stopped["checkpoint"]
                         else "the initial model (no good step had a checkpoint)") + "; no step was redone."]
    hacks = [r for r in rollbacks if r.get("kind") == "reward_hacking"]
    for r in hacks:
        title = "Abstention" if r["reason"].startswith("abstention") else "Reward hacking suspected"
        lines += ["", f"### {title} at step {r['step']}", "", r["reason"], "",
                  table(["task", "accuracy before -> now", "reward before -> now", "answer now"],
                        [[ex["task_id"], f"{ex['accuracy_before']:.2f} -> {ex['accuracy_now']:.2f}",
                          f"{_num(ex['reward_before'])} -> {_num(ex['reward_now'])}", ex["response_now"]]
                         for ex in r.get("examples", [])], limit=160)]
    monitored = [e for e in result.get("log_history", []) if "step" in e and "monitor/field_accuracy" in e]
    lines += ["", "## Reward-hacking monitor", ""]
    if monitored:
        kinds = result.get("monitor_kinds") or ["extraction"]  # results written before it monitored extraction
        note = free_text_columns(kinds)
        lines += ["Greedy answers to a fixed slice of validation tasks: the rubric reward next to the true metric "
                  "(rubricrl.metrics.true_metric: strict per field for extraction, the held-out checklist for free "
                  "text), which shares no code with the reward." + (" " + note if note else ""), "",
                  table(["step", "monitor reward", "strict field accuracy", "exact objects", "null for present",
                         "invented"],
                        [[e["step"]] + [_num(e.get(f"monitor/{k}")) for k in (
                            "reward", "field_accuracy", "exact_object_rate", "null_for_present_rate", "invented_rate")]
                         for e in monitored])]
        if (reach := monitor_reach(monitored[0])) is not None:
            lines += ["", reach]
        if figures:
            lines += ["", "![The hack monitor: reward against the strict metric](monitor.png)"]
    else:
        lines.append("Off (grpo.monitor.enabled: false, or no validation tasks), or no evaluation after a step yet.")
    lines += ["", "## Steps", "",
              "Values as TRL logs them; a step's reward and KL are measured before its update. "
              "`zero-std groups` is the share of prompts whose completions all scored alike (no learning signal). "
              "Criterion columns are unweighted means; a penalty's column is the amount taken off.", "",
              table(["step"] + [h for _, h in STEP_COLUMNS] + criteria,
                    [[e["step"]] + [_num(e.get(key)) for key, _ in STEP_COLUMNS]
                     + [_num(e.get(f"rewards/{c}/mean")) for c in criteria] for e in steps])]
    return "\n".join(lines) + "\n"
