"""fp32 against bf16 autocast for SFT and GRPO on the CPU default, side by side in one run: seconds a step, the
loss curve, and the greedy answers of the trained models (README, "Precision").

    python benchmarks/precision.py                 # SmolLM2 (outputs/models/base, else prepared from the embedded GGUF)
    python benchmarks/precision.py --sft-steps 6 --grpo-steps 3 --tasks 8

Each (stage, precision) trains in a fresh process with the stage's own code (rubricrl.train.sft.train_sft,
rubricrl.train.grpo.train_grpo) and the CPU default settings of params.yaml, except the step counts: SFT from the
base model, GRPO from the fp32 SFT model (both precisions start from the same weights and draw the same
prompts). After training, the model answers the first --tasks test tasks greedily in fp32, as the eval stage
decodes (rubricrl.inference.generate), and the answers are scored with the strict metric.

Printed per run: median seconds a step (step 1, the warm-up, left out), the first and last logged loss, strict
field accuracy of the answers, and the share of answers identical to the fp32 run's (reported, not gated: after
a few steps in another precision the weights differ in the last bits and greedy decoding takes other paths).
The decision rule (README, "Precision"): bf16 is adopted for a stage where its step is at least 15% faster
(--max-ratio 0.85: beyond the ~10% run-to-run noise of a shared VM), its last loss is within 2% of fp32's
(--loss-tolerance; SFT, whose loss is the objective) and the strict field accuracy of its answers is no more than
--tolerance below fp32's, with no skipped update; elsewhere fp32. The verdict line gives the setting that
follows (`precision: auto` = bf16 where the CPU has native bf16, fp32 where it has not).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from grpo_step import StepTimer, make_reward  # noqa: E402


def cpu_description() -> str:
    import torch

    flags = set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    except OSError:
        pass
    bf16 = sorted(flags & {"avx512_bf16", "amx_bf16"})
    return f"torch CPU capability {torch.backends.cpu.get_cpu_capability()}; bf16 flags: {', '.join(bf16) or 'none'}"


def child(args) -> None:
    import torch
    from transformers import TrainerCallback

    from rubricrl.config import GRPOSettings, SFTSettings
    from rubricrl.data.generate import generate_dataset
    from rubricrl.evaluate.task import evaluate_responses
    from rubricrl.inference.generate import generate_with_stats
    from rubricrl.reward.scoring import RubricScorer

    torch.manual_seed(0)
    data = generate_dataset(seed=0, n_train=200, n_test=40)
    tests = data["test"][: args.tasks]
    timer = StepTimer()
    losses: list[float] = []

    class Losses(TrainerCallback):
        def on_log(self, a, state, control, logs=None, **kw):
            if logs and "loss" in logs:
                losses.append(float(logs["loss"]))

    out = Path(args.out)
    if args.child == "sft":
        from rubricrl.train.sft import train_sft

        run = train_sft(args.model, data["train"][:80], out / "model", SFTSettings(precision=args.precision,
                        max_steps=args.sft_steps), callbacks=[timer, Losses()])
        model_dir, skipped = run.model_dir, list(run.skipped_updates)
    else:
        from rubricrl.train.grpo import train_grpo

        reward = make_reward()
        result = train_grpo(args.model, data["train"][:80], out / "run", GRPOSettings(
            precision=args.precision, max_steps=args.grpo_steps, save_steps=args.grpo_steps),
            reward, callbacks=[timer, Losses()], resume=False)
        model_dir, skipped = out / "run" / "model", result["skipped_updates"]
    answers, _ = generate_with_stats(model_dir, tests, batch_size=8, max_new_tokens=200, device="cpu",
                                     precision="fp32", desc=None)
    metrics = evaluate_responses(tests, answers, RubricScorer(make_reward().scorer.rubric))
    steps = [s["full"] for s in timer.steps()]
    Path(args.result).write_text(json.dumps({
        "step_s": statistics.median(steps) if steps else None, "steps": steps, "losses": losses,
        "answers": answers, "field_accuracy": (metrics["all"].get("strict") or {}).get("field_accuracy"),
        "skipped": skipped, "model_dir": str(model_dir)}), encoding="utf-8")


def spawn(kind: str, precision: str, model: Path, args, tmp: Path) -> dict:
    out = Path(tempfile.mkdtemp(prefix=f"{kind}_{precision}_", dir=tmp))
    result = out / "result.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", kind, "--precision", precision, "--model",
           str(model), "--out", str(out), "--result", str(result), "--tasks", str(args.tasks),
           "--sft-steps", str(args.sft_steps), "--grpo-steps", str(args.grpo_steps)]
    started = time.perf_counter()
    proc = subprocess.run(cmd, stdout=sys.stderr, stderr=sys.stderr, cwd=ROOT)
    if proc.returncode != 0:
        sys.exit(f"precision: the {kind} {precision} run failed (exit status {proc.returncode})")
    res = json.loads(result.read_text(encoding="utf-8"))
    res["wall"] = time.perf_counter() - started
    return res


def base_model(tmp: Path) -> Path:
    prepared = ROOT / "outputs" / "models" / "base"
    if (prepared / "config.json").is_file():
        return prepared
    from rubricrl.inference.models import EMBEDDED_POLICY, prepare_policy

    return prepare_policy(EMBEDDED_POLICY, tmp / "base")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="HF model folder (default: the CPU default's SmolLM2)")
    ap.add_argument("--sft-steps", type=int, default=6)
    ap.add_argument("--grpo-steps", type=int, default=3)
    ap.add_argument("--tasks", type=int, default=16, help="test tasks answered greedily after training")
    ap.add_argument("--max-ratio", type=float, default=0.85, help="bf16/fp32 step time to adopt bf16")
    ap.add_argument("--loss-tolerance", type=float, default=0.02, help="relative last-loss difference (SFT)")
    ap.add_argument("--tolerance", type=float, default=0.05, help="largest strict field accuracy drop")
    ap.add_argument("--child", choices=["sft", "grpo"], help=argparse.SUPPRESS)
    ap.add_argument("--precision", choices=["fp32", "bf16"], help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return 0
    print(cpu_description(), flush=True)
    rows, verdict = [], {}
    with tempfile.TemporaryDirectory(prefix="precision_") as tmp:
        tmp = Path(tmp)
        model = Path(args.model) if args.model else base_model(tmp)
        runs = {}
        for kind in ("sft", "grpo"):
            start = model if kind == "sft" else Path(runs["sft", "fp32"]["model_dir"])
            for precision in ("fp32", "bf16"):
                runs[kind, precision] = spawn(kind, precision, start, args, tmp)
            ref, bf = runs[kind, "fp32"], runs[kind, "bf16"]
            for precision, r in (("fp32", ref), ("bf16", bf)):
                agree = sum(a == b for a, b in zip(r["answers"], ref["answers"])) / len(ref["answers"])
                r["agreement"] = agree
                rows.append((kind, precision, r["step_s"], r["losses"][0] if r["losses"] else None,
                             r["losses"][-1] if r["losses"] else None, r["field_accuracy"], agree, r["skipped"]))
            faster = bf["step_s"] <= args.max_ratio * ref["step_s"]
            accurate = (bf["field_accuracy"] or 0) >= (ref["field_accuracy"] or 0) - args.tolerance
            loss_ok = kind != "sft" or abs(bf["losses"][-1] - ref["losses"][-1]) <= args.loss_tolerance * abs(
                ref["losses"][-1])
            verdict[kind] = "auto" if faster and accurate and loss_ok and not bf["skipped"] else "fp32"
    print(f"\n{'stage':5s} {'precision':9s} {'s/step':>7s} {'first loss':>10s} {'last loss':>10s} "
          f"{'field acc':>9s} {'same answers':>12s} skipped")
    for kind, precision, step, first, last, acc, agree, skipped in rows:
        f = lambda x: "-" if x is None else f"{x:.4f}"  # noqa: E731
        print(f"{kind:5s} {precision:9s} {step:7.2f} {f(first):>10s} {f(last):>10s} {f(acc):>9s} {agree:12.0%} "
              f"{skipped or '-'}")
    for kind in ("sft", "grpo"):
        ratio = runs[kind, "bf16"]["step_s"] / runs[kind, "fp32"]["step_s"]
        print(f"{kind}: bf16/fp32 step time {ratio:.2f}; adopt -> {kind}.precision: {verdict[kind]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
