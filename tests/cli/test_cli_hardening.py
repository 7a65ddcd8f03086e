"""Configuration that cannot change behaviour silently, outputs that appear whole, one-line CLI errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rubricrl.core.atomic import COMMIT_MARKER, STAGING_PREFIX, atomic_open, output_set, write_json, write_jsonl
from rubricrl.cli.main import main
from rubricrl.config import load_params
from rubricrl.core.errors import ConfigError
from rubricrl.reward.load import SHIPPED, load_rubric
from tests.core.test_taskfile import GOOD, write_lines

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "rubricrl.cli.main"]


def run_cli(*args, cwd=None, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run([*CLI, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120, **kw)


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    """The CLI failed cleanly: exit 2, no traceback, one `error: ...` line (details may follow, indented)."""
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert sum(line.startswith("error: ") for line in proc.stderr.splitlines()) == 1, proc.stderr
    return proc.stderr


# --- configuration -------------------------------------------------------------------------------

def shipped_params() -> dict:
    return yaml.safe_load((ROOT / "params.yaml").read_text())


def test_a_named_params_file_that_does_not_exist_is_an_error(tmp_path):
    err = one_error_line(run_cli("config", "validate", str(tmp_path / "paramz.yaml")))
    assert f"{tmp_path / 'paramz.yaml'}: params file not found" in err
    tasks = write_lines(tmp_path / "t.jsonl", [GOOD])
    resp = write_lines(tmp_path / "r.jsonl", [{"id": "t1", "response": "{}"}])
    err = one_error_line(run_cli("score", "--tasks", str(tasks), "--responses", str(resp),
                                 "--params", str(tmp_path / "typo.yaml"), cwd=ROOT))
    assert "typo.yaml: params file not found" in err


def test_duplicate_keys_are_errors_with_their_line(tmp_path):
    path = tmp_path / "params.yaml"
    text = (ROOT / "params.yaml").read_text().replace("data:\n", "data:\n  seed: 7\n", 1)
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"params.yaml:\d+: invalid YAML: duplicate key 'seed' \(first at line \d+\)"):
        load_params(path)
    rubric = tmp_path / "r.yaml"
    rubric.write_text((SHIPPED / "json_extraction.yaml").read_text() + "\nname: again\n")
    with pytest.raises(ConfigError, match="duplicate key 'name'"):
        load_rubric(rubric)


def test_a_missing_section_is_an_error_not_a_silent_default(tmp_path):
    params = shipped_params()
    del params["eval"], params["policy"]
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    with pytest.raises(ConfigError, match="missing section\\(s\\): eval, policy"):
        load_params(path)


@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan"])
def test_non_finite_thresholds_are_rejected(tmp_path, value):
    text = (ROOT / "params.yaml").read_text()
    path = tmp_path / "params.yaml"
    path.write_text(text.replace("min_margin:", f"min_margin: {value} #", 1))
    with pytest.raises(ConfigError, match=r"rubric\.min_margin"):
        load_params(path)


def test_the_shipped_rubric_is_found_from_any_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert load_rubric("json_extraction").name == load_rubric(SHIPPED / "json_extraction.yaml").name
    with pytest.raises(ConfigError, match="not a shipped rubric \\(shipped: free_text, json_extraction"):
        load_rubric("json_extractoin")
    with pytest.raises(ConfigError, match="rubrics/nope.yaml: rubric file not found"):
        load_rubric("rubrics/nope.yaml")


# --- outputs -------------------------------------------------------------------------------------

@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_written_files_follow_the_umask(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        write_json(tmp_path / "a.json", {"x": 1})
        with output_set(tmp_path / "set") as stage:
            write_jsonl(stage / "b.jsonl", [{"y": 2}])
    finally:
        os.umask(old)
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == mode
    assert (tmp_path / "set" / "b.jsonl").stat().st_mode & 0o777 == mode


def test_nan_is_never_written_as_json(tmp_path):
    write_jsonl(tmp_path / "x.jsonl", [{"ok": 1.5}, {"bad": float("nan"), "list": [float("-inf"), 2.0]}])
    write_json(tmp_path / "y.json", {"ci": (float("nan"), float("inf"))})
    text = (tmp_path / "x.jsonl").read_text() + (tmp_path / "y.json").read_text()
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads((tmp_path / "x.jsonl").read_text().splitlines()[1]) == {"bad": None, "list": [None, 2.0]}
    assert json.loads((tmp_path / "y.json").read_text()) == {"ci": [None, None]}


def test_an_output_set_replaces_the_old_one_whole_or_not_at_all(tmp_path):
    out = tmp_path / "out"
    with output_set(out) as stage:
        (stage / "a.txt").write_text("old a")
        (stage / "b.txt").write_text("old b")
    with pytest.raises(RuntimeError):
        with output_set(out) as stage:
            (stage / "a.txt").write_text("new a")
            raise RuntimeError("crash after the first file")
    assert (out / "a.txt").read_text() == "old a" and (out / "b.txt").read_text() == "old b"
    assert not list(out.glob(f"{STAGING_PREFIX}*"))


def test_a_commit_cut_short_is_finished_and_an_uncommitted_set_dropped_by_the_next_run(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "a.txt").write_text("old a")
    (out / "b.txt").write_text("old b")
    cut = out / f"{STAGING_PREFIX}111-x"  # killed during its commit: a.txt already moved, b.txt not
    cut.mkdir()
    (cut / "b.txt").write_text("new b")
    (cut / COMMIT_MARKER).write_text("0")
    (out / "a.txt").write_text("new a")
    dead = out / f"{STAGING_PREFIX}222-y"  # killed while writing: never committed
    dead.mkdir()
    (dead / "a.txt").write_text("half")
    with output_set(out) as stage:
        (stage / "c.txt").write_text("c")
    assert {p.name: p.read_text() for p in out.glob("*.txt")} == {"a.txt": "new a", "b.txt": "new b", "c.txt": "c"}
    assert not list(out.glob(f"{STAGING_PREFIX}*"))


def test_temp_files_of_a_killed_writer_are_cleaned_by_the_next_write(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()  # a pid that no longer runs
    orphan = tmp_path / f".x.json.{proc.pid}.abc123.tmp"
    orphan.write_text("{half")
    live = tmp_path / f".x.json.{os.getpid()}.zzz.tmp"  # a writer still running: left alone
    live.write_text("{")
    with atomic_open(tmp_path / "x.json") as f:
        f.write("{}")
    assert not orphan.exists() and live.exists()


def test_two_concurrent_generate_runs_leave_one_consistent_set(tmp_path):
    out = tmp_path / "data"
    procs = [subprocess.Popen([*CLI, "data", "generate", "--seed", str(seed), "--n-train", "120", "--n-test", "40",
                               "--out-dir", str(out)], env={**os.environ, "PYTHONPATH": str(ROOT)},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for seed in (1, 2)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    splits = {name: [json.loads(line) for line in (out / f"{name}.jsonl").read_text().splitlines()]
              for name in ("train", "val", "test")}
    ids = [t["id"] for rows in splits.values() for t in rows]
    assert len(ids) == len(set(ids)), "train/val/test come from different runs"
    stats = json.loads((out / "stats.json").read_text())
    assert {name: stats[name]["n"] for name in splits} == {name: len(rows) for name, rows in splits.items()}
    assert sorted(p.name for p in out.iterdir()) == ["stats.json", "test.jsonl", "train.jsonl", "val.jsonl"]


# --- one-line CLI errors -------------------------------------------------------------------------

def test_cli_failures_are_one_error_line_and_exit_2(tmp_path):
    tasks = write_lines(tmp_path / "t.jsonl", [GOOD])
    resp = write_lines(tmp_path / "r.jsonl", [{"id": "t1", "response": "{}"}])
    (tmp_path / "bad.json").write_text("{not json")
    cases = {
        ("rubric", "gate", "--report", str(tmp_path / "missing.json")): "calibration report not found",
        ("rubric", "gate", "--report", str(tmp_path)): "is a folder",
        ("rubric", "gate", "--report", str(tmp_path / "bad.json")): "not a JSON calibration report",
        ("eval", "--model", str(tmp_path / "nomodel"), "--tasks", str(tasks)): "not a model folder",
        ("data", "validate", str(tmp_path)): str(tmp_path),
        ("score", "--tasks", str(tmp_path), "--responses", str(resp)): str(tmp_path),
        ("score", "--tasks", str(tasks), "--responses", str(resp), "--rubric", str(tmp_path)): "is a folder",
    }
    for args, expected in cases.items():
        err = one_error_line(run_cli(*args, cwd=tmp_path))
        assert expected in err, (args, err)


@pytest.mark.parametrize("flag", ["--n-train", "--n-test"])
def test_negative_sizes_are_usage_errors(tmp_path, flag):
    proc = run_cli("data", "generate", flag, "-5", "--out-dir", str(tmp_path / "d"))
    assert proc.returncode == 2 and "must be at least 1, got -5" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "d").exists()


def test_a_closed_stdout_pipe_is_not_a_traceback(tmp_path):
    tasks = write_lines(tmp_path / "t.jsonl", [GOOD])
    resp = write_lines(tmp_path / "r.jsonl", [{"id": "t1", "response": json.dumps(GOOD["reference"])}] * 400)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([*CLI, "score", "--tasks", str(tasks), "--responses", str(resp)], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.read(10)
    proc.stdout.close()  # the reader goes away, like `| head -c 10`
    err = proc.stderr.read().decode()
    proc.wait(timeout=120)
    assert "Traceback" not in err and proc.returncode == 2, err


def test_debug_shows_the_traceback(tmp_path):
    proc = run_cli("--debug", "rubric", "gate", "--report", str(tmp_path / "missing.json"), cwd=tmp_path)
    assert proc.returncode != 0 and "Traceback" in proc.stderr
