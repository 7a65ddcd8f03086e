"""dvc.yaml tells the truth: each stage depends on exactly the code it imports, the data it reads and the
params it reads, so that one change reruns exactly the stages it can affect."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

from rubricrl.config import Params
from tools.dvc_deps import _paths, closure, scratch_project, stage_module, stage_script

ROOT = Path(__file__).resolve().parents[2]
STAGES = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
UNTRACKED_PARAMS = {"tracking"}  # where runs are logged, not what a stage computes (see dvc.yaml)
ENV = {**os.environ, "DVC_NO_ANALYTICS": "1"}


def is_package_data(path: str) -> bool:
    """A data folder shipped inside the package (e.g. rubricrl/general/data, the free-text reference set
    rubricrl/data/reference/free_text: a folder with no Python in it), read by the modules beside it, or a shipped
    rubric (rubricrl/reward/rubrics/*.yaml)."""
    folder = ROOT / path
    return path.startswith("rubricrl/") and not path.endswith(".py") and (
        Path(path).name == "data" or path.endswith(".yaml")
        or (folder.is_dir() and not any(folder.rglob("*.py"))))


def is_code(path: str) -> bool:
    return (path.startswith(("rubricrl/", "tasks/")) or path.endswith(".py")) and not is_package_data(path)


def related(a: str, b: str) -> bool:
    """The same path, or one inside the other."""
    a, b = a.rstrip("/"), b.rstrip("/")
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def dvc(cwd: Path, *args: str) -> str:
    res = subprocess.run([sys.executable, "-m", "dvc", *args], cwd=cwd, env=ENV, capture_output=True, text=True)
    assert res.returncode == 0, f"dvc {' '.join(args)}: {res.stdout}{res.stderr}"
    return res.stdout


# --- the closure itself ---------------------------------------------------------------------------

def test_closure_follows_relative_lazy_and_package_imports_but_not_type_checking(tmp_path):
    files = {
        "rubricrl/__init__.py": "",
        "rubricrl/a.py": "from . import b\n\ndef f():\n    from .sub import c  # lazy\n",
        "rubricrl/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from rubricrl import typed\n",
        "rubricrl/typed.py": "",
        "rubricrl/sub/__init__.py": "",
        "rubricrl/sub/c.py": "from .. import e\nimport os\n",
        "rubricrl/sub/unused.py": "",
        "rubricrl/e.py": "",
        "tasks/s.py": "import rubricrl.a\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert closure("tasks/s.py", tmp_path) == sorted([
        "rubricrl/__init__.py", "rubricrl/a.py", "rubricrl/b.py", "rubricrl/e.py", "rubricrl/sub/__init__.py",
        "rubricrl/sub/c.py", "tasks/s.py"])


# --- deps -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("stage", sorted(STAGES))
def test_code_deps_are_exactly_the_import_closure(stage):
    spec = STAGES[stage]
    listed = {d for d in _paths(spec.get("deps")) if is_code(d)}
    expected = set(closure(stage_script(spec["cmd"]), ROOT))
    missing, extra = sorted(expected - listed), sorted(listed - expected)
    assert not missing and not extra, (
        f"stage '{stage}': code deps differ from what {stage_script(spec['cmd'])} imports; "
        f"missing: {missing}; superfluous (not imported, or a folder): {extra}. "
        f"Print the expected list with `python -m tools.dvc_deps {stage}`.")


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_data_deps_are_the_paths_the_stage_declares(stage):
    """A stage module names no path itself (tests/stages/test_stage_paths.py): its data deps and outputs are its
    declaration in rubricrl/stages/paths.py (the report stage: rubricrl.report.stage.deps)."""
    from rubricrl.report.stage import deps as report_deps
    from rubricrl.stages.paths import STAGES as DECLARED

    spec = STAGES[stage]
    data_deps = [d for d in _paths(spec.get("deps")) if not is_code(d) or is_package_data(d)]
    declared = report_deps() if stage == "report" else DECLARED[stage].declared()["deps"]
    assert sorted(data_deps) == sorted(declared), f"stage '{stage}': dvc.yaml data deps differ from its declaration"


# --- params ---------------------------------------------------------------------------------------

def key_model(key: str):
    """The pydantic model at a dotted params key (None for a leaf); KeyError if no such key."""
    model = Params
    for part in key.split("."):
        if model is None or part not in model.model_fields:
            raise KeyError(key)
        ann = model.model_fields[part].annotation
        model = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None
    return model


def longest_key(chain: list[str]) -> str | None:
    best = None
    for i in range(1, len(chain) + 1):
        try:
            key_model(".".join(chain[:i]))
            best = ".".join(chain[:i])
        except KeyError:
            break
    return best


def script_param_reads(script: Path) -> tuple[set[str], bool]:
    """The params keys a stage module (the one its tasks/ script runs) reads itself (params.x.y, and aliases like
    cfg = params.x), and whether it hands the whole Params object to a function (then only the forward check
    applies)."""
    tree = ast.parse(script.read_text(encoding="utf-8"))

    def chain(node) -> list[str] | None:
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name) and node.id in aliases:
            return aliases[node.id] + parts[::-1]
        return None

    aliases: dict[str, list[str]] = {"params": []}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            c = chain(node.value)
            if c and node.targets[0].id != "params":
                aliases[node.targets[0].id] = c
    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    reads, opaque = set(), False
    for node in ast.walk(tree):
        if id(node) in inner or not isinstance(node, (ast.Attribute, ast.Name)):
            continue
        c = chain(node)
        if c is None:
            continue
        if not c:
            opaque = opaque or isinstance(node.ctx, ast.Load) and not isinstance(node, ast.Attribute) and any(
                node in call.args or any(k.value is node for k in call.keywords)
                for call in ast.walk(tree) if isinstance(call, ast.Call))
            continue
        key = longest_key(c)
        if key:
            reads.add(key)
    return reads, opaque


def test_every_params_entry_is_a_real_key():
    for name, spec in STAGES.items():
        for key in spec.get("params", []):
            assert isinstance(key, str), f"stage '{name}': params entry {key!r}: only params.yaml keys are used"
            try:
                key_model(key)
            except KeyError:
                pytest.fail(f"stage '{name}': params entry '{key}' is not a key of rubricrl.config.Params")


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_params_cover_what_the_script_reads(stage):
    spec = STAGES[stage]
    listed = spec.get("params", [])
    assert not [k for k in listed if k.split(".")[0] in UNTRACKED_PARAMS], \
        f"stage '{stage}': tracking settings must not be params deps (changing the MLflow URI must not retrain)"
    reads, opaque = script_param_reads(ROOT / stage_module(spec["cmd"]))
    reads = {k for k in reads if k.split(".")[0] not in UNTRACKED_PARAMS}
    unlisted = sorted(r for r in reads if not any(related(r.replace(".", "/"), k.replace(".", "/")) for k in listed))
    assert not unlisted, f"stage '{stage}': reads params {unlisted}, not in its dvc.yaml params"
    if not opaque:  # the script alone shows every read: nothing listed may be unread
        unread = sorted(k for k in listed if not any(related(r.replace(".", "/"), k.replace(".", "/")) for r in reads))
        assert not unread, f"stage '{stage}': dvc.yaml params {unread} are never read by its script"


# --- DVC itself, on a scratch copy with placeholder outputs ---------------------------------------

@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    pytest.importorskip("dvc")
    proj = scratch_project(tmp_path_factory.mktemp("dvc") / "proj", ROOT)
    assert json.loads(dvc(proj, "status", "--json") or "{}") == {}, "the scratch graph starts up to date"
    return proj


def set_param(params: dict, key: str, value) -> None:
    *parents, last = key.split(".")
    for p in parents:
        params = params[p]
    params[last] = value


CHANGES = [  # (what changes, the only stages `dvc status` may report)
    ("param:eval.n_boot=2000", {"eval_task", "distill"}),
    ("param:grpo.beta=0.04", {"grpo"}),
    ("param:grpo.temperature=0.7", {"rubric", "grpo"}),
    ("param:scoring.judge=openai", {"rubric", "grpo", "eval_task", "distill", "export"}),
    ("param:tracking.uri=sqlite:////tmp/elsewhere.db", set()),
    ("code:rubricrl/train/monitor.py", {"grpo"}),
    ("code:rubricrl/metrics/paired.py", {"eval_task", "eval_general", "distill"}),
    ("code:rubricrl/metrics/rise.py", {"grpo"}),  # the hack monitor's rule
    ("code:rubricrl/general/qa.py", {"eval_general", "distill"}),  # distill scores the student on the suites too
    ("param:general.tolerance.qa=0.2", {"eval_general", "distill"}),
    ("code:rubricrl/data/domains/news.py", {"data"}),
    # The reward's number normaliser and its rules: only the stages that score rerun (SFT stays up to date).
    ("code:rubricrl/reward/grounding/numbers.py", {"rubric", "grpo", "eval_task", "distill", "export"}),
    ("code:rubricrl/reward/rules.py", {"rubric", "grpo", "eval_task", "distill", "export"}),
    ("code:rubricrl/core/tables.py", set(STAGES) - {"report"}),  # every stage writes its section with it
    ("code:tasks/grpo.py", {"grpo"}),  # a stage's script: that stage only
    ("code:rubricrl/stages/eval_general.py", {"eval_general"}),
]


@pytest.mark.slow
@pytest.mark.parametrize("change,stages", CHANGES, ids=[c for c, _ in CHANGES])
def test_dvc_status_reports_exactly_the_stages_a_change_affects(scratch, change, stages):
    kind, what = change.split(":", 1)
    path = scratch / ("params.yaml" if kind == "param" else what)
    original = path.read_text(encoding="utf-8")
    try:
        if kind == "param":
            key, value = what.split("=", 1)
            params = yaml.safe_load(original)
            set_param(params, key, yaml.safe_load(value))
            path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
        else:
            path.write_text(original + "\n# edited\n", encoding="utf-8")
        changed = set(json.loads(dvc(scratch, "status", "--json") or "{}"))
    finally:
        path.write_text(original, encoding="utf-8")
    assert changed == stages, f"{change}: dvc status reports {sorted(changed)}, expected {sorted(stages)}"


def test_dvc_repro_with_nothing_changed_runs_nothing(scratch):
    out = dvc(scratch, "repro")
    assert "Running stage" not in out and "up to date" in out, out


def test_default_remote_is_the_local_folder():
    pytest.importorskip("dvc")
    assert dvc(ROOT, "remote", "default").strip() == "local"
    url = dvc(ROOT, "remote", "list").split()
    assert url[url.index("local") + 1] == str(Path.home() / ".cache" / "rubricrl" / "dvc-remote")


STUB = """import json, pathlib, sys, yaml
stage = sys.argv[1]
spec = yaml.safe_load(open("dvc.yaml"))["stages"][stage]
tag = json.dumps(yaml.safe_load(open("params.yaml")), sort_keys=True)
outs = [next(iter(e)) if isinstance(e, dict) else e for e in spec.get("outs", []) + spec.get("metrics", []) + spec.get("plots", [])]
deps = {d for s in yaml.safe_load(open("dvc.yaml"))["stages"].values() for d in s.get("deps", [])}
outs += [d for d in deps if any(d.startswith(o.rstrip("/") + "/") for o in outs)]  # deps inside a folder output
for e in outs:
    p = pathlib.Path(e)
    if not p.suffix:
        p = p / "placeholder.bin"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps({"beta": yaml.safe_load(open("params.yaml"))["grpo"]["beta"]}) if p.suffix == ".json" else tag)
"""


@pytest.mark.slow
def test_dvc_exp_run_sets_a_param_and_exp_show_lists_it(tmp_path):
    """`dvc exp run -S grpo.beta=0.04` on the real graph, its commands replaced by stubs that write outputs."""
    pytest.importorskip("dvc")
    proj = scratch_project(tmp_path / "proj", ROOT)
    (proj / "stub.py").write_text(STUB)
    spec = yaml.safe_load((proj / "dvc.yaml").read_text())
    for name, stage in spec["stages"].items():
        stage["cmd"] = f"{sys.executable} stub.py {name}"
    (proj / "dvc.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    (proj / ".gitignore").write_text("/data/\n/outputs/\n/metrics/\n")  # as the project's
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q"], cwd=proj, check=True)
    (proj / ".dvc" / "config").unlink(missing_ok=True)
    subprocess.run([sys.executable, "-m", "dvc", "init", "-f", "-q"], cwd=proj, env=ENV, check=True)
    dvc(proj, "repro", "-f")
    subprocess.run(git + ["add", "-A"], cwd=proj, check=True)
    subprocess.run(git + ["commit", "-qm", "baseline"], cwd=proj, check=True)
    dvc(proj, "exp", "run", "-S", "grpo.beta=0.04", "-n", "beta004")
    rows = json.loads(dvc(proj, "exp", "show", "--json"))
    exps = [rev for row in rows for e in row.get("experiments") or [] for rev in e["revs"]]
    exp = next(r for r in exps if r["name"] == "beta004")
    assert exp["data"]["params"]["params.yaml"]["data"]["grpo"]["beta"] == 0.04
    assert exp["data"]["metrics"]["metrics/grpo.json"]["data"] == {"beta": 0.04}  # cached metrics: visible per experiment


def test_the_plot_files_carry_the_columns_dvc_yaml_plots(tmp_path):
    """history.csv / monitor.csv (grpo) and summary.csv (eval_task) have every column the plots name."""
    import csv

    from rubricrl.core.atomic import write_csv
    from rubricrl.train.section import HISTORY_COLUMNS, MONITOR_COLUMNS, history_rows, monitor_rows
    from rubricrl.stages.eval_task import summary_rows

    log = [{"step": 1, "reward": 3.0, "reward_std": 1.0, "kl": 0.01, "completions/mean_length": 80.0},
           {"step": 1, "monitor/reward": 9.0, "monitor/field_accuracy": 0.5, "monitor/invented_rate": float("nan"),
            "monitor/null_for_present_rate": 0.1, "monitor/exact_object_rate": 0.2},
           {"step": 2, "reward": 3.5, "kl": 0.02}, {"train_runtime": 10.0}]
    h = {"n": 10, "reward_mean": 9.0, "reward_ci": [8.0, 10.0], "json_valid_rate": 1.0,
         "strict": {"field_accuracy": 0.6, "field_accuracy_ci": [0.5, 0.7]}}
    files = {"outputs/grpo/history.csv": (history_rows(log), HISTORY_COLUMNS),
             "outputs/grpo/monitor.csv": (monitor_rows(log), MONITOR_COLUMNS)}
    rows = summary_rows({"sft": {"all": h, "in_domain": h}})
    files["outputs/eval/summary.csv"] = (rows, {k: k for k in rows[0]})
    read = {}
    for rel, (data, columns) in files.items():
        write_csv(tmp_path / "f.csv", data, columns)
        read[rel] = list(csv.DictReader((tmp_path / "f.csv").open()))
    assert [r["step"] for r in read["outputs/grpo/history.csv"]] == ["1", "2"]
    assert read["outputs/grpo/monitor.csv"][0]["invented_rate"] == ""  # NaN is an empty cell, not "nan"
    assert read["outputs/eval/summary.csv"][1]["label"] == "sft/in_domain"
    for plot in yaml.safe_load((ROOT / "dvc.yaml").read_text())["plots"]:
        (spec,) = plot.values()
        for rel, cols in spec["y"].items():
            names = [cols] if isinstance(cols, str) else cols
            header = read[rel][0].keys()
            assert {spec["x"], *names} <= set(header), (rel, spec)
