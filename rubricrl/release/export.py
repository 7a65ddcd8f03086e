"""Quantized exports of a trained model, each verified by reloading it and scoring its answers.

GGUF (llama.cpp): the HF folder -> F16 GGUF with llama.cpp's own converter (rubricrl.inference.llamacpp, from the
pinned sdist that `make setup` unpacks; cached by content hash), then Q8_0 and Q4_K_M with llama.cpp's
quantizer (`llama_cpp.llama_model_quantize`). An artifact is *verified* when it reloads (magic and header
parsed by gguf, then llama.cpp loads it: a truncated or foreign file fails with its name), its weights match
the F16 conversion's (every tensor dequantized, row by row, within MAX_ROW_ERROR: zeroed or overwritten
bytes fail naming the tensor; check_weights), and it answers the
verification tasks (the first `export.n_tasks` tasks of the eval's test slice) through the same chat
template, tokenizer and greedy decoding as the eval. Each verified artifact reports size on disk, strict
field accuracy and rubric reward, and their *retention*: artifact / source model on the same tasks (the
source's answers come from the eval_task stage, so nothing is generated twice). Speed: generated tokens
per second of the artifact and of the source in HF fp32, one prompt at a time, on the same prompts
(`export.speed_tasks`), side by side in one run.

GPTQ (4-bit, GPTQModel): the HF folder quantized layer by layer on calibration text (training prompts with
their gold answers, rendered by the chat template: the task's own distribution), group size a divisor of the
hidden and MLP sizes; reloaded with GPTQModel on the profile's device and dtype (CPU: fp32, its fused torch int4 kernel),
and scored like the GGUF files (greedy, HF generate, same prompts).

The serve check starts `python -m llama_cpp.server` on the Q4_K_M file on a loopback port; the `openai`
client sends a test task with the task's schema as `response_format` (`json_object` + schema: the server
rejects `json_schema`), and the answer is scored by the rubric.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

from rubricrl.core.errors import RubricRLError
from rubricrl.core.net import free_port  # noqa: F401  (serve_check; tests import it from here)
from rubricrl.inference import conversion, llamacpp
from rubricrl.core.taskfile import Task

# llama_ftype of each GGUF type (llama.h's LLAMA_FTYPE_MOSTLY_*), and the row length its blocks need: a weight whose
# rows do not divide is stored in a fallback type instead (SmolLM2's 576-wide rows take no k-quant: Q4_K_M's Q5_0).
QUANTS = {"q8_0": 7, "q4_0": 2, "q4_1": 3, "iq4_nl": 25, "iq4_xs": 30, "q4_k_s": 14, "q4_k_m": 15}
BLOCK = {"q8_0": 32, "q4_0": 32, "q4_1": 32, "iq4_nl": 32, "iq4_xs": 256, "q4_k_s": 256, "q4_k_m": 256}
FOUR_BIT = ("q4_0", "q4_1", "iq4_nl", "iq4_xs", "q4_k_s", "q4_k_m")


class ExportError(RubricRLError):
    """An export could not be made or did not verify; the message names the artifact."""


def quantize(f16: str | Path, out: str | Path, kind: str, threads: int = 0) -> Path:
    """F16 GGUF -> `kind` (QUANTS: q8_0, q4_k_m, ...) with llama.cpp's quantizer; written atomically."""
    import llama_cpp

    if kind not in QUANTS:
        raise ExportError(f"unknown GGUF quantization '{kind}' (known: {', '.join(QUANTS)})")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype, params.nthread = QUANTS[kind], threads
    try:
        rc = llama_cpp.llama_model_quantize(str(f16).encode(), str(tmp).encode(), ctypes.byref(params))
        if rc != 0:
            raise ExportError(f"{out}: llama_model_quantize({f16}, {kind}) failed (return code {rc})")
        conversion.check_gguf(tmp)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


def gptq_group_check(model_dir: str | Path, group_size: int) -> None:
    """GPTQ groups split each weight row: the group size must divide the hidden and intermediate sizes."""
    import json

    cfg = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
    bad = {k: cfg[k] for k in ("hidden_size", "intermediate_size") if k in cfg and cfg[k] % group_size}
    if bad:
        raise ExportError(f"export.gptq.group_size: {group_size} does not divide "
                          + ", ".join(f"{k} {v}" for k, v in bad.items()) + f" of {model_dir}")


def gptq_quantize(model_dir: str | Path, out: str | Path, calibration: Sequence[str], bits: int, group_size: int,
                  device: str = "auto") -> Path:
    """`model_dir` -> a GPTQ `bits`-bit folder at `out` (GPTQModel), calibrated on `calibration` texts.

    Written to a sibling temporary folder and moved into place only when saved, so a crash leaves no partial
    artifact."""
    gptq_group_check(model_dir, group_size)
    from rubricrl.inference.generate import placement

    os.environ.setdefault("GPTQMODEL_CPU_WORKERS", str(min(2, os.cpu_count() or 1)))
    try:
        from gptqmodel import GPTQModel, QuantizeConfig
    except ImportError as err:
        raise ExportError(f"GPTQ export needs GPTQModel: pip install 'rubricrl[gptq]' ({err})") from None
    out, model_dir = Path(out).absolute(), Path(model_dir).absolute()
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    dev, _ = placement(device)
    cwd = os.getcwd()
    try:
        with tempfile.TemporaryDirectory() as scratch:
            os.chdir(scratch)  # GPTQModel writes per-run logs under ./logs; keep them out of the project
            try:
                # No disk offload: the models fit in memory, and offloading writes outside the stage's outputs.
                model = GPTQModel.load(str(model_dir), QuantizeConfig(bits=bits, group_size=group_size,
                                                                      offload_to_disk=False), device=dev.type)
                model.quantize(list(calibration), batch_size=1)
                model.save(str(tmp))
            finally:
                os.chdir(cwd)
        shutil.rmtree(out, ignore_errors=True)
        os.replace(tmp, out)
    except Exception as err:  # GPTQModel raises many kinds; name the artifact
        raise ExportError(f"{out}: GPTQ quantization of {model_dir} failed: {type(err).__name__}: {err}") from err
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def load_gptq(path: str | Path, device: str = "auto"):
    """A GPTQ folder reloaded with GPTQModel: (HF model, left-padding tokenizer) on the profile's device and dtype."""
    from transformers import AutoTokenizer

    from rubricrl.inference.generate import placement

    dev, dtype = placement(device)
    try:
        from gptqmodel import BACKEND, GPTQModel

        # CPU: the fused torch kernel (ATen int4 matmul), the one CPU GPTQ kernel that takes fp32 activations
        # (GPTQModel's CPU default is bf16, slow without AVX-512 bf16; its plain torch kernel refuses fp32).
        backend = BACKEND.TORCH_FUSED if dev.type == "cpu" else BACKEND.AUTO
        model = GPTQModel.load(str(path), device=dev.type, backend=backend, dtype=dtype).model
    except ImportError as err:
        raise ExportError(f"GPTQ export needs GPTQModel: pip install 'rubricrl[gptq]' ({err})") from None
    except Exception as err:
        raise ExportError(f"{path}: verification failed: GPTQModel could not load it: "
                          f"{type(err).__name__}: {err}") from None
    model.eval()
    tokenizer = AutoTokenizer.from_pretrained(str(path))
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def verify_gptq(path: str | Path, tasks: Sequence[Task], scorer, max_new_tokens: int, threads: int,
                speed_tasks: Sequence[Task] = (), speed_tokens: int = 64, batch_size: int = 8,
                device: str = "auto") -> dict:
    """Reload a GPTQ folder and score its greedy answers (HF generate, batches of `batch_size`); tokens/s one
    prompt at a time on `speed_tasks`, as tokens_per_s_hf measures the source. Raises ExportError naming it."""
    from rubricrl.inference.generate import generate_with_stats

    path = Path(path)
    pair = load_gptq(path, device)
    try:
        responses, stats = generate_with_stats(path, tasks, batch_size=batch_size, max_new_tokens=max_new_tokens,
                                               threads=threads, model_and_tokenizer=pair, desc=None)
        speed = (generate_with_stats(path, speed_tasks, batch_size=1, max_new_tokens=speed_tokens, threads=threads,
                                     model_and_tokenizer=pair, desc=None)[1].tokens_per_s if speed_tasks else None)
    except Exception as err:
        raise ExportError(f"{path}: verification failed: generation raised {type(err).__name__}: {err}") from None
    scored = strict_and_reward(tasks, responses, scorer)
    size = sum(f.stat().st_size for f in path.glob("*.safetensors"))
    return {"artifact": str(path), "size_mb": round(size / 2**20, 1), "verified": True, "truncated": stats.truncated,
            "tokens": stats.new_tokens, "seconds": round(stats.seconds, 2), "tokens_per_s": speed, **scored}


def strict_and_reward(tasks: Sequence[Task], responses: Sequence[str], scorer) -> dict:
    """Strict field accuracy and mean rubric reward of answers to `tasks` (per-task rows included)."""
    from rubricrl.metrics.true_metric import true_counts

    rows = []
    for t, r in zip(tasks, responses, strict=True):
        c = true_counts(t, r)
        rows.append({"id": t.id, "part": str(t.meta.get("part") or "all"), "right": c.right, "fields": c.fields,
                     "null_for_present": c.null_for_present, "present": c.present,
                     "json": c.parsed if t.schema is not None else None, "reward": scorer.score(t, r).total})
    return {"n": len(rows), **rates(rows), "reward": sum(r["reward"] for r in rows) / len(rows) if rows else None,
            "rows": rows}


def rates(rows: Sequence[dict]) -> dict:
    """Strict field accuracy and the valid-JSON rate (extraction tasks only; None without any) of per-task rows."""
    fields = sum(r["fields"] for r in rows)
    json_rows = [r["json"] for r in rows if r.get("json") is not None]
    return {"field_accuracy": sum(r["right"] for r in rows) / fields if fields else None,
            "valid_json": sum(json_rows) / len(json_rows) if json_rows else None}


# A quantized tensor's rows against the F16 conversion's: relative error of a row (its norm, or the tensor's median
# row norm when larger). Measured on SmolLM2-135M (GRPO policy): the worst row of any tensor 0.118 for Q4_K_M (its
# Q5_0 fallbacks), below 0.02 for Q8_0; a zeroed or overwritten row is 1 or more.
MAX_ROW_ERROR = 0.5
ROWS_CHECKED = 2048  # rows per tensor at most (evenly spaced): a 1 MiB corruption spans thousands of rows


def check_weights(path: str | Path, reference: str | Path, max_row_error: float = MAX_ROW_ERROR,
                  rows: int = ROWS_CHECKED) -> dict:
    """The weights' content of a quantized GGUF against the F16 GGUF it was quantized from: every tensor present
    with its shape, and each checked row dequantized (gguf-py) within `max_row_error`. Raises ExportError naming
    the file and the tensor; returns the worst row error and its tensor."""
    import numpy as np
    from gguf.quants import dequantize

    path, reference = Path(path), Path(reference)
    try:
        ours = {t.name: t for t in conversion.read_gguf(path).tensors}
        ref = {t.name: t for t in conversion.read_gguf(reference).tensors}
    except Exception as err:  # noqa: BLE001 - any parse failure means the file is unusable
        raise ExportError(f"{path}: verification failed: unreadable GGUF ({type(err).__name__}: {err})") from None
    if ours.keys() != ref.keys():
        missing = sorted(ref.keys() - ours.keys()) or sorted(ours.keys() - ref.keys())
        raise ExportError(f"{path}: verification failed: tensors differ from {reference.name} ({missing[:3]})")
    worst, where = 0.0, None
    for name, t in ours.items():
        r = ref[name]
        if list(t.shape) != list(r.shape):
            raise ExportError(f"{path}: verification failed: tensor {name} has shape {list(t.shape)}, "
                              f"{reference.name} {list(r.shape)}")
        width = int(t.shape[0])
        a = dequantize(t.data, t.tensor_type).reshape(-1, width)
        b = dequantize(r.data, r.tensor_type).reshape(-1, width)
        step = max(1, len(a) // rows)
        a, b = a[::step].astype(np.float32), b[::step].astype(np.float32)
        norm = np.linalg.norm(b, axis=1)
        err = np.linalg.norm(a - b, axis=1) / np.maximum(np.maximum(norm, np.median(norm)), 1e-12)
        bad = ~np.isfinite(err) | (err > max_row_error)
        if bad.any():
            row = int(np.argmax(bad)) * step
            raise ExportError(f"{path}: verification failed: tensor {name} row {row} is "
                              f"{float(err[bad][0]):.3g} away from {reference.name} (relative; at most "
                              f"{max_row_error:g}): corrupt weights")
        if err.max() > worst:
            worst, where = float(err.max()), name
    return {"max_row_error": round(worst, 4), "worst_tensor": where}


def verify_gguf(path: str | Path, model_dir: str | Path, tasks: Sequence[Task], scorer, max_new_tokens: int,
                threads: int, batch: int = 1, reference: str | Path | None = None) -> dict:
    """Reload a GGUF and score its greedy answers (`batch` decoding together); with `reference` (the F16 GGUF it
    was quantized from) its weights are first checked against it (check_weights). Raises ExportError naming the
    file when it does not load or its weights are off."""
    path = Path(path)
    try:
        conversion.check_gguf(path)
    except conversion.EngineError as err:
        raise ExportError(f"{path}: verification failed: {err}") from None
    weights = check_weights(path, reference) if reference is not None else {}
    try:
        out, new_tokens, truncated, seconds = llamacpp.generate(model_dir, tasks, max_new_tokens, threads, gguf=path,
                                                                batch=batch)
    except (conversion.EngineError, ValueError, OSError) as err:  # llama.cpp raises ValueError on a bad file
        raise ExportError(f"{path}: verification failed: {err}") from None
    scored = strict_and_reward(tasks, [o[0] for o in out], scorer)
    return {"artifact": str(path), "size_mb": round(path.stat().st_size / 2**20, 1), "verified": True,
            "truncated": truncated, "tokens": new_tokens, "seconds": round(seconds, 2), **weights, **scored}


def tokens_per_s_hf(model_dir: str | Path, tasks: Sequence[Task], max_new_tokens: int, threads: int) -> float:
    """HF fp32 greedy, one prompt at a time: generated tokens per second (loading excluded)."""
    from rubricrl.inference.generate import generate_with_stats

    _, stats = generate_with_stats(model_dir, tasks, batch_size=1, max_new_tokens=max_new_tokens, threads=threads,
                                   device="cpu", precision="fp32", desc=None)
    return stats.tokens_per_s


def tokens_per_s_gguf(path: str | Path, model_dir: str | Path, tasks: Sequence[Task], max_new_tokens: int,
                      threads: int) -> float:
    _, new_tokens, _, seconds = llamacpp.generate(model_dir, tasks, max_new_tokens, threads, gguf=path)
    return new_tokens / seconds if seconds > 0 else 0.0


def stop_server(proc: subprocess.Popen) -> None:
    """Terminate a server process, killing it if it has not exited within 10 s."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def serve_check(gguf: str | Path, task: Task, scorer, max_tokens: int = 256, timeout_s: float = 120.0) -> dict:
    """Serve `gguf` with llama_cpp.server on loopback, ask one task through the openai client, score the answer."""
    import httpx
    from openai import OpenAI

    from rubricrl.core.prompt import task_messages

    port = free_port()
    base = f"http://127.0.0.1:{port}/v1"
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "server.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host",
                                     "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--verbose", "False"],
                                    stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + timeout_s
            while True:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise ExportError(f"{gguf}: llama_cpp.server did not come up (exit {proc.poll()}): "
                                      + log.read_text(errors="replace")[-800:])
                try:
                    httpx.get(f"{base}/models", timeout=2)
                    break
                except httpx.TransportError:
                    time.sleep(0.3)
            client = OpenAI(base_url=base, api_key="none", timeout=timeout_s, max_retries=1)
            start = time.perf_counter()
            # An extraction task asks for its schema's JSON (the server's grammar); a free-text reply is prose.
            shape = {} if task.schema is None else {
                "response_format": {"type": "json_object", "schema": task.schema}}
            reply = client.chat.completions.create(
                model=Path(gguf).name, messages=task_messages(task), temperature=0.0, max_tokens=max_tokens, **shape)
            seconds = time.perf_counter() - start
        finally:
            stop_server(proc)
    answer = reply.choices[0].message.content or ""
    scored = strict_and_reward([task], [answer], scorer)
    return {"artifact": str(gguf), "task": task.id, "answer": answer, "seconds": round(seconds, 2),
            "reward": scored["reward"], "field_accuracy": scored["field_accuracy"]}


def retention(artifact: dict, source: dict) -> dict:
    """artifact / source for strict field accuracy, reward and valid JSON (None where the source's value is 0 or
    missing)."""
    def ratio(key):
        a, b = artifact.get(key), source.get(key)
        return None if a is None or not b else round(a / b, 4)

    return {"field_accuracy": ratio("field_accuracy"), "reward": ratio("reward"), "valid_json": ratio("valid_json")}


def tensor_types(path: str | Path, kind: str) -> dict:
    """What a GGUF holds: tensors per stored type, bits per weight (all tensors), and the weights that *fell back*:
    those whose rows do not divide into `kind`'s blocks (BLOCK), so llama.cpp stored them in another type. Names
    are grouped over the layers (`blk.*.attn_q.weight`), each with its stored type and count."""
    import re
    from collections import Counter

    counts, fallback, elements, nbytes = Counter(), Counter(), 0, 0
    tensors = conversion.read_gguf(path).tensors
    for t in tensors:
        stored = t.tensor_type.name.lower()
        counts[stored] += 1
        elements, nbytes = elements + int(t.n_elements), nbytes + int(t.n_bytes)
        if len(t.shape) >= 2 and int(t.shape[0]) % BLOCK[kind]:
            fallback[(re.sub(r"^blk\.\d+\.", "blk.*.", t.name), stored)] += 1
    return {"tensors": len(tensors), "types": dict(counts.most_common()),
            "bits_per_weight": round(8 * nbytes / elements, 2) if elements else None,
            "fallback": sum(fallback.values()),
            "fallback_tensors": [{"name": n, "stored": s, "count": c} for (n, s), c in sorted(fallback.items())]}


def keeps(artifact: dict, source: dict, retain: float) -> tuple[bool, str]:
    """Whether an artifact kept `retain` of its source's strict field accuracy and of its valid-JSON rate on the
    same tasks, and why not. A source at 0 has nothing to keep: no artifact can be shown to keep it."""
    short = []
    for key, what in (("field_accuracy", "field accuracy"), ("valid_json", "valid JSON")):
        a, b = artifact.get(key), source.get(key)
        if b is None and a is None:
            continue  # no extraction task: valid JSON does not apply
        if not b:
            short.append(f"the source's {what} is {b}: nothing to keep")
        elif a is None or a < retain * b:
            short.append(f"{what} {0 if a is None else a:.3f} < {retain:g} x {b:.3f}")
    return not short, "; ".join(short)


class NoneKept(ExportError):
    """No candidate type kept the retention: no artifact of this kind (its tries are in `tries`)."""

    def __init__(self, message: str, tries: list[dict]):
        super().__init__(message)
        self.tries = tries


def merged(a: dict, b: dict) -> dict:
    """One verification record of two verifications of the same file on disjoint tasks (a's fields otherwise)."""
    rows = list(a.get("rows") or []) + list(b.get("rows") or [])
    return a | {"n": len(rows), **rates(rows), "rows": rows,
                "reward": sum(r["reward"] for r in rows) / len(rows) if rows else None,
                "tokens": (a.get("tokens") or 0) + (b.get("tokens") or 0),
                "seconds": round((a.get("seconds") or 0) + (b.get("seconds") or 0), 2),
                "truncated": (a.get("truncated") or 0) + (b.get("truncated") or 0)}


def select_quantization(f16: str | Path, out: str | Path, types: Sequence[str], verify, source: dict,
                        retain: float, threads: int = 0, confirm=None, screen: float = 0.0) -> dict:
    """The smallest of `types` (quantized from the F16 GGUF `f16`) that keeps `retain` of the source (keeps), moved
    to `out`: its verification record with "type" and "tries". Each type is quantized first (seconds) and sized;
    then verified smallest file first, stopping at the first that keeps. `verify(path)` reloads and scores a file on
    the source's tasks (ExportError when it fails to). With `confirm` = (verify_more, source_all), a try that keeps
    at least `screen` of the source on those first tasks is scored on more tasks too (verify_more(path)) and decided
    on all of them against source_all; one below `screen` is refused on the first tasks (a few tasks make the ratio
    noisy: 0.87 on 8 tasks was 0.96 on 50 for the same type). The record's "against" holds the source's numbers on
    the tasks it was decided on (its retention is against those). Raises NoneKept when none keeps (no file
    written)."""
    out = Path(out)
    work = out.parent / f".{out.stem}-tries"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        files = sorted(((quantize(f16, work / f"{t}.gguf", t, threads), t) for t in dict.fromkeys(types)),
                       key=lambda ft: (ft[0].stat().st_size, ft[1]))
        tries, chosen = [], None
        for path, kind in files:
            row = {"type": kind, "size_mb": round(path.stat().st_size / 2**20, 1), **tensor_types(path, kind)}
            if chosen is not None:
                tries.append(row | {"outcome": "not tried: a smaller type kept it"})
                continue
            try:
                a, against = verify(path), source
                screened = confirm is not None and not keeps(a, source, screen)[0]
                if confirm is not None and not screened:
                    a, against = merged(a, confirm[0](path)), confirm[1]
            except ExportError as err:
                tries.append(row | {"outcome": f"failed verification: {err}"})
                continue
            ok, why = keeps(a, against, retain)
            ok = ok and not screened  # below the screen is a refusal, whatever retain is
            row |= {k: a.get(k) for k in ("field_accuracy", "valid_json", "reward")}
            row["n"] = a.get("n") or len(a.get("rows") or [])
            row["retention"] = retention(a, against)
            row["parts"] = part_retention(a.get("rows") or [], against.get("rows") or [])
            if ok:
                row["outcome"] = "kept"
            elif screened:  # refused by the screen on the first tasks
                row["outcome"] = f"below {screen:g} on the first {row['n']} tasks: {keeps(a, source, screen)[1]}"
            else:
                row["outcome"] = f"below {retain:g}" + (f" on {row['n']} tasks" if confirm is not None else "") + \
                    f": {why}"
            tries.append(row)
            if ok:
                chosen = (path, kind, a | {"against": {k: against.get(k) for k in ("field_accuracy", "valid_json",
                                                                                      "reward")}
                                           | {"n": len(against.get("rows") or []) or None}}, row)
        if chosen is None:
            raise NoneKept(f"{out}: no 4-bit type kept {retain:g} of the source's field accuracy and valid JSON "
                           f"(tried {', '.join(t['type'] for t in tries)})", tries)
        path, kind, a, row = chosen
        os.replace(path, out)
        return a | {"artifact": str(out), "type": kind, "tries": tries,
                    **{k: row[k] for k in ("types", "bits_per_weight", "fallback", "fallback_tensors")}}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def part_retention(rows: Sequence[dict], source_rows: Sequence[dict]) -> dict:
    """Per test part (in-domain, held-out domain): the artifact's and the source's rates on the part's tasks and
    their retention."""
    out = {}
    for part in dict.fromkeys(r.get("part", "all") for r in rows):
        a = rates([r for r in rows if r.get("part", "all") == part])
        ids = {r["id"] for r in rows if r.get("part", "all") == part}
        b = rates([r for r in source_rows if r["id"] in ids])
        out[part] = {"field_accuracy": a["field_accuracy"], "valid_json": a["valid_json"],
                     "retention": {k: v for k, v in retention(a, b).items() if k != "reward"}}
    return out
