"""The code deps of each DVC stage: its script (tasks/<stage>.py, dvc.yaml's command) and the `rubricrl` files it
imports, transitively (dev tool).

The import closure comes from tools/imports.py (module level and lazy imports, package __init__ files included,
`if TYPE_CHECKING:` skipped). tests/stages/test_dvc_graph.py checks dvc.yaml against it;
`python -m tools.dvc_deps [stage ...]` prints the expected code deps and `python -m tools.dvc_deps --write`
rewrites them into dvc.yaml.
"""

from __future__ import annotations

import sys
from pathlib import Path

from rubricrl.stages.graph import entry_paths as _paths
from tools.imports import PACKAGE, ROOT, closure, module_file

SCRIPTS = "tasks"  # the stages' scripts: project files beside the package, not part of it


def stage_script(cmd: str) -> str:
    """The entry file of a stage command: `python tasks/x.py` -> tasks/x.py (`python -m rubricrl.stages.x` ->
    rubricrl/stages/x.py)."""
    words = cmd.split()
    if "-m" in words:
        module = words[words.index("-m") + 1]
        path = Path(*module.split("."))
        return (path / "__main__.py").as_posix() if (ROOT / path).is_dir() else path.with_suffix(".py").as_posix()
    return next(w for w in words if w.endswith(".py"))


def stage_module(cmd: str, root: Path = ROOT) -> str:
    """The package module that does a stage's work: the one its script takes `main` from
    (`from rubricrl.stages.x import main` -> rubricrl/stages/x.py); a command that runs a module: that module."""
    import ast

    root = Path(root)
    script = stage_script(cmd)
    tree = ast.parse((root / script).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and any(a.name == "main" for a in node.names):
            found = module_file(node.module, root)
            if found is not None:
                return found.relative_to(root).as_posix()
    return script


def expected_code_deps(root: Path = ROOT) -> dict[str, list[str]]:
    """Stage -> code deps, for every stage of dvc.yaml: its script first, then what it imports."""
    import yaml

    stages = yaml.safe_load((Path(root) / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    out = {}
    for name, s in stages.items():
        script = stage_script(s["cmd"])
        out[name] = [script] + [d for d in closure(script, root) if d != script]
    return out


def scratch_project(dst: Path, root: Path = ROOT, out_bytes: int = 64) -> Path:
    """A copy of the stage graph in dst (dvc.yaml, params.yaml, the code deps) with placeholder outputs,
    every stage committed as up to date (`dvc commit -f`): for checks of `dvc status` and `dvc repro`
    that must not train anything. Needs DVC in this interpreter."""
    import os
    import shutil
    import subprocess

    import yaml

    root, dst = Path(root), Path(dst)
    dst.mkdir(parents=True, exist_ok=True)
    stages = yaml.safe_load((root / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    outs = {p for s in stages.values() for k in ("outs", "metrics", "plots") for p in _paths(s.get(k))}
    produced = lambda p: any(p == o or p.startswith(o.rstrip("/") + "/") for o in outs)  # noqa: E731
    for rel in ["dvc.yaml", "params.yaml"] + [d for s in stages.values() for d in _paths(s.get("deps"))]:
        if not produced(rel) and not (dst / rel).exists():
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            if (root / rel).is_dir():  # a data folder dep (e.g. package data)
                shutil.copytree(root / rel, dst / rel)
            else:
                shutil.copy2(root / rel, dst / rel)
    for rel in outs:
        path = dst / rel
        if not path.suffix:  # a folder output (a model, the eval folder)
            path, rel = path / "placeholder.bin", rel + "/placeholder.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes((rel.encode() * (out_bytes // len(rel) + 1))[:out_bytes])
    for rel in {d for s in stages.values() for d in _paths(s.get("deps"))}:
        path = dst / rel
        if produced(rel) and not path.exists():  # a dep inside a folder output (e.g. outputs/general/base)
            path, rel = (path / "placeholder.bin", rel + "/placeholder.bin") if not path.suffix else (path, rel)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes((rel.encode() * (out_bytes // len(rel) + 1))[:out_bytes])
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    for args in (["init", "--no-scm", "-q"], ["commit", "-f", "-q"]):
        subprocess.run([sys.executable, "-m", "dvc", *args], cwd=dst, env=env, check=True, capture_output=True)
    return dst


def is_code(dep: str) -> bool:
    return dep.endswith(".py") and dep.startswith((PACKAGE + "/", SCRIPTS + "/"))


def write_code_deps(root: Path = ROOT) -> bool:
    """Rewrite the code deps of every stage in dvc.yaml to its import closure, keeping comments and the
    other deps (code deps come first); True when the file changed."""
    path = Path(root) / "dvc.yaml"
    expected = expected_code_deps(root)
    lines, out, stage, in_deps = path.read_text(encoding="utf-8").splitlines(), [], None, False
    for line in lines:
        stripped, indent = line.strip(), len(line) - len(line.lstrip())
        if indent == 2 and stripped.endswith(":") and not stripped.startswith("#"):
            stage, in_deps = stripped[:-1], False
        elif indent == 4 and stripped:
            in_deps = stripped == "deps:"
            if in_deps:
                out.append(line)
                item = " " * 6 + "- "
                out += [item + d for d in expected.get(stage, [])]
                continue
        if in_deps and stripped.startswith("- ") and is_code(stripped[2:].strip()):
            continue
        out.append(line)
    if out == lines:
        return False
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return True


def main(argv: list[str]) -> None:
    if argv[:1] == ["--write"]:
        print("dvc.yaml: code deps " + ("rewritten from the import closures" if write_code_deps() else "up to date"))
        return
    for name, deps in expected_code_deps().items():
        if argv and name not in argv:
            continue
        print(f"{name}:")
        for d in deps:
            print(f"  - {d}")


if __name__ == "__main__":
    main(sys.argv[1:])
