"""The project's real import graph, read with `ast` (nothing is imported or run).

Every `import` / `from ... import` counts, at module level and inside functions (a lazy import runs too),
relative imports resolved, each package `__init__.py` on the way included (Python runs it); imports under
`if TYPE_CHECKING:` never run and are skipped. Used by tests/test_layers.py (no import from a lower layer to a
higher one, no cycle) and tools/dvc_deps.py (a DVC stage's code deps are its import closure).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "rubricrl"


@dataclass(frozen=True)
class Import:
    source: str  # the importing file, relative to the root (posix)
    line: int
    target: str  # the imported project file, relative to the root (posix)
    text: str  # the import statement as written


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


def _import_nodes(tree: ast.AST):
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


def module_name(path: Path, root: Path = ROOT) -> str | None:
    rel = path.resolve().relative_to(root.resolve())
    if rel.parts[0] != PACKAGE:
        return None  # a script: relative imports do not apply
    parts = list(rel.with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(path: Path, module: str | None) -> list[tuple[int, str, str]]:
    """(line, dotted module name, statement) for every module one file imports (non-project names too)."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source, str(path))
    is_pkg = path.name == "__init__.py"
    out = []
    for node in _import_nodes(tree):
        text = ast.get_source_segment(source, node) or ""
        if isinstance(node, ast.Import):
            out += [(node.lineno, n, text) for alias in node.names for n in _with_parents(alias.name)]
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
        out += [(node.lineno, n, text) for n in _with_parents(base)]
        # `from pkg import sub` imports the submodule when there is one
        out += [(node.lineno, f"{base}.{alias.name}", text) for alias in node.names if alias.name != "*"]
    return out


def _encloses(init: Path, path: Path) -> bool:
    """`init` is the __init__.py of a package that holds `path`."""
    return init.name == "__init__.py" and init.parent in path.parents


def imports_of(path: Path, root: Path = ROOT) -> list[Import]:
    """The project files one file imports, with the line and statement of each import."""
    root = Path(root).resolve()
    path = Path(path).resolve()
    seen, out = set(), []
    for line, name, text in imported_names(path, module_name(path, root)):
        found = module_file(name, root)
        if found is None or found.resolve() == path or _encloses(found.resolve(), path):
            continue  # a file's own packages have run before it (an import of a sibling re-runs nothing)
        target = found.resolve().relative_to(root).as_posix()
        if (line, target) not in seen:
            seen.add((line, target))
            out.append(Import(path.relative_to(root).as_posix(), line, target, text))
    return out


def package_files(root: Path = ROOT) -> list[Path]:
    return sorted((Path(root) / PACKAGE).rglob("*.py"))


def graph(root: Path = ROOT) -> dict[str, list[Import]]:
    """Every file of the package -> the project files it imports."""
    root = Path(root).resolve()
    return {p.relative_to(root).as_posix(): imports_of(p, root) for p in package_files(root)}


def closure(script: str | Path, root: Path = ROOT) -> list[str]:
    """The file and every project file it imports, transitively: sorted paths relative to root."""
    root = Path(root).resolve()
    start = (root / script).resolve()
    seen, todo = {start}, [start]
    while todo:
        path = todo.pop()
        for imp in imports_of(path, root):
            found = (root / imp.target).resolve()
            if found not in seen:
                seen.add(found)
                todo.append(found)
    for path in list(seen):  # a file's packages run first: their __init__ files are part of it
        seen.update(init for parent in path.parents if parent != root and root in parent.parents
                    for init in [parent / "__init__.py"] if init.is_file())
    return sorted(p.relative_to(root).as_posix() for p in seen)


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan), each sorted."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out
