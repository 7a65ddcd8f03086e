"""The house by layer: a module imports only its own layer or the ones below, and no import goes in a circle.

Layers (lowest first), as folders of rubricrl/:
  0 core                                    errors, atomic writes, readers, the task format, prompt
  1 config.py                               every settings model
  2 reward, metrics, inference, data, tracking
  3 calibrate, evaluate, train, general, release
  4 stages                                  one module per DVC stage
  5 report                                  assembles the stages' report sections
  6 flow                                    the Prefect flow (the only importer of Prefect)
  7 cli                                     the `rubricrl` command
Above the package, beside it in the project (scripts, not installed, imported by nothing):
  tasks/   the DVC stages' scripts (dvc.yaml's commands): a stage module and core only, never the flow or the CLI
  flows/   the Prefect flows prefect.yaml deploys: rubricrl.flow only
The imports are the real ones (tools/imports.py: module level and inside functions), so a lazy import that
points up fails here too, naming its file and line.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.imports import Import, closure, cycles, graph, imported_names, imports_of, package_files

ROOT = Path(__file__).resolve().parent.parent
LAYERS = {
    "core": 0, "config.py": 1,
    "reward": 2, "metrics": 2, "inference": 2, "data": 2, "tracking": 2,
    "calibrate": 3, "evaluate": 3, "train": 3, "general": 3, "release": 3,
    "stages": 4, "report": 5, "flow": 6, "cli": 7,
}
GRAPH = graph(ROOT)
# The entry points above the package: folder -> the rooms of rubricrl/ its files may import directly.
TOP = {"tasks": {"", "core", "stages", "report"}, "flows": {"", "flow"}}


def room(path: str) -> str:
    """The top-level folder (or module) of rubricrl/ a file belongs to; '' for rubricrl/__init__.py."""
    parts = Path(path).parts
    return "" if parts[1:] == ("__init__.py",) else parts[1]


def layer(path: str) -> int:
    r = room(path)
    return 0 if r == "" else LAYERS[r]


def _describe(imp: Import) -> str:
    return f"{imp.source}:{imp.line}: {imp.text.splitlines()[0]} -> {imp.target}"


def test_every_room_has_a_layer():
    rooms = {room(p) for p in GRAPH} - {""}
    assert rooms <= set(LAYERS), f"rooms without a layer in tests/test_layers.py: {sorted(rooms - set(LAYERS))}"
    assert set(LAYERS) <= rooms, f"layers without a room: {sorted(set(LAYERS) - rooms)}"


def test_no_import_points_up():
    upward = [_describe(imp) for imports in GRAPH.values() for imp in imports
              if layer(imp.target) > layer(imp.source)]
    assert not upward, "imports from a lower layer to a higher one:\n" + "\n".join(upward)


def test_no_file_imports_in_a_circle():
    found = cycles({src: {imp.target for imp in imports} for src, imports in GRAPH.items()})
    assert not found, "import cycles between files:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_no_room_imports_in_a_circle():
    edges: dict[str, set[str]] = {}
    for src, imports in GRAPH.items():
        for imp in imports:
            a, b = room(src), room(imp.target)
            if a and b and a != b:
                edges.setdefault(a, set()).add(b)
    found = cycles(edges)
    where = [_describe(imp) for src, imports in GRAPH.items() for imp in imports
             for c in found if room(src) in c and room(imp.target) in c and room(src) != room(imp.target)]
    assert not found, f"import cycles between rooms {found}:\n" + "\n".join(where)


def test_only_the_flow_imports_prefect():
    import ast

    below = []
    for path in (ROOT / "rubricrl").rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        if room(rel) in ("flow", "cli"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            below += [f"{rel}:{node.lineno}" for n in names if n.split(".")[0] == "prefect"]
    assert not below, f"Prefect imported below the flow (dvc repro must never need it): {below}"


def test_the_entry_points_import_only_the_layer_below_them():
    """tasks/ -> a stage module (rubricrl/stages/*, rubricrl/report/stage.py) and core; flows/ -> rubricrl.flow."""
    found = {}
    for top, rooms in TOP.items():
        files = sorted((ROOT / top).glob("*.py"))
        assert files, f"{top}/ has no entry point"
        for path in files:
            imports = imports_of(path, ROOT)
            assert imports, f"{path.relative_to(ROOT)} imports nothing of the package"
            found[top] = found.get(top, []) + [_describe(i) for i in imports if room(i.target) not in rooms]
    assert found == {top: [] for top in TOP}, found
    stage_modules = {i.target for p in (ROOT / "tasks").glob("*.py") for i in imports_of(p, ROOT)
                     if room(i.target) in ("stages", "report") and not i.target.endswith("__init__.py")}
    assert {room(t) for t in stage_modules} == {"stages", "report"}
    assert all(t.startswith("rubricrl/stages/") or t == "rubricrl/report/stage.py" for t in stage_modules)


def test_no_stage_script_needs_the_flow_or_the_cli():
    """`dvc repro` never imports Prefect: no tasks/ script reaches rubricrl/flow or rubricrl/cli, even lazily."""
    reached = {p.name: [f for f in closure(p.relative_to(ROOT), ROOT) if f.startswith("rubricrl/")
                        and room(f) in ("flow", "cli")] for p in (ROOT / "tasks").glob("*.py")}
    assert not any(reached.values()), reached


def test_nothing_in_the_package_imports_an_entry_point():
    below = [f"{p.relative_to(ROOT)}:{line}: {text}" for p in package_files(ROOT)
             for line, name, text in imported_names(p, None) if name.split(".")[0] in TOP]
    assert not below, below


def test_the_check_names_the_offending_line(tmp_path):
    """The walker finds a lazy import inside a function and reports its file and line."""
    pkg = tmp_path / "rubricrl"
    (pkg / "core").mkdir(parents=True)
    (pkg / "flow").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "core" / "__init__.py").write_text("")
    (pkg / "flow" / "__init__.py").write_text("")
    (pkg / "flow" / "pipeline.py").write_text("")
    (pkg / "core" / "low.py").write_text("import os\n\n\ndef f():\n    from rubricrl.flow import pipeline\n")
    imports = imports_of(pkg / "core" / "low.py", tmp_path)
    up = [i for i in imports if layer(i.target) > layer(i.source)]
    assert [(i.line, i.target) for i in up] == [(5, "rubricrl/flow/__init__.py"), (5, "rubricrl/flow/pipeline.py")]
    assert _describe(up[0]).startswith("rubricrl/core/low.py:5: from rubricrl.flow import pipeline")


@pytest.mark.parametrize("edges, found", [
    ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ({"a": {"b"}, "b": set()}, []),
])
def test_cycles_are_found(edges, found):
    assert cycles(edges) == found


def test_the_readme_layout_table_matches_the_tree():
    """Every room of the package has its row in README's layout table, and every path the table names exists."""
    import re

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("| path | what |"):]
    table = table[: table.index("\n\n")]
    named = re.findall(r"^\| `([^`]+)`", table, re.M)
    paths = [p.strip() for cell in named for p in cell.split(",")]
    assert all((ROOT / p.strip("`").strip()).exists() for p in paths), [p for p in paths if not (ROOT / p).exists()]
    rooms = {f"rubricrl/{room(p)}" + ("" if room(p).endswith(".py") else "/") for p in GRAPH if room(p)}
    assert rooms <= set(paths), f"rooms missing from README's layout table: {sorted(rooms - set(paths))}"
