"""`rubricrl pipeline status` against a real `prefect server start` (its own PREFECT_HOME, a free loopback port):
the runs that started come first, newest first, and the served cron's scheduled runs after them, apart. Sorted by
expected start time, as status once did, the scheduled runs fill the whole list and hide every finished run."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import rubricrl.flow.pipeline as fp  # noqa: E402  (sets the Prefect environment before prefect is imported)
import rubricrl.flow.serve as fs  # noqa: E402
from rubricrl.core.net import free_port  # noqa: E402

PREFECT = Path(sys.executable).parent / "prefect"


def _stop(proc: subprocess.Popen) -> None:
    """The server and whatever it started (its own process group): SIGTERM, then SIGKILL after 20 s."""
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture
def prefect_server(tmp_path):
    """`prefect server start` on a free loopback port with its own PREFECT_HOME; yields (api url, env for a client).
    Stopped however the test ends."""
    import httpx

    port = free_port()
    url = f"http://127.0.0.1:{port}/api"
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect"), "PREFECT_API_URL": url,
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1", "PREFECT_SERVER_UI_ENABLED": "false",
           "PREFECT_LOGGING_LEVEL": "WARNING"}
    log = tmp_path / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(PREFECT), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                                env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 240  # a fresh database is migrated first: slow on a busy 2-core machine
        while True:
            if proc.poll() is not None:
                pytest.fail(f"prefect server exited {proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"prefect server not up after 240 s:\n{log.read_text()[-3000:]}")
            time.sleep(1)
        yield url, env
    finally:
        _stop(proc)


@pytest.mark.slow
def test_status_shows_finished_runs_first_and_scheduled_ones_after(prefect_server):
    from prefect import flow
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName
    from prefect.client.schemas.sorting import FlowRunSort
    from prefect.settings import PREFECT_API_URL, temporary_settings
    from prefect.states import Running

    url, env = prefect_server

    @flow(name=fp.FLOW)  # the pipeline's flow name, so its runs are pipeline runs; no DVC stage to run
    def tiny(fail: bool = False) -> None:
        if fail:
            raise fp.StageFailed("boom", 3, "error: judge said no\nERROR: failed to reproduce 'boom'", None)

    pipeline_runs = FlowFilter(name=FlowFilterName(any_=[fp.FLOW]))
    with temporary_settings(updates={PREFECT_API_URL: url}):
        tiny.with_options(flow_run_name="done-1")()
        assert tiny.with_options(flow_run_name="failed-2")(fail=True, return_state=True).is_failed()
        tiny.with_options(flow_run_name="done-3")()
        with get_client(sync_client=True) as client:
            client.create_flow_run(tiny, name="running-4", state=Running())
            # The served deployment with a cron every 3 minutes: the server's scheduler fills the next hour.
            fs.pipeline_deployment("*/3 * * * *", ["data"]).apply()
            deadline, runs = time.monotonic() + 120, []
            while len(runs) < 14 and time.monotonic() < deadline:
                time.sleep(1)
                runs = client.read_flow_runs(flow_filter=pipeline_runs, limit=50)
            assert sum(r.state_name == "Scheduled" for r in runs) >= 10, [(r.name, r.state_name) for r in runs]
            # The old query (expected start time, newest first, the last 10): scheduled runs only.
            old = client.read_flow_runs(flow_filter=pipeline_runs, sort=FlowRunSort.EXPECTED_START_TIME_DESC, limit=10)
            assert {r.state_name for r in old} == {"Scheduled"}

    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "rubricrl.cli.main", "pipeline", "status"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    print(f"`rubricrl pipeline status` took {time.monotonic() - t0:.1f} s:\n{done.stdout}")
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout.splitlines()
    assert out[0] == f"Prefect: server {url}"
    assert out[1].split() == ["RUN", "STATE", "BY", "START", "DURATION", "STAGE", "ERROR"]
    split = next(i for i, line in enumerate(out) if line.startswith("scheduled: "))
    assert re.fullmatch(r"scheduled: (\d+), the next 3:", out[split]) and int(out[split].split()[1][:-1]) >= 10
    started = [line.split() for line in out[2:split] if line]
    assert [(r[0], r[1], r[2]) for r in started] == [
        ("running-4", "Running", "run"), ("done-3", "Completed", "run"), ("failed-2", "Failed", "run"),
        ("done-1", "Completed", "run")]  # newest first
    failed = next(line for line in out if line.startswith("failed-2 "))
    assert " boom " in failed and failed.endswith("error: judge said no")
    assert out[split + 1].split() == ["RUN", "STATE", "BY", "AT"]
    queued = [line.split() for line in out[split + 2:]]
    # Soonest first; the next cron tick may have passed meanwhile (no runner serves it here): then Late, "ago".
    assert len(queued) == 3 and all(q[1] in ("Scheduled", "Late") and q[2] == "schedule" for q in queued), queued
    assert queued[-1][1] == "Scheduled" and queued[-1][5] == "(in"
    times = [datetime.strptime(f"{q[3]} {q[4]}", "%Y-%m-%d %H:%M:%S") for q in queued]
    assert times == sorted(times) and len(set(times)) == 3

    fewer = subprocess.run([sys.executable, "-m", "rubricrl.cli.main", "pipeline", "status", "-n", "2", "--scheduled",
                            "0"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert fewer.returncode == 0, fewer.stderr[-3000:]
    out = fewer.stdout.splitlines()
    assert [line.split()[0] for line in out[2:4]] == ["running-4", "done-3"] and out[4] == ""
    assert re.fullmatch(r"scheduled: \d+ \(--scheduled M lists the next M\)", out[5]) and len(out) == 6, out
