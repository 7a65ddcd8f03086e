"""Chaos: every long stage killed with SIGKILL at each of its resume paths once, rerun, and compared with an
uninterrupted run of the same project (a tiny random model of SmolLM2's architecture and tokenizer, the CPU
default's code paths: llama.cpp answers, grounded judge, MLflow on).

Each stage runs as `python -m rubricrl.stages.<stage>` does (runpy, in the project folder) in a process forked from
a server that has the libraries imported (multiprocessing's forkserver: seconds instead of a fresh interpreter
each time). Before every run the stage's declared outputs are deleted, as `dvc repro` deletes them. A kill is
`RUBRICRL_KILL_AT=<point>:<n>` (rubricrl.core.crashpoint): the process SIGKILLs itself the n-th time it reaches
the point, so the moments are exact and the test is repeatable. Converged means: the rerun exits 0, its
metrics are the uninterrupted run's (timings aside), its model weights and answers files are the same bits, and
no MLflow run is left RUNNING. The registry's own kills (between each pair of writes of a promotion or rollback)
are in tests/release/test_registry.py.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import re
import runpy
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from rubricrl.core.crashpoint import ENV
from tests.flow.test_pipeline import make_project

CHAIN = ("data", "prepare_model", "sft", "rubric", "grpo", "eval_task", "eval_general", "distill", "export")
# stage -> its kill points: each resume path of each stage killed once. A checkpoint (SFT, GKD) after its first save;
# a journal (eval_task, eval_general, export) after its first model or artifact is whole and the next one begun, so
# the rerun both keeps finished work and resumes a torn one; an output publish (the student) mid-write; an MLflow
# call (rubricrl.tracking, one code path for every stage) in a training stage and in export. Until issue 34 there
# were 15: a second journal kill in eval_task, eval_general and export, SFT's publish, and an MLflow kill in every
# stage; each was a path that another kill here already takes, and together they took ~4 minutes.
KILLS = {
    "sft": ("checkpoint:1", "tracking:1"),  # 4 steps, a checkpoint every 2
    "eval_task": ("journal:5",),  # 3 models, 2 answers a chunk: 2 + 4 + 4 chunks; the 5th is the SFT model's 3rd
    "eval_general": ("journal:7",),  # 3 models x 2 suites of 4 replies, 2 a chunk: the 7th is model 2's 2nd suite
    "distill": ("checkpoint:1", "publish:2"),  # GKD 2 steps, a checkpoint each; publish 2: the student
    # journal: the HF speed row, q8_0's record, q4's (the 3rd: the tiny model states no field, so no 4-bit type keeps
    # it, and that verdict is what a rerun reads back)
    "export": ("journal:3", "tracking:2"),
}
SIZES = {
    "data": {"n_train": 24, "n_test": 8, "n_val": 8},
    "rubric": {"n_calibration": 5, "policy_samples": 2, "policy_tasks": 2, "allow_gate_failures": True},
    "sft": {"max_steps": 4, "save_steps": 2, "per_device_batch_size": 2, "grad_accum": 1, "max_length": 1024,
            "max_tasks": 8, "precision": "fp32"},
    "grpo": {"per_device_batch_size": 4, "grad_accum": 1, "num_generations": 4, "max_completion_length": 16,
             "max_steps": 2, "save_steps": 1, "table_every": 1, "monitor": {"every": 1, "n_tasks": 2, "batch_size": 2}},
    "eval": {"max_per_part": 4, "base_per_part": 2, "batch_size": 2, "max_new_tokens": 16, "save_every": 2},
    "general": {"sizes": {"ifeval": 4, "humaneval": 0, "qa": 4, "perplexity": 2}, "batch_size": 2, "save_every": 2,
                "max_new_tokens": {"ifeval": 8, "humaneval": 8, "qa": 8}, "perplexity_max_tokens": 32, "n_boot": 100},
    "distill": {"student_layers": 1, "pool": 4, "n_prompts": 2, "steps": 2, "save_steps": 1, "batch_size": 2,
                "eval_tasks": 4, "batch_eval": 2, "save_every": 2, "max_new_tokens": 16, "max_length": 512,
                "general": False},
    "export": {"n_tasks": 2, "max_new_tokens": 8, "speed_tasks": 1, "speed_tokens": 8, "serve_check": False,
               "four_bit": {"types": ["q4_0", "q4_k_m"]}},
}
TIMING = re.compile(r"seconds|runtime|per_s$|_s$|saved_at|wall|elapsed|duration|_mib$")  # and memory peaks
PRELOAD = ["torch", "transformers", "datasets", "trl", "mlflow", "llama_cpp", "rubricrl.stages.base"]


def _stage(project: str, stage: str, kill_at: str | None) -> None:
    """One stage run, as `python -m rubricrl.stages.<stage>` in the project (the forked child's body)."""
    os.chdir(project)
    os.environ.pop(ENV, None)
    if kill_at:
        os.environ[ENV] = kill_at
    sys.argv = [f"rubricrl.stages.{stage}"]
    runpy.run_module(f"rubricrl.stages.{stage}", run_name="__main__", alter_sys=True)


def _declared(project: Path, stage: str) -> list[Path]:
    """The stage's outputs, metrics and plots (what `dvc repro` deletes before it runs the stage)."""
    from rubricrl.stages.paths import STAGES

    paths = STAGES[stage]
    return [project / getattr(paths, a) for a in (*paths.outs, *paths.metrics, *getattr(paths, "plots", ()))]


def _strip(obj):
    """A result without its timings (the one thing a rerun may change)."""
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items() if not TIMING.search(k)}
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    return obj


def _snapshot(project: Path, stage: str) -> dict[str, object]:
    """Every output file the comparison covers: JSON and JSONL without timings, weights and exports by md5."""
    out = {}
    for root in _declared(project, stage):
        for f in sorted([root] if root.is_file() else root.rglob("*") if root.is_dir() else []):
            rel = f.relative_to(project).as_posix()
            if f.suffix == ".json":
                out[rel] = _strip(json.loads(f.read_text(encoding="utf-8")))
            elif f.suffix == ".jsonl":
                out[rel] = [_strip(json.loads(line)) for line in f.read_text(encoding="utf-8").splitlines()]
            elif f.suffix in (".safetensors", ".gguf"):
                out[rel] = hashlib.md5(f.read_bytes()).hexdigest()
    return out


def _running_runs(project: Path) -> list[str]:
    import sqlite3

    with sqlite3.connect(project / "mlruns" / "mlflow.db") as db:
        return [name for (name,) in db.execute("SELECT name FROM runs WHERE status = 'RUNNING'")]


@pytest.mark.slow  # ~5 min on 2 cores: the chain once, then 8 kills and 8 reruns of the five long stages
def test_every_long_stage_killed_at_each_resume_path_converges_to_the_uninterrupted_run(tmp_path, monkeypatch):
    """Over 3 minutes because convergence is only shown by a real chain: nine stages once, then each kill and its
    rerun (8), in processes forked from one server that has the libraries imported (seconds a stage, not a fresh
    interpreter's import of torch, transformers, TRL and MLflow)."""
    from tools.miniature import dry_model

    proj = make_project(tmp_path, sections={k: v for k, v in SIZES.items() if k != "data"}, **SIZES["data"])
    params = yaml.safe_load((proj / "params.yaml").read_text())
    params["policy"]["model"] = str(dry_model(tmp_path / "policy"))
    (proj / "params.yaml").write_text(yaml.safe_dump(params))
    monkeypatch.setenv("RUBRICRL_GGUF_CACHE", str(tmp_path / "gguf"))  # the fork server, started next, inherits it
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)

    def run(stage: str, kill_at: str | None = None) -> int:
        for path in _declared(proj, stage):
            shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
        child = ctx.Process(target=_stage, args=(str(proj), stage, kill_at))
        child.start()
        child.join(900)
        return child.exitcode

    try:
        _chaos(proj, run)
    finally:  # the fork server (~400 MB) would otherwise live as long as pytest
        from multiprocessing import forkserver

        forkserver._forkserver._stop()


def _chaos(proj: Path, run) -> None:
    from rubricrl.stages.paths import STAGES

    reference = {}
    for stage in CHAIN:  # the uninterrupted run
        assert run(stage) == 0, stage
        if stage in KILLS:
            reference[stage] = _snapshot(proj, stage)
            assert not (proj / ".cache" / "resume" / stage).exists(), f"{stage}: resume state left after success"
    assert set(STAGES) - set(CHAIN) == set()
    assert any(k.endswith(".safetensors") for k in reference["sft"]) and any(
        k.endswith(".gguf") for k in reference["export"])
    report = []
    for stage, points in KILLS.items():
        for point in points:
            assert run(stage, point) == -9, f"{stage}: {point} was never reached"
            resume = proj / ".cache" / "resume" / stage
            assert resume.is_dir(), f"{stage}: nothing kept after the kill at {point}"
            assert run(stage) == 0, f"{stage}: the rerun after {point} failed"
            assert _snapshot(proj, stage) == reference[stage], f"{stage}: the rerun after {point} differs"
            assert not _running_runs(proj), f"{stage}: a killed MLflow run is still RUNNING"
            assert not resume.exists()
            report.append(f"{stage} killed at {point}: converged")
    print(f"chaos: {len(report)} kills, every rerun converged\n" + "\n".join(report))
    assert len(report) == sum(map(len, KILLS.values())) == 8
