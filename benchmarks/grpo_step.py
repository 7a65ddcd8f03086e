"""GRPO step time of the stage against a bare TRL GRPOTrainer, side by side (goal: ratio at most 1.05).

    python benchmarks/grpo_step.py                                   # tiny random model, 4 steps, 2 repeats
    python benchmarks/grpo_step.py --model /tmp/models/base --steps 3 --repeats 1

Both paths train the same model on the same rows (rubricrl.train.data.grpo_rows over
generate_dataset(seed=0) tasks), with the same reward functions and weights
(rubricrl.train.reward_mix.TrainingReward over the shipped json_extraction rubric; its wrapper is
needed for the general rows, which carry no rubric) and the same GRPOConfig
(rubricrl.train.trainer_args.grpo_config, the function the stage builds its config with), on CPU,
each in a fresh temp folder and a fresh single Python process (one training process, no DDP):

  stage  rubricrl.train.grpo.train_grpo: rollback monitor (enabled, as in the stage), checkpoint
         marker + pruning, MLflow metrics callback (no MLflow run is active unless --mlflow).
  bare   trl.GRPOTrainer(...).train() with only TRL's default callbacks, report_to none.

A fresh process per run keeps one run's allocator state, imports and memory out of the next (four
SmolLM2 runs in one process grew past 19 GB and were OOM-killed). Repeats alternate the order
(stage/bare, then bare/stage, ...) to cancel drift from other load on the machine.

Timing: one callback (the same class, first after TRL's defaults in both paths) stamps
time.perf_counter() and time.process_time() at on_step_begin, on_step_end and on_train_end. A
step's time runs from its on_step_begin to the next step's (the last step: to on_train_end), so it
includes logging, every callback's on_log / on_save and the checkpoint save. Model loading and the
first (warm-up) step are left out. "compute" is on_step_begin -> on_step_end only (rollout, reward,
loss, optimizer step). Steps that wrote a checkpoint are reported apart ("save step"); the headline
ratio is the median over steps without a save. "paired" compares the totals of the same steps of
the same repeats (both paths sample the same completions: their mean lengths are printed).

save_steps: the stage's default (GRPOSettings().save_steps, 5) unless --save-steps is given. With
--steps at or below it no checkpoint is written mid-run; transformers always saves one at max_steps
(save_strategy="steps") in both paths, and the stage then fsyncs it and writes its marker: that is
the "save step". --save-steps 1 measures the per-checkpoint cost on every step. The stage's final
publish of model/ (after training) is outside every step and not timed.

--threads 1 (default) pins torch to one thread in both paths: on a small shared machine two
threads made single steps of the tiny model vary from 0.5 s to 19 s. Only one run is alive at a
time, but a SmolLM2-135M run (4 x 64 tokens) peaks at about 11 GB RSS: on a 23 GB machine it must
not run beside another training job (the OOM killer takes the larger process).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from transformers import TrainerCallback  # noqa: E402

GOAL = 1.05
ROOT = Path(__file__).resolve().parent.parent
RUBRIC = ROOT / "rubricrl" / "reward" / "rubrics" / "json_extraction.yaml"


def _now() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


class StepTimer(TrainerCallback):
    """Stamps each step's boundaries; the same class (and position) in both paths, so it costs the same."""

    def __init__(self):
        self.begin: dict[int, tuple[float, float]] = {}  # step (1-based) -> (wall, process CPU) at on_step_begin
        self.end: dict[int, tuple[float, float]] = {}
        self.saved: set[int] = set()
        self.lengths: dict[int, float] = {}  # completions/mean_length per step: both paths must do the same work
        self.train_end: tuple[float, float] | None = None
        self.restarts = 0

    def on_train_begin(self, args, state, control, **kwargs):
        if self.begin:  # a rollback restarted training: keep only the last attempt
            self.restarts += 1
            self.begin, self.end, self.saved, self.lengths = {}, {}, set(), {}

    def on_step_begin(self, args, state, control, **kwargs):
        self.begin[state.global_step + 1] = _now()

    def on_step_end(self, args, state, control, **kwargs):
        self.end[state.global_step] = _now()

    def on_save(self, args, state, control, **kwargs):
        self.saved.add(state.global_step)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "completions/mean_length" in logs:
            self.lengths[state.global_step] = float(logs["completions/mean_length"])

    def on_train_end(self, args, state, control, **kwargs):
        self.train_end = _now()

    def steps(self) -> list[dict]:
        """Per step after the first: full and compute seconds (wall and CPU), whether it saved a checkpoint."""
        out = []
        for k in sorted(self.begin):
            if k == 1 or k not in self.end:
                continue
            (w0, c0), (w1, _) = self.begin[k], self.end[k]
            w2, c2 = self.begin.get(k + 1, self.train_end)
            out.append({"step": k, "full": w2 - w0, "compute": w1 - w0, "cpu": c2 - c0,
                        "save": k in self.saved, "length": self.lengths.get(k)})
        return out


def make_reward():
    from rubricrl.reward.functions import RubricReward
    from rubricrl.reward.scoring import RubricScorer
    from rubricrl.reward.load import load_rubric

    return RubricReward(RubricScorer(load_rubric(RUBRIC)))


def run_stage(model_dir: Path, tasks, settings, out: Path, mlflow_uri: str | None) -> StepTimer:
    import contextlib

    from rubricrl.train.grpo import train_grpo

    timer = StepTimer()
    ctx = contextlib.nullcontext()
    if mlflow_uri:
        import mlflow

        mlflow.set_tracking_uri(mlflow_uri)
        mlflow.set_experiment("grpo_step_benchmark")
        ctx = mlflow.start_run()
    with ctx:
        result = train_grpo(model_dir, tasks, out, settings, make_reward(), callbacks=[timer], resume=True)
    if result["rollbacks"]:
        print(f"  note: the stage rolled back {len(result['rollbacks'])} time(s); only the last attempt is timed",
              file=sys.stderr)
    return timer


def run_bare(model_dir: Path, tasks, settings, out: Path) -> StepTimer:
    """What train_grpo hands TRL, without our callbacks, resume logic or final publish."""
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOTrainer

    from rubricrl.train.data import grpo_rows
    from rubricrl.train.reward_mix import TrainingReward
    from rubricrl.train.trainer_args import grpo_config, peft_config

    timer = StepTimer()
    reward = make_reward()
    reward.tasks.update({t.id: t for t in tasks})
    mix = TrainingReward(reward)
    rows, _ = grpo_rows(tasks, AutoTokenizer.from_pretrained(model_dir), settings.max_prompt_length,
                        settings.general_share, settings.seed)
    args = grpo_config(settings, out / "checkpoints", settings.beta, mix.weights)
    trainer = GRPOTrainer(model=str(model_dir), reward_funcs=mix.funcs, args=args,
                          train_dataset=Dataset.from_list(rows), callbacks=[timer],
                          peft_config=peft_config(settings.lora))
    trainer.train()
    return timer


def settings_for(args):
    from rubricrl.config import GRPOSettings

    overrides = {"max_steps": args.steps, "max_completion_length": args.max_completion_length}
    if args.save_steps is not None:
        overrides["save_steps"] = args.save_steps
    return GRPOSettings(**overrides)


def child(args) -> None:
    """One timed run (`--child stage|bare`) in this process; writes its steps as JSON to --result."""
    import torch

    from rubricrl.data.generate import generate_dataset

    if args.threads:
        torch.set_num_threads(args.threads)
    tasks = generate_dataset(seed=0, n_train=args.tasks, n_test=4)["train"]
    settings = settings_for(args)
    started = time.perf_counter()
    if args.child == "stage":
        timer = run_stage(Path(args.model), tasks, settings, Path(args.out), args.mlflow_uri)
    else:
        timer = run_bare(Path(args.model), tasks, settings, Path(args.out))
    result = {"steps": timer.steps(), "lengths": timer.lengths, "restarts": timer.restarts,
              "wall": time.perf_counter() - started, "threads": torch.get_num_threads(),
              "max_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}
    Path(args.result).write_text(json.dumps(result), encoding="utf-8")


def spawn(path: str, args, model_dir: Path, tmp: Path, tag: str) -> dict:
    out = Path(tempfile.mkdtemp(prefix=f"{tag}_", dir=tmp))
    result = out.with_suffix(".json")
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", path, "--model", str(model_dir),
           "--out", str(out), "--result", str(result), "--steps", str(args.steps), "--tasks", str(args.tasks),
           "--max-completion-length", str(args.max_completion_length), "--threads", str(args.threads)]
    if args.save_steps is not None:
        cmd += ["--save-steps", str(args.save_steps)]
    if args.mlflow:
        cmd += ["--mlflow-uri", f"sqlite:///{out / 'mlflow.db'}"]
    # The child's stdout (TRL's per-step log dicts, progress bars) goes to our stderr: stdout is the report.
    proc = subprocess.run(cmd, stdout=sys.stderr, stderr=sys.stderr, cwd=ROOT)
    if proc.returncode != 0:
        sys.exit(f"grpo_step: the {path} run failed (exit status {proc.returncode}); its output is on stderr")
    return json.loads(result.read_text(encoding="utf-8"))


def check_model(model_dir: Path) -> None:
    config = model_dir / "config.json"
    if not config.is_file():
        sys.exit(f"grpo_step: {model_dir}: not an HF model folder (no config.json)")
    quant = json.loads(config.read_text(encoding="utf-8")).get("quantization_config")
    if quant:
        sys.exit(f"grpo_step: {config} has a quantization_config ({quant.get('quant_method')}): neither path can "
                 "fine-tune it. Re-create the folder with rubricrl.inference.models.prepare_policy, which drops it.")


def med(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or not b else f"{a / b:.3f}"


def report(runs: dict[str, list[dict]]) -> None:
    print()
    print("(* = step wrote a checkpoint; step 1 is warm-up and left out; CPU = the run's process CPU seconds)")
    print(f"{'path':6s} {'n':>3s} {'step s (median)':>16s} {'step CPU s':>11s} {'compute s':>10s} "
          f"{'save step s':>12s}")
    summary = {}
    for path in ("stage", "bare"):
        steps = runs[path]
        plain = [s for s in steps if not s["save"]]
        summary[path] = (med([s["full"] for s in plain]), med([s["cpu"] for s in plain]),
                         med([s["compute"] for s in steps]), med([s["full"] for s in steps if s["save"]]))
        print(f"{path:6s} {len(plain):3d} " + " ".join(f"{fmt(v):>{w}s}" for v, w in zip(summary[path], (16, 11, 10, 12))))
    st, ba = summary["stage"], summary["bare"]
    print(f"{'ratio':6s} {'':3s} " + " ".join(f"{ratio(a, b):>{w}s}" for a, b, w in zip(st, ba, (16, 11, 10, 12))))
    # The same step of the same repeat does the same work in both paths (same completions): compare totals too.
    keyed = {p: {(x["repeat"], x["step"]): x["full"] for x in runs[p] if not x["save"]} for p in runs}
    both = keyed["stage"].keys() & keyed["bare"].keys()
    if both:
        paired = sum(keyed["stage"][k] for k in both) / sum(keyed["bare"][k] for k in both)
        print(f"paired: total over the same {len(both)} step(s) stage/bare {paired:.3f}")
    if st[0] is None or not ba[0]:
        print("no step without a checkpoint was measured: raise --steps or --save-steps")
        return
    r = st[0] / ba[0]
    print(f"stage/bare step time (median): {r:.3f} (goal <= {GOAL}): {'met' if r <= GOAL else 'NOT met'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None,
                    help="HF model folder (e.g. /tmp/models/base); default: a tiny random model in a temp folder")
    ap.add_argument("--steps", type=int, default=4, help="optimizer steps per run (the first is warm-up)")
    ap.add_argument("--repeats", type=int, default=2, help="stage/bare pairs; the order alternates")
    ap.add_argument("--tasks", type=int, default=16, help="generated train tasks (generate_dataset(seed=0))")
    ap.add_argument("--max-completion-length", type=int, default=64,
                    help="tokens per completion (the stage's default is 128)")
    ap.add_argument("--save-steps", type=int, default=None, help="default: the stage's default save_steps")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads in both paths (1: steady timings on a shared machine; 0: torch's default)")
    ap.add_argument("--mlflow", action="store_true",
                    help="run the stage inside an MLflow run (temp sqlite store), as the grpo stage does")
    ap.add_argument("--child", choices=["stage", "bare"], help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    ap.add_argument("--mlflow-uri", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.steps < 2:
        ap.error("--steps must be at least 2 (the first step is warm-up)")
    if args.child:
        return child(args)

    from rubricrl.inference.models import build_tiny_model

    with tempfile.TemporaryDirectory(prefix="grpo_step_") as tmp:
        tmp = Path(tmp)
        if args.model:
            model_dir, model_name = Path(args.model), args.model
            check_model(model_dir)
        else:
            model_dir, model_name = build_tiny_model(tmp / "tiny_model"), "tiny random (build_tiny_model)"
        settings = settings_for(args)
        print(f"model: {model_name}; {args.tasks} tasks; {args.steps} steps x {args.repeats} repeat(s); "
              f"{settings.num_generations} completions x {settings.max_completion_length} tokens per step; "
              f"save_steps {settings.save_steps}; rollback {'on' if settings.rollback.enabled else 'off'}; "
              f"mlflow {'on' if args.mlflow else 'off'}; torch threads {args.threads or 'default'}; "
              f"one process per run", flush=True)
        runs: dict[str, list[dict]] = {"stage": [], "bare": []}
        for rep in range(args.repeats):
            for path in (["stage", "bare"] if rep % 2 == 0 else ["bare", "stage"]):
                res = spawn(path, args, model_dir, tmp, f"{path}_{rep}")
                runs[path] += [{**s, "repeat": rep} for s in res["steps"]]
                per = " ".join(f"{s['step']}:{s['full']:.3f}{'*' if s['save'] else ''}" for s in res["steps"])
                lens = " ".join(f"{k}:{v:g}" for k, v in sorted(res["lengths"].items(), key=lambda kv: int(kv[0])))
                note = f"  ({res['restarts']} rollback restart(s))" if res["restarts"] else ""
                print(f"repeat {rep + 1} {path:5s} wall {res['wall']:6.1f}s  peak RSS {res['max_rss_gb']:.1f} GB  "
                      f"step s {per}  mean lengths {lens}{note}", flush=True)
    report(runs)


if __name__ == "__main__":
    main()
