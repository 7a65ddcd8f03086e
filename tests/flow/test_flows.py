"""The Prefect side of the pipeline, against a temporary Prefect server (prefect_test_harness, started once):
one run at a time, a failed stage named in Prefect and MLflow, retries only for network stages, the
retrigger on a changed task file, `pipeline status`. Flow runs use a scratch project whose dvc.yaml
stages are shell commands, so no training runs."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import rubricrl.flow.pipeline as fp  # noqa: E402  (sets the Prefect environment before prefect is imported)
import rubricrl.flow.serve as fs  # noqa: E402
from rubricrl.config import PipelineParams, load_params  # noqa: E402
from rubricrl.core.errors import ConfigError  # noqa: E402

WAITING = "another pipeline run is in progress"


@pytest.fixture(scope="session")
def prefect_api():
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        yield


def client():
    from prefect.client.orchestration import get_client

    return get_client(sync_client=True)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """A DVC project with two stages: `sleep` logs when it starts and ends, `boom` fails like a stage script."""
    proj = tmp_path_factory.mktemp("flows") / "proj"
    proj.mkdir()
    log = proj.parent / "spans.log"
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["tracking"].update(uri=f"sqlite:///{proj.parent / 'mlflow.db'}", artifact_root=str(proj.parent / "art"))
    (proj / "params.yaml").write_text(yaml.safe_dump(params))
    (proj / "dvc.yaml").write_text(yaml.safe_dump({"stages": {
        "sleep": {"cmd": f"echo start $(date +%s.%N) >> {log} && sleep 2 && echo end $(date +%s.%N) >> {log}"},
        "boom": {"cmd": "echo 'error: judge said no' >&2; exit 3"},
        "make": {"cmd": "echo made > made.txt", "outs": ["made.txt"]}}}))
    os.environ.setdefault("DVC_NO_ANALYTICS", "1")
    import subprocess

    subprocess.run([sys.executable, "-m", "dvc", "init", "--no-scm", "-q"], cwd=proj, check=True)
    subprocess.run([sys.executable, "-m", "dvc", "remote", "add", "-d", "local", str(proj.parent / "remote")],
                   cwd=proj, check=True)
    return proj


@pytest.fixture(scope="module")
def two_runs(prefect_api, scratch):
    """Two runs of the same project, the second started while the first holds the slot."""
    import io
    from contextlib import redirect_stderr

    states = {}

    def go(tag):
        states[tag] = fp.pipeline(stages=["sleep"], force=True, project=str(scratch), return_state=True)

    err = io.StringIO()
    with redirect_stderr(err):
        first = threading.Thread(target=go, args=("first",))
        first.start()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # the first run has the slot
            try:
                with client() as c:
                    if c.read_global_concurrency_limit_by_name(fp.LIMIT).active_slots == 1:
                        break
            except Exception:  # noqa: BLE001 - the limit is not created yet
                pass
            time.sleep(0.2)
        second = threading.Thread(target=go, args=("second",))
        second.start()
        first.join(300)
        second.join(300)
    spans = [float(line.split()[1]) for line in (scratch.parent / "spans.log").read_text().splitlines()]
    return states, err.getvalue(), spans


@pytest.fixture(scope="module")
def failed_run(prefect_api, scratch):
    return fp.pipeline(stages=["boom"], project=str(scratch), return_state=True)


@pytest.mark.slow
def test_a_second_run_waits_for_the_first_saying_so_once(two_runs):
    states, err, spans = two_runs
    assert states["first"].is_completed() and states["second"].is_completed(), (states, err[-2000:])
    assert err.count(WAITING) == 1, err[-2000:]
    assert "rubricrl pipeline unlock" in err
    assert len(spans) == 4  # start, end, start, end: the stages did not overlap (nor crash on DVC's lock)
    assert spans == sorted(spans)
    with client() as c:
        assert c.read_global_concurrency_limit_by_name(fp.LIMIT).active_slots == 0  # both released


def test_a_failed_stage_is_named_in_prefect_and_mlflow(failed_run, scratch):
    import mlflow
    from mlflow.tracking import MlflowClient

    assert failed_run.is_failed()
    with client() as c:
        message = c.read_flow_run(failed_run.state_details.flow_run_id).state.message
    assert "stage 'boom' failed (exit" in message and "error: judge said no" in message, message
    assert fp.error_summary(message) == ("boom", "error: judge said no")
    store = MlflowClient(f"sqlite:///{scratch.parent / 'mlflow.db'}")
    exp = store.get_experiment_by_name("rubricrl")
    runs = store.search_runs([exp.experiment_id], "tags.`rubricrl.failed_stage` = 'boom'")
    assert len(runs) == 1 and runs[0].info.run_name == "pipeline"
    assert runs[0].info.status == "FAILED"
    assert runs[0].data.tags["rubricrl.error"] == "error: judge said no"
    assert "stage 'boom' failed" in mlflow.artifacts.load_text(runs[0].info.artifact_uri + "/error.txt")


def test_retries_only_for_stages_that_call_the_judge_endpoint():
    from prefect.states import Failed

    stages = fp.dvc_stages()
    production = load_params(ROOT / "params.yaml", [ROOT / "configs" / "production.yaml"])
    assert fp.network_stages(production, stages) == {"rubric", "grpo", "eval_task", "distill", "export"}
    default = load_params(ROOT / "params.yaml")
    assert default.scoring.judge == "grounded" and fp.network_stages(default, stages) == set()
    proposals = default.model_copy(update={"rubric": default.rubric.model_copy(update={"llm_proposals": True})})
    assert fp.network_stages(proposals, stages) == {"rubric"}
    panel = default.model_copy(update={"scoring": default.scoring.model_copy(
        update={"checklist_judge": production.scoring.checklist_judge})})  # the free-text checklist's judge panel
    assert fp.network_stages(panel, stages) == {"grpo", "eval_task"}

    net, local = fp.stage_task(True), fp.stage_task(False)
    assert (net.retries, net.retry_delay_seconds, net.retry_condition_fn) == (3, [10, 20, 40], fp.transient_failure)
    assert local.retries == 0 and local.retry_condition_fn is None

    def retried(error, output="ERROR: failed to reproduce 'grpo'"):
        err = fp.StageFailed("grpo", 1, output, error)
        return fp.transient_failure(net, None, Failed(data=err, message=repr(err)))

    # The stage records its error's type (rubricrl.core.entry.record); the type decides, never the wording.
    assert retried({"type": "rubricrl.core.errors.JudgeUnavailable", "transient": True})
    assert not retried({"type": "rubricrl.core.errors.JudgeError", "transient": False})  # a bad key, a bad reply
    assert not retried({"type": "rubricrl.calibrate.gate.GateError", "transient": False})
    assert not retried(None)  # no record (a crash, a killed process): nothing says it may heal
    judge = "error: openai judge m: task t1, criterion c: no verdict after 5 attempt(s): connection failed to x"
    assert not retried({"transient": False}, judge)  # a message that reads transient does not make it so
    assert retried({"transient": True}, "error: the endpoint's message, reworded in any way")
    assert not fp.transient_failure(net, None, Failed(data=RuntimeError("other"), message="other"))


def test_a_stage_records_its_error_type_and_the_flow_retries_on_it(prefect_api, scratch):
    """End to end: a stage failing with JudgeUnavailable is retried; one failing with JudgeError is not."""
    code = ("from rubricrl.core.entry import stage_main; from rubricrl.core import errors; "
            "stage_main(lambda: (_ for _ in ()).throw(errors.{kind}('the endpoint said {kind}')))")
    spec = yaml.safe_load((scratch / "dvc.yaml").read_text())
    spec["stages"]["unavailable"] = {"cmd": f'{sys.executable} -c "{code.format(kind="JudgeUnavailable")}"'}
    spec["stages"]["refused"] = {"cmd": f'{sys.executable} -c "{code.format(kind="JudgeError")}"'}
    (scratch / "dvc.yaml").write_text(yaml.safe_dump(spec))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    task = fp.stage_task(True).with_options(retry_delay_seconds=0)
    for stage, transient in (("unavailable", True), ("refused", False)):
        fp.SUMMARY.clear()
        with pytest.raises(fp.StageFailed) as err:
            task(stage, False, env, str(scratch))
        assert err.value.transient is transient and err.value.error["type"].endswith(stage == "refused" and
                                                                                       "JudgeError" or "JudgeUnavailable")
        assert [r["outcome"] for r in fp.SUMMARY] == ["FAILED"] * (4 if transient else 1)  # 3 retries, or none


def test_a_changed_task_file_retriggers_the_deployment(prefect_api, tmp_path):
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId
    from prefect.events.filters import EventFilter, EventNameFilter
    from prefect.events.worker import EventsWorker

    dep_id = fs.pipeline_deployment("0 3 * * *", ["data"]).apply()
    with client() as c:
        assert c.read_deployment(dep_id).schedules[0].schedule.cron == "0 3 * * *"
        autos = c.read_resource_related_automations(f"prefect.deployment.{dep_id}")
        assert [(a.trigger.expect, a.actions[0].type) for a in autos] == [({fs.EVENT}, "run-deployment")]

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"id": "a"}\n')
    watcher = fs.TaskFileWatcher(["tasks.jsonl", "missing.jsonl"], root=tmp_path)
    assert watcher.poll() == []  # unchanged: nothing
    tasks.write_text('{"id": "b"}\n')
    assert watcher.poll() == []  # new content seen once: it may still be being written
    assert watcher.poll() == ["tasks.jsonl"]  # the same on the next poll: one event
    assert watcher.poll() == []  # no repeat
    EventsWorker.drain_all()

    runs, events, deadline = [], [], time.monotonic() + 60
    with client() as c:
        while not (runs and events) and time.monotonic() < deadline:  # the run and the stored event
            time.sleep(1)
            runs = c.read_flow_runs(deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[dep_id])))
            events = c.read_events(filter=EventFilter(event=EventNameFilter(name=[fs.EVENT])), limit=50).events
    assert [(r.state_name, r.parameters) for r in runs] == [("Scheduled", {"force_stages": ["data"]})]
    assert [(e.resource.id, e.payload["path"]) for e in events] == [("rubricrl.tasks-file.tasks.jsonl", "tasks.jsonl")]


def test_pipeline_status_lists_the_last_runs(two_runs, failed_run, capsys, monkeypatch):
    from rubricrl.cli.main import main

    monkeypatch.chdir(ROOT)
    main(["pipeline", "status", "-n", "10"])
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("Prefect: server http://")  # the test harness is a server, not embedded Prefect
    assert out[1].split() == ["RUN", "STATE", "BY", "START", "DURATION", "STAGE", "ERROR"]
    failed = [line for line in out if " Failed " in line]
    assert len(failed) == 1 and " boom " in failed[0] and failed[0].endswith("error: judge said no")
    assert sum(" Completed " in line for line in out) >= 2


def test_a_bad_cron_names_pipeline_cron(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text((ROOT / "params.yaml").read_text().replace('cron: "0 3 * * *"', 'cron: "0 25 * * *"'))
    with pytest.raises(ConfigError, match=r"params.yaml:\d+: pipeline.cron: .*'25' is no hour \(0-23\)"):
        load_params(path)
    with pytest.raises(ConfigError, match="--cron: .*not a cron expression"):
        fs.serve_pipeline(cron="every day")  # the override is checked before anything is served

    from prefect._internal.schemas.validators import validate_cron_string

    for expr in ["0 3 * * *", "*/15 9-17 * * mon-fri", "0 0 1 jan,jul *", "5/10 * * * 7", "@daily"]:
        assert PipelineParams(cron=expr).cron == validate_cron_string(expr)  # whatever we accept, Prefect does


def test_watched_files_default_to_the_task_file_of_a_file_source():
    params = load_params(ROOT / "params.yaml")
    assert params.data.source == "generate" and params.pipeline.watched(params.data) == []
    data = params.data.model_copy(update={"source": "file", "tasks_file": "my/tasks.jsonl"})
    assert params.pipeline.watched(data) == ["my/tasks.jsonl"]
    assert PipelineParams(watch=["a.jsonl"]).watched(data) == ["a.jsonl"]
    assert PipelineParams(watch=[]).watched(data) == []


def test_a_successful_run_pushes_its_outputs_to_the_dvc_remote(prefect_api, scratch):
    from mlflow.tracking import MlflowClient

    state = fp.pipeline(stages=["make"], force=True, project=str(scratch), return_state=True)
    assert state.is_completed(), state.message
    remote = scratch.parent / "remote"
    assert any(p.is_file() for p in remote.rglob("*")), "dvc push sent nothing to the default remote"
    client_ = MlflowClient(tracking_uri=f"sqlite:///{scratch.parent / 'mlflow.db'}")
    runs = client_.search_runs([client_.get_experiment_by_name("rubricrl").experiment_id],
                               "tags.rubricrl.stages = 'make'")
    assert runs and runs[0].data.tags["rubricrl.dvc_push"] == "ok"


@pytest.mark.slow
def test_the_summary_table_names_each_stage_its_outcome_and_time(prefect_api, scratch):
    fp.SUMMARY.clear()
    fp.pipeline(stages=["make"], force=True, project=str(scratch))
    fp.pipeline(stages=["make"], project=str(scratch))  # nothing changed: DVC skips it
    fp.pipeline(stages=["boom"], project=str(scratch), return_state=True)
    assert [(r["stage"], r["outcome"]) for r in fp.SUMMARY] == [("make", "ran"), ("make", "up to date"),
                                                                 ("boom", "FAILED")]
    table = fp.summary_table(fp.SUMMARY)
    assert "up to date" in table and "FAILED" in table and table.splitlines()[-1].startswith("total")


def test_cpu_steal_is_the_hosts_share_of_cpu_time():
    before = [100, 0, 50, 800, 0, 0, 0, 50, 0, 0]
    after = [300, 0, 100, 900, 0, 0, 0, 150, 0, 0]  # +200 user, +50 system, +100 idle, +100 steal
    assert fp.steal_share(before, after) == pytest.approx(100 / 450)
    assert fp.steal_share(None, after) is None
    assert "cpu steal: 22%" in fp.summary_table([{"stage": "a", "outcome": "ran", "seconds": 60}], 100 / 450)


def test_prefect_settings_are_set_before_any_flow_module_imports_prefect(tmp_path):
    """Prefect reads its settings on first import: rubricrl.flow sets them before registry/retrain/pipeline import
    it (the embedded server's 20 s default start-up timeout ran out on a busy 2-core machine)."""
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    code = ("import rubricrl.flow.pipeline\n"
            "from prefect.settings import PREFECT_HOME, PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS as t\n"
            "print(PREFECT_HOME.value(), t.value())")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env={**env, "PYTHONPATH": str(ROOT)},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    home, timeout = out.stdout.split()
    assert Path(home) == tmp_path / ".prefect" and int(timeout) == 180
