"""Which 4-bit GGUF type to ship: each candidate quantization of a source model, with and without llama.cpp's
importance matrix, scored on a stratified test slice against the source's own answers (README, "Export").

    python benchmarks/quant_types.py --run-dir /tmp/run                       # the GRPO policy of a finished run
    python benchmarks/quant_types.py --run-dir /tmp/run --no-imatrix --types q4_0 q4_k_m

`--run-dir` is a finished `make run` checkout: the source is its GRPO policy (outputs/grpo/model), the tasks the
eval's stratified test slice (eval.max_per_part per part, data/test.jsonl), and the source's answers on them the
eval stage's (outputs/eval/grpo/responses.jsonl). Each artifact is made from the F16 GGUF (the
converter the export stage uses), reloaded with llama.cpp, answers every task greedily (eval.batch_size sequences
decoding together), and is scored with the strict metric: field accuracy, its paired difference with the source
(95% bootstrap interval, n, MDE), retention (artifact / source), valid answers, size and tokens/s one prompt at a
time (export.speed_tasks prompts, export.speed_tokens tokens each, as the export stage measures). The importance matrix is computed by llama.cpp's
llama-imatrix (built once per machine by scripts/llama_tools.sh) on the chat-formatted training prompts with
their gold answers (the distribution the policy serves), and applied by llama-quantize.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TYPES = ("q4_0", "q4_1", "iq4_nl", "iq4_xs", "q4_k_s", "q4_k_m")
FTYPE = {"q4_0": "Q4_0", "q4_1": "Q4_1", "iq4_nl": "IQ4_NL", "iq4_xs": "IQ4_XS", "q4_k_s": "Q4_K_S",
         "q4_k_m": "Q4_K_M", "q8_0": "Q8_0"}


def tools(version: str) -> Path:
    out = subprocess.run(["bash", str(ROOT / "scripts/llama_tools.sh"), version], check=True, text=True,
                         stdout=subprocess.PIPE).stdout
    return Path(out.strip().splitlines()[-1])


def calibration_text(run_dir: Path, n: int, tokenizer_dir: Path) -> str:
    """The first n training prompts with their gold answers, chat-formatted as the policy sees them."""
    from transformers import AutoTokenizer

    from rubricrl.core.prompt import task_messages
    from rubricrl.core.taskfile import load_tasks

    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    tasks = [t for t in load_tasks(run_dir / "data/train.jsonl") if t.reference is not None][:n]
    return "\n".join(tok.apply_chat_template(task_messages(t) + [{"role": "assistant", "content": json.dumps(
        t.reference, ensure_ascii=False)}], tokenize=False) for t in tasks)


def main(argv: list[str] | None = None) -> int:
    from importlib.metadata import version

    from rubricrl.config import load_params
    from rubricrl.core.jsonio import read_jsonl
    from rubricrl.core.tables import table
    from rubricrl.core.taskfile import load_tasks
    from rubricrl.evaluate.task import test_slice
    from rubricrl.inference.conversion import gguf_for
    from rubricrl.inference.generate import default_threads
    from rubricrl.metrics.decide import decide
    from rubricrl.metrics.paired import paired_difference
    from rubricrl.release.export import quantize, strict_and_reward, tokens_per_s_gguf, verify_gguf
    from rubricrl.reward.load import load_rubric
    from rubricrl.reward.scoring import RubricScorer

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run-dir", type=Path, required=True)
    ap.add_argument("--source", default="grpo", choices=["grpo"])
    ap.add_argument("--types", nargs="+", default=list(TYPES), choices=sorted(FTYPE))
    ap.add_argument("--no-imatrix", action="store_true")
    ap.add_argument("--calibration", type=int, default=64, help="training conversations for the importance matrix")
    ap.add_argument("--margin", type=float, default=0.05, help="non-inferiority margin vs the source")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/quant_types.json"))
    args = ap.parse_args(argv)
    run = args.run_dir.resolve()
    os.chdir(run)
    params = load_params(run / "params.yaml")
    model_dir = run / "outputs/grpo/model"
    tasks = test_slice(load_tasks(run / "data/test.jsonl"), params.eval.max_per_part)
    answers = {r["id"]: r["response"] for r in read_jsonl(run / "outputs/eval/grpo/responses.jsonl")}
    tasks = [t for t in tasks if t.id in answers]
    scorer = RubricScorer(load_rubric(run / "outputs/rubric/rubric.yaml"), policy_model=params.policy.model)
    source = strict_and_reward(tasks, [answers[t.id] for t in tasks], scorer)
    threads = default_threads()
    f16 = gguf_for(model_dir)
    work = run / ".cache/quant_types"
    work.mkdir(parents=True, exist_ok=True)
    variants = [(k, False) for k in args.types] + ([] if args.no_imatrix else [(k, True) for k in args.types])
    imatrix = None
    if not args.no_imatrix:
        bin_dir = tools(version("llama-cpp-python"))
        text = work / "calibration.txt"
        text.write_text(calibration_text(run, args.calibration, model_dir), encoding="utf-8")
        imatrix = work / "imatrix.gguf"
        start = time.perf_counter()
        subprocess.run([str(bin_dir / "llama-imatrix"), "-m", str(f16), "-f", str(text), "-o", str(imatrix),
                        "-t", str(threads), "-c", "512", "--no-ppl"], check=True, stdout=subprocess.DEVNULL)
        print(f"imatrix: {args.calibration} conversations, {time.perf_counter() - start:.0f} s", flush=True)
    rows = [{"type": "hf fp32 (source)", "imatrix": False, "size_mb": None, "n": source["n"],
             "field_accuracy": round(source["field_accuracy"], 4), "vs_source": "", "retention": 1.0,
             "valid": sum(r["present"] > 0 for r in source["rows"]), "tokens_per_s": None}]
    for kind, im in variants:
        path = work / f"model-{kind}{'-imatrix' if im else ''}.gguf"
        if im:
            subprocess.run([str(bin_dir / "llama-quantize"), "--imatrix", str(imatrix), str(f16), str(path),
                            FTYPE[kind], str(threads)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        elif kind in ("q8_0", "q4_k_m"):
            quantize(f16, path, kind, threads)
        else:
            import ctypes

            import llama_cpp

            p = llama_cpp.llama_model_quantize_default_params()
            p.ftype, p.nthread = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{FTYPE[kind]}"), threads
            if llama_cpp.llama_model_quantize(str(f16).encode(), str(path).encode(), ctypes.byref(p)) != 0:
                raise SystemExit(f"{path}: quantization to {kind} failed")
        got = verify_gguf(path, model_dir, tasks, scorer, params.eval.max_new_tokens, threads, params.eval.batch_size)
        speed = tokens_per_s_gguf(path, model_dir, tasks[:params.export.speed_tasks], params.export.speed_tokens, threads)
        num_a = [r["right"] for r in got["rows"]]
        num_b = [r["right"] for r in source["rows"]]
        den = [r["fields"] for r in source["rows"]]
        pair = paired_difference(num_a, num_b, den, n_resamples=params.eval.n_boot)
        d = decide(pair, "noninferiority", args.margin)
        rows.append({"type": kind, "imatrix": im, "size_mb": got["size_mb"], "n": got["n"],
                     "field_accuracy": round(got["field_accuracy"], 4), "vs_source": d.line,
                     "retention": round(got["field_accuracy"] / source["field_accuracy"], 3),
                     "valid": sum(r["present"] > 0 for r in got["rows"]),
                     "tokens_per_s": round(speed, 1)})
        print(json.dumps(rows[-1], ensure_ascii=False), flush=True)
    args.out = args.out if args.out.is_absolute() else ROOT / args.out
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(table(list(rows[0]), [list(r.values()) for r in rows]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
