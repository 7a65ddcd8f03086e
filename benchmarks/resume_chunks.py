"""What journaling answers in chunks costs (rubricrl.core.resume): the eval's greedy answers as one call, and in
chunks of --every (each chunk one call, appended to a journal), side by side in one run on the same model, tasks
and threads; then a rerun that finds the journal cut at a torn line mid-way, as a kill leaves it.

    python benchmarks/resume_chunks.py --model outputs/models/sft --tasks 50 --every 32

Prints seconds for each, how many answers are identical to the one-call run, and what the rerun regenerated.
llama.cpp's continuous batching drains at each chunk's end (its last sequences decode with free slots), which is
the cost; the answers may differ from the one-call run where a sequence shared a batch with others, never
between an uninterrupted chunked run and its rerun.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rubricrl.core.resume import Journal  # noqa: E402
from rubricrl.core.slices import stratified  # noqa: E402
from rubricrl.core.taskfile import load_tasks  # noqa: E402
from rubricrl.inference.conversion import gguf_for  # noqa: E402
from rubricrl.inference.generate import generate_journaled, generate_with_stats  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="outputs/models/sft")
    ap.add_argument("--tasks", type=int, default=50)
    ap.add_argument("--every", type=int, default=32)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=200)
    ap.add_argument("--engine", default="llama_cpp")
    a = ap.parse_args()
    tasks = stratified(load_tasks("data/test.jsonl"), a.tasks)
    if a.engine == "llama_cpp":
        gguf_for(a.model, "f16")  # the one-off conversion, outside the timings
    kw = {"batch_size": a.batch_size, "max_new_tokens": a.max_new_tokens, "desc": None, "engine": a.engine}
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        whole, _ = generate_with_stats(a.model, tasks, **kw)
        one_call = time.perf_counter() - t
        t = time.perf_counter()
        chunked, _ = generate_journaled(a.model, tasks, Journal(Path(tmp, "a.jsonl")), a.every, **kw)
        in_chunks = time.perf_counter() - t
        # A kill mid-append of the last chunk: every line of it but a torn half of one.
        data = Path(tmp, "a.jsonl").read_bytes()
        lines = data.splitlines(keepends=True)
        done = (len(tasks) - 1) // a.every * a.every
        Path(tmp, "b.jsonl").write_bytes(b"".join(lines[:done + 1]) + lines[done + 1][:10])
        journal = Journal(Path(tmp, "b.jsonl"))
        t = time.perf_counter()
        rerun, _ = generate_journaled(a.model, tasks, journal, a.every, **kw)
        resumed = time.perf_counter() - t
    out = {"tasks": len(tasks), "every": a.every, "batch_size": a.batch_size, "engine": a.engine,
           "one_call_s": round(one_call, 1), "chunked_s": round(in_chunks, 1),
           "chunk_cost": round(in_chunks / one_call - 1, 3),
           "identical_to_one_call": sum(x == y for x, y in zip(whole, chunked)),
           "rerun_s": round(resumed, 1), "rerun_read_back": journal.read_back, "torn_lines": journal.torn,
           "rerun_identical": sum(x == y for x, y in zip(chunked, rerun))}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
