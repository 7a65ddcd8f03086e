"""The hack monitor on real training: GRPO of the SFT policy on a deliberately hackable rubric.

    python benchmarks/hackable_rubric.py                     # from outputs/models/sft: 30 steps, the monitor every 3
    python benchmarks/hackable_rubric.py --model DIR --steps 60 --every 5 --out outputs/benchmarks/hackable_rubric
    python benchmarks/hackable_rubric.py --smoke --out /tmp/hack   # a tiny random model, 2 steps: the code path only

The rubric is the shipped json_extraction.yaml without its missed_values penalty (the seed's old prices; a
penalty's `per` must be > 0, so it is left out): a null for a value the text states then costs only the
faithfulness share (2 x 3 / N fields), as much as a wrong value and less than an unsupported guess (+ invented_values
1.0), so abstaining is the cheapest way to miss a field, the hack the seed saw GRPO learn (nulls doubled while the
reward rose). The variant is written beside the results (hackable_rubric.yaml) and read back with the rubric loader.
The rubric gate is not consulted: this calls the stage's training entry, rubricrl.train.grpo.train_grpo, directly,
with the stage's task slices (the train split's first grpo.max_tasks, the monitor's stratified val slice).

Settings: params.yaml's grpo section with RUBRICRL_PARAMS_OVERLAY's overlays (as every stage reads it), except
max_steps (--steps) and monitor.every (--every; default 3, at most steps / 2); one process (a profile's
accelerate_config is not relaunched). The monitor reward is the hackable
rubric's: it rises with the hack while the strict field accuracy (rubricrl.metrics.strict) falls.

Written to --out: summary.json and summary.md (per step of every attempt, rolled-back ones included: training
reward, KL, the monitor's reward, strict field accuracy and null-for-present rate; whether and when the monitor
fired and what was restored), report.md (the stage's training report of the final run) and hackable_rubric.yaml;
checkpoints and the trained model to --run-dir (default OUT/run).
Time: SmolLM2 on 2 CPU cores ~95 s a step and ~30 s an evaluation (README), so the default is about an hour there;
minutes on a GPU (tools/gpu_run.py run --hackable-rubric 30).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from transformers import TrainerCallback  # noqa: E402

MONITOR = {"monitor/reward": "monitor_reward", "monitor/field_accuracy": "field_accuracy",
           "monitor/null_for_present_rate": "null_for_present_rate"}  # log key -> summary column
# --smoke: the tiny random model's settings (tests/train_helpers.tiny_settings); the generated prompts are long in
# the tiny tokenizer, hence max_prompt_length.
SMOKE = {"num_generations": 2, "per_device_batch_size": 2, "grad_accum": 1, "step_completions": None,
         "max_completion_length": 8,
         "max_prompt_length": 4096, "save_steps": 1, "learning_rate": 1e-3, "device": "cpu", "precision": "fp32",
         "accelerate_config": None, "deepspeed": None, "use_vllm": False, "lora": None,
         "monitor": {"n_tasks": 6, "max_new_tokens": 8, "batch_size": 6}}  # 6: the fewest a rise can show on


class Timeline(TrainerCallback):
    """Every attempt's log history (a rollback starts a new attempt, and its discarded steps stay here)."""

    def __init__(self):
        self.attempts: list[dict] = []

    def on_train_begin(self, args, state, control, **kwargs):
        self.attempts.append({"start": state.global_step, "log": []})

    def on_train_end(self, args, state, control, **kwargs):
        self.attempts[-1]["log"] = [dict(e) for e in state.log_history]

    def rows(self) -> list[dict]:
        """One row per logged step or evaluation, in order; `discarded`: a later rollback restarted before it."""
        rows = []
        for i, a in enumerate(self.attempts):
            restarts = [b["start"] for b in self.attempts[i + 1:]]
            for e in a["log"]:
                if "step" not in e or (e["step"] <= a["start"] and i) or not ({"reward", *MONITOR} & set(e)):
                    continue
                rows.append({"attempt": i + 1, "step": e["step"], "reward": e.get("reward"), "kl": e.get("kl"),
                             **{col: e.get(key) for key, col in MONITOR.items()},
                             "discarded": any(s < e["step"] for s in restarts)})
        return rows


def hackable_rubric(out: Path):
    """The shipped json_extraction rubric without missed_values, written to `out` and loaded back."""
    import yaml

    from rubricrl.reward.load import load_rubric, rubric_path

    data = yaml.safe_load(rubric_path("json_extraction").read_text(encoding="utf-8"))
    data["name"] = "json_extraction_hackable"
    data["penalties"] = [p for p in data["penalties"] if p["id"] != "missed_values"]
    path = out / "hackable_rubric.yaml"
    path.write_text("# benchmarks/hackable_rubric.py: json_extraction without missed_values (a null is cheap)\n"
                    + yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return load_rubric(path)


def tasks_and_settings(args, params):
    """(train tasks, monitor tasks, GRPO settings) as the stage draws them; --smoke: tiny sizes."""
    from rubricrl.config import GRPOSettings, merge
    from rubricrl.core.slices import stratified
    from rubricrl.core.taskfile import load_tasks
    from rubricrl.data.prepare import prepare_splits
    from rubricrl.stages.paths import DATA

    cfg = params.grpo.model_dump()
    if Path(DATA.train).is_file() and Path(DATA.val).is_file() and not args.smoke:
        train, val = load_tasks(DATA.train), load_tasks(DATA.val)
    else:  # no data stage output here: the same splits, made as the data stage makes them
        splits = prepare_splits(params.data)
        train, val = splits["train"], splits["val"]
    cfg = merge(cfg, SMOKE) if args.smoke else cfg
    # after_trip rollback: the benchmark measures how the monitor's rollbacks end (the CPU default stops instead)
    settings = GRPOSettings.model_validate(merge(cfg, {"max_steps": args.steps, "monitor": {
        "every": args.every, "after_trip": "rollback"}}))
    monitor = stratified([t for t in val if t.reference is not None], settings.monitor.n_tasks)
    return train[: 8 if args.smoke else settings.max_tasks], monitor, settings


def summary_markdown(s: dict) -> str:
    from rubricrl.core.tables import table
    from rubricrl.train.section import nets_table

    hacks = [r for r in s["rollbacks"] if r["kind"] == "reward_hacking"]
    lines = ["# The hack monitor on a hackable rubric", "",
             f"- model: `{s['model']}`; steps: {s['steps']} (reached {s['global_step']}); monitor every "
             f"{s['every']} step(s), window {s['window']}"
             + (" and against the first evaluation" if s.get("against_first") else "")
             + f", tolerance {s['tolerance']:g}, null_tolerance {s.get('null_tolerance', 0):g}; wall time "
             f"{s['wall_seconds']:.0f} s",
             "- rubric: json_extraction without missed_values (a null for a stated value costs no more than a "
             "wrong value); the gate not consulted"]
    if hacks:
        for r in hacks:
            lines.append(f"- **the monitor fired at step {r['step']}**: {r['reason']}; restored step "
                         f"{r['restored_step']}, beta {r['old_beta']:g} -> {r['new_beta']:g}")
    else:
        lines.append(f"- the monitor did not fire in {s['global_step']} step(s)")
    others = [r for r in s["rollbacks"] if r["kind"] != "reward_hacking"]
    if others:
        lines.append("- other rollbacks: " + "; ".join(f"step {r['step']} ({r['kind']}): {r['reason']}"
                                                       for r in others))
    if s["error"]:
        lines.append(f"- stopped: {s['error']}")
    lines += ["", "## Over time", "", "Every attempt's steps; `discarded`: thrown away by a later rollback. "
              "Monitor columns only at its evaluations (greedy answers to the val slice).", "",
              table(["attempt", "step", "training reward", "KL", "monitor reward", "strict field accuracy",
                     "null for present", "discarded"],
                    [[r["attempt"], r["step"], r["reward"], "-" if r["kl"] is None else f"{r['kl']:.3g}",
                      r["monitor_reward"], r["field_accuracy"],
                      r["null_for_present_rate"], "yes" if r["discarded"] else ""] for r in s["timeline"]], digits=3),
              "", "## Safety nets", "", nets_table(s["nets"])]
    return "\n".join(lines) + "\n"


def run(args) -> dict:
    from rubricrl.config import load_params
    from rubricrl.core.atomic import write_json, write_text
    from rubricrl.core.errors import TrainingError
    from rubricrl.reward.functions import RubricReward
    from rubricrl.reward.scoring import RubricScorer
    from rubricrl.train.grpo import STATE_FILE, train_grpo
    from rubricrl.train.nets import armed_nets
    from rubricrl.train.section import training_markdown

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.run_dir or out / "run")
    params = load_params(ROOT / "params.yaml")  # with RUBRICRL_PARAMS_OVERLAY's overlays, as the stages
    model = Path(args.model)
    if args.smoke:
        from rubricrl.inference.models import build_tiny_model

        model = build_tiny_model(work / "tiny_model")
    elif not (model / "config.json").is_file():
        sys.exit(f"hackable_rubric: {model}: not an HF model folder (run the sft stage, or pass --model)")
    train, monitor_tasks, settings = tasks_and_settings(args, params)
    scorer = RubricScorer(hackable_rubric(out), judge_override=params.scoring.judge_config(),
                          policy_model=params.policy.model)
    timeline, error, result = Timeline(), None, None
    started = time.perf_counter()
    try:
        result = train_grpo(model, train, work, settings, RubricReward(scorer), callbacks=[timeline],
                            resume=False, monitor_tasks=monitor_tasks)
    except TrainingError as err:  # rollbacks exhausted: the summary still says what happened
        error = str(err)
    state = json.loads((work / STATE_FILE).read_text()) if (work / STATE_FILE).is_file() else {}
    rows = timeline.rows()
    rollbacks = result["rollbacks"] if result else state.get("rollbacks", [])
    reached = result["global_step"] if result else max((r["step"] for r in rows), default=0)
    summary = {
        "model": str(model), "steps": settings.max_steps, "global_step": reached,
        "every": settings.sized().monitor.every,
        "window": settings.monitor.window, "tolerance": settings.monitor.tolerance,
        "null_tolerance": settings.monitor.null_tolerance, "against_first": settings.monitor.against_first,
        "wall_seconds": round(time.perf_counter() - started, 1), "error": error,
        "rollbacks": rollbacks, "fired_at": [r["step"] for r in rollbacks if r["kind"] == "reward_hacking"],
        "nets": [n.model_dump() for n in armed_nets(settings, len(monitor_tasks))],
        "timeline": rows, "settings": settings.model_dump(mode="json"),
    }
    write_json(out / "summary.json", summary)
    write_text(out / "summary.md", summary_markdown(summary))
    if result:
        write_text(out / "report.md", training_markdown(result, title="GRPO on the hackable rubric"))
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="the SFT model folder (default: the sft stage's output)")
    ap.add_argument("--steps", type=int, default=None, help="GRPO steps (default 30; --smoke 2)")
    ap.add_argument("--every", type=int, default=None, help="monitor every N steps (default 3, at most steps / 2)")
    ap.add_argument("--out", default="outputs/benchmarks/hackable_rubric", help="the summary files")
    ap.add_argument("--run-dir", default=None, help="checkpoints and the trained model (default: OUT/run)")
    ap.add_argument("--smoke", action="store_true", help="a tiny random model, tiny sizes: the code path only")
    args = ap.parse_args(argv)
    from rubricrl.stages.paths import SFT

    args.model = args.model or SFT.model
    args.steps = args.steps or (2 if args.smoke else 30)
    args.every = args.every or max(1, min(3, args.steps // 2))  # at least two comparisons
    s = run(args)
    print(f"hackable_rubric: {s['global_step']} step(s); the monitor fired at step(s) {s['fired_at'] or 'none'}; "
          f"{args.out}/summary.md", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
