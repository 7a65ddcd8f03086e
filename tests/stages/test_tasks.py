"""The stages' entry points: dvc.yaml runs `python tasks/<stage>.py`, a script of a few lines that calls its stage
module's main() under stage_main, as `python -m rubricrl.stages.<stage>` does; `dvc repro` and the script itself
work in a fresh copy of the project, and run that copy's code."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.flow.test_pipeline import make_project
from tools.dvc_deps import stage_module, stage_script

ROOT = Path(__file__).resolve().parents[2]
STAGES = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
BIN = Path(sys.executable).parent
ENV = {**os.environ, "DVC_NO_ANALYTICS": "1", "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def test_every_stage_runs_its_own_script_and_every_script_is_a_stage():
    assert {name: s["cmd"] for name, s in STAGES.items()} == {name: f"python tasks/{name}.py" for name in STAGES}
    assert sorted(p.stem for p in (ROOT / "tasks").glob("*.py")) == sorted(STAGES)
    assert not (ROOT / "tasks" / "__init__.py").exists()  # scripts, not a package (nothing imports them)


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_a_script_only_calls_its_stage_modules_main(stage):
    """The `__main__` block: the project root on sys.path, then stage_main(main) from the stage module, which is
    what that module's own `__main__` block runs. No logic of its own."""
    script = stage_script(STAGES[stage]["cmd"])
    module = stage_module(STAGES[stage]["cmd"])
    assert module == ("rubricrl/report/stage.py" if stage == "report" else f"rubricrl/stages/{stage}.py")
    tree = ast.parse((ROOT / script).read_text(encoding="utf-8"))
    *imports, main_block = tree.body[1:]
    assert [ast.unparse(n) for n in imports] == ["import sys", "from pathlib import Path"]
    assert ast.unparse(main_block.test) == "__name__ == '__main__'"
    dotted = module[:-3].replace("/", ".")
    assert [ast.unparse(n) for n in main_block.body] == [
        "sys.path[0] = str(Path(__file__).resolve().parents[1])",
        "from rubricrl.core.entry import stage_main", f"from {dotted} import main", "stage_main(main)"]
    stage_tree = ast.parse((ROOT / module).read_text(encoding="utf-8"))
    assert any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in stage_tree.body)
    own_main = [n for n in stage_tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "__name__ == '__main__'"]
    assert [ast.unparse(n) for n in own_main[0].body] == ["stage_main(main)"]  # `python -m` runs the same


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_a_stage_depends_on_its_script_first(stage):
    deps = STAGES[stage]["deps"]
    assert deps[0] == f"tasks/{stage}.py", f"stage '{stage}': its script is not its first dep"


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A fresh git copy of the project (tests/flow/test_pipeline.make_project), small data, MLflow off."""
    return make_project(tmp_path_factory.mktemp("tasks"), sections={"tracking": {"enabled": False}},
                        n_train=40, n_test=12, n_val=10)


def test_the_script_writes_the_data_stage_outputs_with_the_copys_code(tmp_path):
    proj = make_project(tmp_path, sections={"tracking": {"enabled": False}}, n_train=40, n_test=12, n_val=10)
    stage = proj / "rubricrl" / "stages" / "data.py"  # the copy's module says it ran (not the checkout's, nor
    stage.write_text(stage.read_text() + "\nprint('ran', __file__)\n")  # the installed one)
    res = subprocess.run([sys.executable, "tasks/data.py"], cwd=proj, env=ENV, text=True, capture_output=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"ran {stage}" in res.stdout
    assert len((proj / "data" / "train.jsonl").read_text().splitlines()) == 40
    assert json.loads((proj / "metrics" / "data.json").read_text())["test"]["n"] == 12
    assert (proj / "data" / "val.jsonl").is_file() and (proj / "outputs" / "sections" / "data.md").is_file()


def test_the_script_fails_as_the_module_does(project):
    """The `error:` message and exit 2 of `python -m rubricrl.stages.data` (the same stage_main); nothing written."""
    env = {**ENV, "RUBRICRL_PARAMS_OVERLAY": str(project.parent / "bad.yaml")}
    (project.parent / "bad.yaml").write_text("data:\n  source: file\n  tasks_file: missing.jsonl\n")
    runs = [subprocess.run([sys.executable, *cmd], cwd=project, env=env, text=True, capture_output=True, timeout=120)
            for cmd in (["tasks/data.py"], ["-m", "rubricrl.stages.data"])]
    assert [r.returncode for r in runs] == [2, 2]
    assert runs[0].stderr == runs[1].stderr and runs[0].stderr.startswith("error: ")
    assert "missing.jsonl: file not found" in runs[0].stderr and "Traceback" not in runs[0].stderr
    assert not (project / "data").exists()


def test_dvc_repro_runs_the_stage_through_its_script(project):
    pytest.importorskip("dvc")
    res = subprocess.run([sys.executable, "-m", "dvc", "repro", "--single-item", "data"], cwd=project, env=ENV,
                         text=True, capture_output=True, timeout=180)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Running stage 'data'" in res.stdout and "> python tasks/data.py" in res.stdout, res.stdout
    assert len((project / "data" / "train.jsonl").read_text().splitlines()) == 40
    lock = yaml.safe_load((project / "dvc.lock").read_text())["stages"]["data"]
    assert lock["cmd"] == "python tasks/data.py"
    assert "tasks/data.py" in {d["path"] for d in lock["deps"]}
    again = subprocess.run([sys.executable, "-m", "dvc", "status", "data"], cwd=project, env=ENV, text=True,
                           capture_output=True, timeout=120)
    assert "up to date" in again.stdout, again.stdout + again.stderr
    script = project / "tasks" / "data.py"  # editing the stage's script reruns it
    script.write_text(script.read_text() + "# edited\n")
    changed = subprocess.run([sys.executable, "-m", "dvc", "status", "--json", "data"], cwd=project, env=ENV, text=True,
                             capture_output=True, timeout=120)
    assert set(json.loads(changed.stdout or "{}")) == {"data"}, changed.stdout + changed.stderr
