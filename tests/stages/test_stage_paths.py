"""A stage owns its paths: each is declared once (rubricrl/stages/paths.py), dvc.yaml says exactly that, and no other
module spells one."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

from rubricrl.stages.paths import STAGES

ROOT = Path(__file__).resolve().parents[2]
DVC = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]


def _paths(entries) -> list[str]:
    return [next(iter(e)) if isinstance(e, dict) else e for e in entries or []]


@pytest.mark.parametrize("stage", list(STAGES))
def test_dvc_yaml_names_exactly_the_paths_the_stage_declares(stage):
    spec, declared = DVC[stage], STAGES[stage].declared()
    got = {"deps": [d for d in _paths(spec.get("deps")) if not d.endswith(".py")], "outs": _paths(spec.get("outs")),
           "metrics": _paths(spec.get("metrics")), "plots": _paths(spec.get("plots"))}
    for kind in ("deps", "outs", "metrics", "plots"):
        assert sorted(got[kind]) == sorted(declared[kind]), f"dvc.yaml {stage}.{kind} differs from rubricrl/stages/paths.py"


def test_dvc_yaml_has_a_declaration_for_every_stage():
    assert set(DVC) == set(STAGES) | {"report"}


@pytest.mark.parametrize("stage", list(STAGES))
def test_every_stage_writes_its_report_section_as_one_of_its_outputs(stage):
    decl = STAGES[stage]
    outs = decl.files("outs")
    assert any(decl.section == o or decl.section.startswith(o.rstrip("/") + "/") for o in outs), decl.section
    assert decl.section.endswith(".md")


def test_no_other_module_spells_a_stage_path():
    """Paths live in rubricrl/stages/paths.py; a string literal anywhere else in the package that is one of them
    (or lies inside a declared output folder) has drifted."""
    declared = {p for s in STAGES.values() for p in [*s.named().values(), *s.deps]}
    folders = [p for p in declared if not Path(p).suffix]
    found = []
    for path in (ROOT / "rubricrl").rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        if rel == "rubricrl/stages/paths.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
                      and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                text = node.value.rstrip("/")
                if text in declared or any(text.startswith(f + "/") for f in folders):
                    found.append(f"{rel}:{node.lineno}: {node.value!r}")
    assert not found, "stage paths spelled outside rubricrl/stages/paths.py:\n" + "\n".join(found)
