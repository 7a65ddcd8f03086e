"""The code deps of each DVC stage: the `rubricrl` files that tasks/<stage>.py imports, transitively.

Walks `import` / `from ... import` with `ast`, at module level and inside functions (a lazy import
runs too), resolving relative imports and running every package `__init__.py` on the way, as Python
does. Imports under `if TYPE_CHECKING:` never run and are skipped. tests/test_dvc_graph.py checks
dvc.yaml against this; `python -m rubricrl.dvcgraph [stage ...]` prints the expected code deps.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "rubricrl"


def module_file(name: str, root: Path = ROOT) -> Path | None:
    """The file of a project module (`rubricrl.x.y`): x/y.py or x/y/__init__.py; None if not ours."""
    if name != PACKAGE and not name.startswith(PACKAGE + "."):
        return None
    base = root.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST):
    """Import nodes anywhere in the tree, except the bodies of `if TYPE_CHECKING:`."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _with_parents(name: str) -> list[str]:
    """Importing a.b.c runs a, a.b and a.b.c."""
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def imported_modules(path: Path, module: str | None) -> set[str]:
    """Dotted names of the modules one file imports (candidates: non-project names are kept too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    is_pkg = path.name == "__init__.py"
    names: set[str] = set()
    for node in _imports(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names.update(_with_parents(alias.name))
            continue
        if node.level:  # relative: resolve against this module's package
            if module is None:
                continue
            pkg = module.split(".") if is_pkg else module.split(".")[:-1]
            pkg = pkg[: len(pkg) - (node.level - 1)]
            base = ".".join(pkg + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        if not base:
            continue
        names.update(_with_parents(base))
        for alias in node.names:  # `from pkg import sub` imports the submodule when there is one
            if alias.name != "*":
                names.add(f"{base}.{alias.name}")
    return names


def _module_name(path: Path, root: Path) -> str | None:
    rel = path.resolve().relative_to(root)
    if rel.parts[0] != PACKAGE:
        return None  # a script (tasks/x.py): relative imports do not apply
    parts = list(rel.with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def closure(script: str | Path, root: Path = ROOT) -> list[str]:
    """The script and every project file it imports, transitively: sorted paths relative to root."""
    root = Path(root).resolve()
    start = (root / script).resolve()
    seen, todo = {start}, [start]
    while todo:
        path = todo.pop()
        for name in imported_modules(path, _module_name(path, root)):
            found = module_file(name, root)
            if found is not None and found.resolve() not in seen:
                seen.add(found.resolve())
                todo.append(found.resolve())
    return sorted(p.relative_to(root).as_posix() for p in seen)


def stage_script(cmd: str) -> str:
    """`python tasks/x.py` -> tasks/x.py."""
    return next(w for w in cmd.split() if w.endswith(".py"))


def expected_code_deps(root: Path = ROOT) -> dict[str, list[str]]:
    """Stage -> code deps, for every stage of dvc.yaml."""
    import yaml

    stages = yaml.safe_load((Path(root) / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    return {name: closure(stage_script(s["cmd"]), root) for name, s in stages.items()}


def _paths(entries) -> list[str]:
    """dvc.yaml deps/outs entries are strings or one-key mappings with options."""
    return [next(iter(e)) if isinstance(e, dict) else e for e in entries or []]


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
    return dep.endswith(".py") and dep.startswith(("tasks/", PACKAGE + "/"))


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
                deps = expected.get(stage, [])
                out += [item + d for d in sorted(deps, key=lambda d: not d.startswith("tasks/"))]  # script first
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
