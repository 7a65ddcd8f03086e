"""GRPO's learning curve on the default's data and model: does rubric RL beat SFT, at which settings, how fast?

    python benchmarks/grpo_curve.py                                   # after `make run`: every named setting, 12 steps
    python benchmarks/grpo_curve.py --settings default lr2e-5 --steps 12 --eval-every 4
    python benchmarks/grpo_curve.py --smoke --out /tmp/curve          # a tiny random model: the code path only

The free-text family: `make run PROFILE=configs/free_text.yaml` (or its data, sft and rubric stages), then the same
command; the true metric is then each task's checklist (rubricrl.metrics.true_metric), its misses facts not stated.

Each setting (SETTINGS: an overlay of params.yaml's grpo section, with RUBRICRL_PARAMS_OVERLAY's overlays as every
stage reads it) trains GRPO from the SFT model with the stage's training entry (rubricrl.train.grpo.train_grpo) on
the stage's tasks and the calibrated rubric (outputs/rubric/rubric.yaml), the hack monitor off (the curve is what
the policy does when nothing stops it), a checkpoint every --eval-every steps. Each checkpoint and the SFT model
answer the eval's test slice greedily (eval.max_per_part a part, both parts: in-domain and held-out domains), and
each is compared with SFT by the paired differences the task gate uses (rubricrl.metrics.paired: strict field
accuracy per field, clustered by task, pooled and per part; null-for-present per stated value), with the mean of
each rubric criterion on those answers beside it (what the policy optimised, where the true metric did not move).
Every step's wall time is split into the rollouts' generation (the shared-prefill wrapper's count) and the rest
(scoring, the forward and backward passes, the optimizer).

Written to --out: curve.json and curve.md (settings x steps x parts with intervals, the step profile).
Time: SmolLM2 on 2 CPU cores ~45-100 s a step and ~1 minute an evaluation of 40 tasks, so three settings of 12
steps evaluated every 6 take 30-60 minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from transformers import TrainerCallback  # noqa: E402

# name -> grpo overlay. The default as it ships; the learning rate the hackable benchmark saw move behaviour within
# 3 steps (2e-5); that rate with twice the KL penalty; more prompts a step, fewer completions each (4 x 2 for 2 x 4).
SETTINGS = {
    "default": {},
    "lr2e-5": {"learning_rate": 2e-5},
    "lr2e-5_beta0.04": {"learning_rate": 2e-5, "beta": 0.04},
    "lr2e-5_4x2": {"learning_rate": 2e-5, "num_generations": 2, "per_device_batch_size": 2, "grad_accum": 4},
    "lr1e-5_bf16": {"learning_rate": 1e-5, "precision": "bf16"},
    "lr2e-5_gdpo": {"learning_rate": 2e-5, "multi_objective_aggregation": "normalize_then_sum"},
    "lr1e-5": {"learning_rate": 1e-5},
    "lr1e-5_gdpo": {"learning_rate": 1e-5, "multi_objective_aggregation": "normalize_then_sum"},
    "lr1e-5_4x2": {"learning_rate": 1e-5, "num_generations": 2, "per_device_batch_size": 2, "grad_accum": 4},
}
SMOKE = {"num_generations": 2, "per_device_batch_size": 2, "grad_accum": 1, "step_completions": None,
         "max_completion_length": 8, "max_prompt_length": 4096, "learning_rate": 1e-3, "device": "cpu",
         "precision": "fp32", "accelerate_config": None, "deepspeed": None, "use_vllm": False, "lora": None}


class StepClock(TrainerCallback):
    """Wall seconds of every optimizer step."""

    def __init__(self):
        self.seconds: list[float] = []
        self._t = None

    def on_step_begin(self, args, state, control, **kwargs):
        self._t = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        if self._t is not None:
            self.seconds.append(time.perf_counter() - self._t)


def answer(model_dir, tasks, scorer, cfg) -> dict:
    """Greedy answers of one model on the test slice: per task the strict counts and the rubric's criterion scores."""
    from rubricrl.inference.generate import generate_with_stats
    from rubricrl.metrics.true_metric import true_counts

    responses, stats = generate_with_stats(model_dir, tasks, batch_size=cfg.batch_size,
                                           max_new_tokens=cfg.max_new_tokens, desc=f"curve {Path(model_dir).name}")
    results = scorer.score_batch(list(zip(tasks, responses)))
    rows = []
    for t, r, res in zip(tasks, responses, results):
        c = true_counts(t, r)  # strict field accuracy for extraction, the checklist for free text
        rows.append({"id": t.id, "right": c.right, "fields": c.fields, "nulls": c.null_for_present,
                     "present": c.present, "total": res.total, "criteria": {x.id: x.score for x in res.components}})
    return {"rows": rows, "seconds": round(stats.seconds, 1)}


def compare(now: dict, sft: dict, parts: dict[str, str]) -> dict:
    """Paired differences against SFT on the same tasks: strict field accuracy pooled and per part, null-for-present
    pooled; the mean reward and each criterion's mean (not paired: a description of what moved)."""
    from rubricrl.metrics.paired import paired_difference

    out = {}
    for part in ("all", *sorted(set(parts.values()))):
        pick = [i for i, r in enumerate(now["rows"]) if part == "all" or parts[r["id"]] == part]
        a, b = [now["rows"][i] for i in pick], [sft["rows"][i] for i in pick]
        acc = paired_difference([r["right"] for r in a], [r["right"] for r in b], [r["fields"] for r in a],
                                n_resamples=500)
        out[part] = {k: acc[k] for k in ("a", "b", "diff", "ci", "n")}
    nulls = paired_difference([r["nulls"] for r in now["rows"]], [r["nulls"] for r in sft["rows"]],
                              [r["present"] for r in now["rows"]], n_resamples=500)
    out["null_for_present"] = {k: nulls[k] for k in ("a", "b", "diff", "ci", "n")}
    names = sorted({k for r in now["rows"] for k in r["criteria"]})
    out["reward"] = round(sum(r["total"] for r in now["rows"]) / len(now["rows"]), 3)
    out["criteria"] = {k: round(sum(r["criteria"].get(k, 0.0) for r in now["rows"]) / len(now["rows"]), 3)
                       for k in names}
    return out


def train_setting(name, overlay, args, params, model, tasks, reward, work):
    from rubricrl.config import GRPOSettings, merge
    from rubricrl.train.grpo import train_grpo

    cfg = merge(params.grpo.model_dump(), SMOKE) if args.smoke else params.grpo.model_dump()
    settings = GRPOSettings.model_validate(merge(cfg, {
        **overlay, "max_steps": args.steps, "save_steps": args.eval_every, "save_total_limit": None,
        "monitor": {"enabled": False}}))
    clock = StepClock()
    started = time.perf_counter()
    result = train_grpo(model, tasks, work / name, settings, reward, callbacks=[clock], resume=False)
    return settings, result, clock.seconds, time.perf_counter() - started


def _step_completions(s) -> int:
    return s.step_completions or s.per_device_batch_size * s.grad_accum  # set, or both numbers (no auto on a CPU)


def run(args) -> dict:
    from rubricrl.config import load_params
    from rubricrl.core.atomic import write_json, write_text
    from rubricrl.core.errors import TrainingError
    from rubricrl.core.taskfile import FREE_TEXT, load_tasks
    from rubricrl.evaluate.task import task_part, test_slice
    from rubricrl.reward.functions import RubricReward
    from rubricrl.reward.load import load_rubric
    from rubricrl.reward.scoring import RubricScorer
    from rubricrl.stages.paths import DATA, RUBRIC
    from rubricrl.train.checkpoints import publish_checkpoint_model
    from rubricrl.train.grpo import STATE_FILE
    from rubricrl.train.section import criterion_series

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.run_dir or out / "run")
    params = load_params(ROOT / "params.yaml")
    model = Path(args.model)
    if args.smoke:
        from rubricrl.data.prepare import prepare_splits
        from rubricrl.inference.models import build_tiny_model

        model = build_tiny_model(work / "tiny_model")
        splits = prepare_splits(params.data)
        train, test = splits["train"][:8], test_slice(splits["test"], 2)
        rubric = load_rubric("json_extraction")
    else:
        if not (model / "config.json").is_file():
            sys.exit(f"grpo_curve: {model}: not an HF model folder (run `make run` first, or pass --model)")
        train = load_tasks(DATA.train)[: params.grpo.max_tasks]
        test = test_slice(load_tasks(DATA.test), args.per_part or params.eval.max_per_part)
        rubric = load_rubric(args.rubric or RUBRIC.rubric)
    scorer = RubricScorer(rubric, judge_override=params.scoring.judge_config(), policy_model=params.policy.model)
    reward = RubricReward(scorer, {t.id: t for t in train})
    parts = {t.id: task_part(t) for t in test}
    cfg = params.eval.model_copy(update={"max_new_tokens": 8}) if args.smoke else params.eval
    sft = answer(model, test, scorer, cfg)
    free = any(t.kind == FREE_TEXT for t in test)
    curve = {"model": str(model), "metric": "checklist score" if free else "strict field accuracy",
             "misses": "facts not stated" if free else "null for present",
             "steps": args.steps, "eval_every": args.eval_every, "tasks": len(test),
             "parts": dict(sorted({p: sum(1 for v in parts.values() if v == p) for p in parts.values()}.items())),
             "sft": compare(sft, sft, parts), "settings": {}}
    for name in args.settings:
        try:
            settings, result, step_seconds, wall = train_setting(name, SETTINGS[name], args, params, model, train,
                                                                 reward, work)
        except TrainingError as err:  # the safety nets gave up (rollbacks spent): that is this setting's result
            state = json.loads((work / name / STATE_FILE).read_text()) if (work / name / STATE_FILE).is_file() else {}
            curve["settings"][name] = {"overlay": SETTINGS[name], "error": str(err),
                                       "rollbacks": [r["reason"] for r in state.get("rollbacks", [])], "points": {}}
            write_json(out / "curve.json", curve)
            write_text(out / "curve.md", markdown(curve))
            continue
        points = {}
        for step in range(args.eval_every, result["global_step"] + 1, args.eval_every):  # a stopped run: fewer
            ckpt = work / name / "checkpoints" / f"checkpoint-{step}"
            if step == result["global_step"] and not ckpt.is_dir():
                target = Path(result["model_dir"])
            elif not ckpt.is_dir():  # pruned or never written (a rollback redid the steps after it)
                continue
            else:
                target = work / name / f"model-{step}"
                publish_checkpoint_model(ckpt, target, model)
            points[step] = {**compare(answer(target, test, scorer, cfg), sft, parts)}
        rollouts = result.get("rollouts") or {}
        curve["settings"][name] = {
            "overlay": SETTINGS[name], "lr": settings.learning_rate, "beta": settings.beta,
            "prompts_x_completions": f"{_step_completions(settings) // settings.num_generations} x "
                                     f"{settings.num_generations}",
            "precision": result["precision"], "loss_type": settings.loss_type,
            "aggregation": settings.multi_objective_aggregation, "global_step": result["global_step"],
            "rollbacks": [r["reason"] for r in result["rollbacks"]], "wall_seconds": round(wall, 1),
            "step_seconds": [round(s, 1) for s in step_seconds], "generation_seconds": rollouts.get("seconds"),
            "rollout_tokens_per_s": rollouts.get("tokens_per_s"),
            "zero_std": [e.get("frac_reward_zero_std") for e in result["log_history"] if "reward" in e],
            "train_reward": [round(e["reward"], 3) for e in result["log_history"] if "reward" in e],
            "train_criteria": {k: [round(v, 3) for _, v in s] for k, s in criterion_series(result["log_history"]).items()},
            "points": points,
        }
        write_json(out / "curve.json", curve)  # after every setting: a kill keeps what was measured
        write_text(out / "curve.md", markdown(curve))
        if not args.keep_runs:  # measured: 4.7 GB a setting (a checkpoint with its optimizer every --eval-every)
            shutil.rmtree(work / name, ignore_errors=True)
    return curve


def _ci(row: dict) -> str:
    if row.get("diff") is None:
        return "n/a"
    ci = row.get("ci")
    return f"{row['diff']:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else f"{row['diff']:+.3f} [n/a]"


def markdown(curve: dict) -> str:
    from rubricrl.core.tables import table

    parts = list(curve["parts"])
    sft = curve["sft"]
    metric, misses = curve.get("metric", "strict field accuracy"), curve.get("misses", "null for present")
    lines = ["# GRPO learning curve against SFT", "",
             f"- model: `{curve['model']}`; {curve['steps']} steps a setting, evaluated every {curve['eval_every']} "
             f"on {curve['tasks']} test tasks ({', '.join(f'{p} {n}' for p, n in curve['parts'].items())}); the hack "
             f"monitor off", f"- SFT: {metric} {sft['all']['a']:.3f}, {misses} "
             f"{sft['null_for_present']['a']:.3f}, reward {sft['reward']:.3f}", "",
             "## GRPO - SFT by step (paired, 95% score interval)", ""]
    rows = []
    for name, s in curve["settings"].items():
        for step, p in s["points"].items():
            rows.append([name, step, _ci(p["all"]), *(_ci(p[part]) for part in parts), _ci(p["null_for_present"]),
                         p["reward"]])
    lines += [table(["setting", "step", f"{metric} (all)", *parts, misses, "reward"], rows), "",
              "## Settings and where a step's time goes", ""]
    rows = []
    for name, s in curve["settings"].items():
        if "error" in s:
            rows.append([name, *["-"] * 8, f"stopped: {s['error']}"])
            continue
        steps = s["step_seconds"]
        mean = sum(steps) / len(steps) if steps else None
        gen = s["generation_seconds"]
        share = f"{gen / sum(steps):.0%}" if gen and sum(steps) > 0 else "-"  # a tiny model rounds to 0 s
        zero = [z for z in s["zero_std"] if z is not None]
        rows.append([name, f"{s['lr']:g}", f"{s['beta']:g}", s["prompts_x_completions"], s["precision"],
                     f"{mean:.1f}" if mean else "-", share, f"{sum(zero) / len(zero):.2f}" if zero else "-",
                     f"{s['train_reward'][0]:.2f} -> {s['train_reward'][-1]:.2f}" if s["train_reward"] else "-",
                     "; ".join(s["rollbacks"]) or "none"])
    lines += [table(["setting", "lr", "beta", "prompts x completions", "precision", "s/step", "generation share",
                     "zero-std groups", "training reward", "rollbacks"], rows), "",
              "## Each criterion's mean on the test answers (what the policy optimised)", ""]
    names = sorted(sft["criteria"])
    rows = [["SFT", 0, *(sft["criteria"][k] for k in names)]]
    for name, s in curve["settings"].items():
        rows += [[name, step, *(p["criteria"].get(k) for k in names)] for step, p in s["points"].items()]
    lines.append(table(["setting", "step", *names], rows))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="the SFT model folder (default: the sft stage's output)")
    ap.add_argument("--rubric", default=None, help="the rubric (default: the rubric stage's calibrated rubric)")
    ap.add_argument("--settings", nargs="+", choices=sorted(SETTINGS), default=None,
                    help="named settings (default: default lr2e-5 lr2e-5_beta0.04)")
    ap.add_argument("--steps", type=int, default=None, help="GRPO steps a setting (default 12; --smoke 2)")
    ap.add_argument("--eval-every", type=int, default=None, help="evaluate every N steps (default 6; --smoke 2)")
    ap.add_argument("--per-part", type=int, default=None, help="test tasks a part (default: eval.max_per_part)")
    ap.add_argument("--out", default="outputs/benchmarks/grpo_curve", help="curve.json and curve.md")
    ap.add_argument("--run-dir", default=None, help="checkpoints and models (default: OUT/run)")
    ap.add_argument("--keep-runs", action="store_true",
                    help="keep each setting's checkpoints and models (~5 GB a setting); by default a setting's run "
                         "folder is removed once its points are measured")
    ap.add_argument("--smoke", action="store_true", help="a tiny random model, tiny sizes: the code path only")
    args = ap.parse_args(argv)
    from rubricrl.stages.paths import SFT

    args.model = args.model or SFT.model
    args.settings = args.settings or (["default", "lr2e-5"] if args.smoke else
                                      ["default", "lr2e-5", "lr2e-5_beta0.04"])
    args.steps = args.steps or (2 if args.smoke else 12)
    args.eval_every = args.eval_every or (2 if args.smoke else 6)
    if args.steps % args.eval_every:
        ap.error(f"--steps {args.steps} is not a multiple of --eval-every {args.eval_every}")
    curve = run(args)
    print(f"grpo_curve: {len(curve['settings'])} setting(s); {args.out}/curve.md", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
