"""Scheduled and retriggered runs of the pipeline flow (`rubricrl pipeline serve`), and what the runs did
(`rubricrl pipeline status`, `rubricrl pipeline unlock`)."""

from __future__ import annotations

import hashlib
import os
import signal
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

from rubricrl.core.errors import RubricRLError
from rubricrl.flow.pipeline import FLOW, LIMIT, ROOT, error_summary, pipeline, stage_order

DEPLOYMENT = "rubricrl-scheduled"
EVENT = "rubricrl.tasks.changed"  # emitted by the serve process's watcher; the deployment's trigger expects it


def pipeline_deployment(cron: str, retrigger_force: list[str]):
    """The served deployment: the cron schedule, and a run (forcing retrigger_force) on every EVENT."""
    from prefect.events import DeploymentEventTrigger

    trigger = DeploymentEventTrigger(name="rubricrl-tasks-changed", expect={EVENT},
                                     match={"prefect.resource.id": "rubricrl.tasks-file.*"},
                                     parameters={"force_stages": retrigger_force})
    return pipeline.to_deployment(name=DEPLOYMENT, cron=cron, triggers=[trigger])


def _sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


class TaskFileWatcher:
    """Prefect has no file watcher: hash the watched files and emit EVENT when one's content changed.

    A new hash counts once it is the same on two polls in a row, so a file caught mid-write does not
    trigger a run of its half; a deleted file triggers nothing."""

    def __init__(self, paths: list[str], root: Path = ROOT):
        self.root = root
        self.paths = [Path(p) for p in paths]
        self.emitted = {p: _sha256(root / p) for p in self.paths}  # as found at start: no run for that
        self.seen = dict(self.emitted)

    def poll(self) -> list[str]:
        """One look at every file; returns the files it emitted an event for."""
        from prefect.events import emit_event

        changed = []
        for p in self.paths:
            sha = _sha256(self.root / p)
            if sha is not None and sha == self.seen[p] and sha != self.emitted[p]:
                emit_event(event=EVENT, resource={"prefect.resource.id": f"rubricrl.tasks-file.{p.as_posix()}"},
                           payload={"path": p.as_posix(), "sha256": sha})
                self.emitted[p] = sha
                changed.append(p.as_posix())
            self.seen[p] = sha
        return changed

    def run(self, interval_s: float) -> None:
        while True:
            time.sleep(interval_s)
            try:
                for path in self.poll():
                    print(f"{path} changed: pipeline run triggered", file=sys.stderr, flush=True)
            except Exception as err:  # noqa: BLE001 - a watcher that dies silently would be worse
                print(f"warning: task file watcher: {type(err).__name__}: {err}", file=sys.stderr, flush=True)


def serve_pipeline(cron: str | None = None) -> None:
    """Serve the flow (blocks): pipeline.cron from params.yaml (or --cron), and the retrigger on a changed task file."""
    from prefect import serve
    from pydantic import ValidationError

    from rubricrl.config import PipelineParams, load_params
    from rubricrl.core.errors import ConfigError

    params = load_params(ROOT / "params.yaml")
    cfg = params.pipeline
    if cron is not None:
        try:
            cfg = PipelineParams(**{**cfg.model_dump(), "cron": cron})
        except ValidationError as err:
            raise ConfigError(f"--cron: {err.errors()[0]['msg']}") from None
    unknown = sorted(set(cfg.retrigger_force) - set(stage_order()))
    if unknown:
        raise ConfigError(f"pipeline.retrigger_force: unknown stage(s) {', '.join(unknown)}")
    watched = cfg.watched(params.data)
    deployment = pipeline_deployment(cfg.cron, cfg.retrigger_force)
    deployment.apply()  # the trigger exists before the watcher's first event (serve() registers it again)
    if watched:
        threading.Thread(target=TaskFileWatcher(watched).run, args=(cfg.watch_interval_s,), daemon=True).start()
    from prefect.settings import PREFECT_API_URL

    embedded = not PREFECT_API_URL.value()
    print(f"serving {FLOW}/{DEPLOYMENT}: cron '{cfg.cron}'"
          + (" (stored only: no PREFECT_API_URL, so Prefect runs embedded and has no scheduler; run "
             "`prefect server start` and set PREFECT_API_URL for the cron to fire)" if embedded else "")
          + (f"; a new content of {', '.join(watched)} retriggers a run forcing {', '.join(cfg.retrigger_force)}"
             if watched else "; no task file watched (pipeline.watch)"), file=sys.stderr, flush=True)
    if embedded:
        # Ctrl-C also stops the embedded server (same process group), and Prefect's graceful shutdown then
        # waits on it forever: stop at once instead. (asyncio.run keeps a SIGINT handler that is not its default.)
        signal.signal(signal.SIGINT, _stop_embedded)
    serve(deployment)


def _stop_embedded(signum, frame) -> None:
    from prefect.server.api.server import SubprocessASGIServer

    print("stopping pipeline serve", file=sys.stderr, flush=True)
    for server in list(getattr(SubprocessASGIServer, "_instances", {}).values()):
        server.stop()
    os._exit(128 + signum)


def _row(r, now: datetime) -> dict:
    """One flow run as `pipeline status` shows it: name, state, how started, start, duration, failed stage, why."""
    if r.start_time and r.end_time:
        seconds = (r.end_time - r.start_time).total_seconds()
    elif r.start_time:  # still running (or paused)
        seconds = (now - r.start_time).total_seconds()
    else:
        seconds = None
    failed = r.state is not None and (r.state.is_failed() or r.state.is_crashed())
    stage, why = error_summary(r.state.message) if failed else ("", "")
    return {"name": r.name, "state": r.state_name or "", "started": bool(r.start_time),
            "start": r.start_time or r.next_scheduled_start_time or r.expected_start_time,
            "seconds": seconds, "stage": stage, "error": why,
            "by": "retrigger" if (r.parameters or {}).get("force_stages") else "schedule" if r.auto_scheduled
            else "deployment" if r.deployment_id else "run"}


def pipeline_status(limit: int = 10, scheduled: int = 3) -> dict:
    """What the pipeline's runs did, from Prefect's API (one client, so an embedded Prefect starts once):
    - `source`: what was read, an embedded Prefect (its database) or a server (its API URL);
    - `runs`: the last `limit` runs that left the schedule (running, finished, failed, cancelled), newest start first;
    - `scheduled`: the next `scheduled` runs waiting for their time (Scheduled, Late, AwaitingRetry), soonest first;
    - `waiting`: how many wait in all.
    The two are asked for apart: a served cron keeps its next runs scheduled ahead (an hour's, at least 3, up to
    100), and by expected start time they come first and push every finished run out of the list."""
    import httpx
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (FlowFilter, FlowFilterName, FlowRunFilter, FlowRunFilterState,
                                                FlowRunFilterStateType)
    from prefect.client.schemas.objects import StateType
    from prefect.client.schemas.sorting import FlowRunSort
    from prefect.settings import PREFECT_API_URL

    flow = FlowFilter(name=FlowFilterName(any_=[FLOW]))

    def states(**types) -> FlowRunFilter:
        return FlowRunFilter(state=FlowRunFilterState(type=FlowRunFilterStateType(**types)))

    waiting = [StateType.SCHEDULED]  # Scheduled, Late, AwaitingRetry: not started, or not again yet
    try:
        with get_client(sync_client=True) as client:
            source = _source(client)
            runs = client.read_flow_runs(flow_filter=flow, flow_run_filter=states(not_any_=waiting),
                                         sort=FlowRunSort.START_TIME_DESC, limit=limit)
            queued = client.read_flow_runs(flow_filter=flow, flow_run_filter=states(any_=waiting),
                                           sort=FlowRunSort.NEXT_SCHEDULED_START_TIME_ASC, limit=scheduled) \
                if scheduled else []
            total = client.count_flow_runs(flow_filter=flow, flow_run_filter=states(any_=waiting))
    except httpx.TransportError as err:
        raise RubricRLError(f"Prefect API {PREFECT_API_URL.value()} did not answer ({type(err).__name__}: {err}); "
                            f"is `prefect server start` running there (PREFECT_API_URL)?") from None
    now = datetime.now(timezone.utc)
    return {"source": source, "runs": [_row(r, now) for r in runs], "scheduled": [_row(r, now) for r in queued],
            "waiting": total}


def _source(client) -> str:
    """Which Prefect `client` reads: an embedded one (a temporary server on the local database) or a server."""
    from prefect.client.base import ServerType
    from prefect.settings import PREFECT_API_URL, get_current_settings

    if client.server_type == ServerType.EPHEMERAL:
        url = get_current_settings().server.database.connection_url
        db = url.get_secret_value() if url else ""
        return f"Prefect: embedded ({db.split(':///', 1)[-1]}; no scheduler: a cron never fires)"
    return f"Prefect: {'Cloud' if client.server_type == ServerType.CLOUD else 'server'} {PREFECT_API_URL.value()}"


def unlock() -> int:
    """Free the pipeline's concurrency slot left taken by a killed run (kill -9; embedded Prefect never
    expires it). Returns how many slots were taken."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitUpdate
    from prefect.exceptions import ObjectNotFound

    with get_client(sync_client=True) as client:
        try:
            taken = client.read_global_concurrency_limit_by_name(LIMIT).active_slots
        except ObjectNotFound:
            return 0
        client.update_global_concurrency_limit(LIMIT, GlobalConcurrencyLimitUpdate(active_slots=0))
    return taken

