"""The Prefect flow: runs whatever stages dvc.yaml holds, in dependency order, one task each.

Each stage runs as `dvc repro --single-item <stage>`, so DVC decides what is up to date and the
stage scripts stay free of Prefect. The flow opens the MLflow pipeline run; stage runs nest under it.
One pipeline run at a time (a Prefect global concurrency limit): a second run waits for the first.
`serve_pipeline` adds the cron schedule and the retrigger on a changed task file.
"""

from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager, nullcontext
from datetime import datetime, timezone
from graphlib import TopologicalSorter
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
FLOW, DEPLOYMENT = "rubricrl-pipeline", "rubricrl-scheduled"
LIMIT = "rubricrl-pipeline"  # the global concurrency limit: one pipeline run at a time
EVENT = "rubricrl.tasks.changed"  # emitted by the serve process's watcher; the deployment's trigger expects it


def prefect_env() -> None:
    """A project-local Prefect home and no analytics; without PREFECT_API_URL Prefect runs embedded."""
    os.environ.setdefault("PREFECT_HOME", str(ROOT / ".prefect"))
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    # The embedded server migrates a fresh database on first start: slow on a busy 2-core machine.
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")


prefect_env()

from prefect import flow, task  # noqa: E402  (needs the environment above)
from prefect.tasks import exponential_backoff  # noqa: E402


def _covers(out: str, dep: str) -> bool:
    out, dep = out.rstrip("/"), dep.rstrip("/")
    return dep == out or dep.startswith(out + "/") or out.startswith(dep + "/")


def _paths(entries) -> list[str]:
    """Stage deps/outs/metrics entries are strings or one-key mappings with options."""
    out = []
    for e in entries or []:
        out.append(next(iter(e)) if isinstance(e, dict) else e)
    return out


def dvc_stages(dvc_yaml: Path = ROOT / "dvc.yaml") -> dict:
    return (yaml.safe_load(dvc_yaml.read_text()) or {}).get("stages", {})


def stage_order(dvc_yaml: Path = ROOT / "dvc.yaml") -> list[str]:
    """Stages in dependency order: a stage comes after every stage whose outputs it reads."""
    stages = dvc_stages(dvc_yaml)
    outs = {name: _paths(s.get("outs")) + _paths(s.get("metrics")) + _paths(s.get("plots")) for name, s in stages.items()}
    graph = TopologicalSorter()
    for name, s in stages.items():
        deps = _paths(s.get("deps"))
        graph.add(name, *[other for other, paths in outs.items() if other != name
                          and any(_covers(o, d) for o in paths for d in deps)])
    return list(graph.static_order())


def network_stages(params, stages: dict) -> set[str]:
    """Stages that call the openai judge endpoint under these params, from their dvc.yaml params keys: with
    scoring.judge 'openai' every stage that reads scoring.openai_judge; with rubric.llm_proposals the rubric stage."""
    out = set()
    for name, spec in stages.items():
        keys = {k for k in spec.get("params") or [] if isinstance(k, str)}
        if keys & {"scoring", "scoring.openai_judge"} and (
                params.scoring.judge == "openai" or (params.rubric.llm_proposals and "rubric" in keys)):
            out.add(name)
    return out


# The judge already retries each request (scoring.openai_judge.max_retries); this covers an endpoint that is
# down for longer (a restarting vLLM). Only the judge's own "endpoint unreachable" errors qualify: a failed
# gate, a bad key (HTTP 401) or a code error would fail the same way again, after hours of a rerun stage.
TRANSIENT = re.compile(r"openai judge [^\n]*no verdict after \d+ attempt\(s\): "
                       r"(timed out|connection failed|request to \S+ failed|HTTP (429|5\d\d))")


def transient_failure(task, task_run, state) -> bool:
    """retry_condition_fn of a network stage: retry only when its error looks like an unreachable endpoint."""
    try:
        err = state.result(raise_on_failure=False)
    except Exception:  # noqa: BLE001 - an unreadable result: fall back to the state's message
        err = None
    return bool(TRANSIENT.search(str(err) if isinstance(err, BaseException) else state.message or ""))


SUMMARY: list[dict] = []  # this process's stage runs: stage, outcome, seconds (the table at the end of a run)


@task(name="dvc-stage", task_run_name="stage-{stage}")
def run_stage(stage: str, force: bool, env: dict, project: str = str(ROOT)) -> None:
    cmd = [sys.executable, "-m", "dvc", "repro", "--single-item", stage] + (["--force"] if force else [])
    # Output streams live (a training stage runs for many minutes); the tail goes into the error.
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    tail, skipped = b"", False
    for chunk in iter(lambda: proc.stdout.read1(4096), b""):
        if hasattr(sys.stderr, "buffer"):
            sys.stderr.buffer.write(chunk)
        else:  # a replaced stderr (a test's capture) takes text only
            sys.stderr.write(chunk.decode("utf-8", "replace"))
        sys.stderr.flush()
        tail = (tail + chunk)[-4000:]
        skipped = skipped or b"didn't change, skipping" in tail
    seconds = time.monotonic() - start
    if proc.wait() != 0:
        SUMMARY.append({"stage": stage, "outcome": "FAILED", "seconds": seconds})
        text = tail.decode("utf-8", "replace").replace("\r", "\n").strip()
        raise RuntimeError(f"stage '{stage}' failed (exit {proc.returncode}): {text[-2000:]}")
    SUMMARY.append({"stage": stage, "outcome": "up to date" if skipped else "ran", "seconds": seconds})


def summary_table(rows: list[dict], steal: float | None = None) -> str:
    """The stages of a run with how each ended and its wall time (and the CPU time the host took, if known)."""
    lines = [f"{'stage':<16}{'outcome':<12}{'wall':>10}", "-" * 38]
    lines += [f"{r['stage']:<16}{r['outcome']:<12}{r['seconds'] / 60:>7.1f} min" for r in rows]
    lines += ["-" * 38, f"{'total':<28}{sum(r['seconds'] for r in rows) / 60:>7.1f} min"]
    if steal is not None:
        lines.append(f"cpu steal: {steal:.0%} of the CPU time went to other machines on this host (wall times "
                     f"on a shared VM run long by about that much)")
    return "\n".join(lines)


def cpu_times() -> list[int] | None:
    """The aggregate CPU line of /proc/stat (Linux), or None."""
    try:
        return [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None


def steal_share(before: list[int] | None, after: list[int] | None) -> float | None:
    """Share of all CPU time between two /proc/stat readings that the hypervisor gave to others (steal)."""
    if not before or not after or len(before) < 8:
        return None
    delta = [b - a for a, b in zip(before, after)]
    total = sum(delta[:8])
    return delta[7] / total if total > 0 else None


def stage_task(network: bool):
    """The stage task, with retries and backoff (10, 20, 40 s) only for a stage that calls a network endpoint."""
    if not network:
        return run_stage
    return run_stage.with_options(retries=3, retry_delay_seconds=exponential_backoff(backoff_factor=10),
                                  retry_condition_fn=transient_failure)


def error_summary(message: str | None) -> tuple[str, str]:
    """(failed stage, the one line that says why) from a stage error or a failed flow run's state message."""
    message = message or ""
    m = re.search(r"stage '([^']+)' failed \(exit -?\d+\): ", message)
    lines = [line.strip() for line in message[m.end() if m else 0:].splitlines() if line.strip()]
    # A stage script ends with one `error:` line (cli_support.stage_main); DVC's own ERROR line comes after it.
    why = next((ln for ln in reversed(lines) if ln.startswith("error:")), None) \
        or next((ln for ln in reversed(lines) if ln.startswith("ERROR:")), lines[-1] if lines else "")
    return (m.group(1) if m else ""), why


@contextmanager
def one_run_at_a_time():
    """Hold the pipeline's slot of the global concurrency limit; wait (saying so once) while another run has it."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate
    from prefect.concurrency.sync import concurrency
    from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound

    with get_client(sync_client=True) as client:
        try:
            gcl = client.read_global_concurrency_limit_by_name(LIMIT)
        except ObjectNotFound:
            try:
                client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(name=LIMIT, limit=1))
            except ObjectAlreadyExists:  # another run created it just now
                pass
            gcl = client.read_global_concurrency_limit_by_name(LIMIT)
    if gcl.active_slots >= gcl.limit:
        print(f"another pipeline run is in progress (Prefect concurrency limit '{LIMIT}'); waiting for it to "
              f"finish. If none is running (one was killed), free the slot with `rubricrl pipeline unlock`.",
              file=sys.stderr, flush=True)
    # strict: a missing limit is an error, not an unguarded run; a failed lease renewal must not kill a training.
    with concurrency(LIMIT, occupy=1, strict=True, raise_on_lease_renewal_failure=False):
        yield


@flow(name=FLOW)
def pipeline(stages: list[str] | None = None, force: bool = False, force_stages: list[str] | None = None,
             project: str | None = None) -> list[str]:
    """Run the stages (all by default) in order; force reruns all of them, force_stages only those."""
    import mlflow

    from rubricrl import tracking
    from rubricrl.config import load_params

    root = Path(project) if project else ROOT
    params = load_params(root / "params.yaml")  # DVC's params file; fail fast, naming the key
    spec, order = dvc_stages(root / "dvc.yaml"), stage_order(root / "dvc.yaml")
    unknown = sorted((set(stages or []) | set(force_stages or [])) - set(order))
    if unknown:
        raise ValueError(f"unknown stage(s): {', '.join(unknown)} (dvc.yaml has: {', '.join(order)})")
    order = [s for s in order if not stages or s in stages]
    network = network_stages(params, spec)
    # Stage commands say `python ...`: make that this environment's interpreter.
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    with one_run_at_a_time():
        run = None
        if params.tracking.enabled:
            run = mlflow.start_run(experiment_id=tracking.setup(params.tracking), run_name="pipeline",
                                   tags={"git.commit": tracking.git_commit(), "rubricrl.stages": ",".join(order)})
        with run or nullcontext():
            if run:
                env[tracking.PARENT_ENV] = run.info.run_id

            def run_stages(names: list[str]) -> None:
                for stage in names:
                    try:
                        stage_task(stage in network)(stage, force or stage in (force_stages or []), env, str(root))
                    except BaseException as err:
                        fail(stage, err)
                        raise

            def fail(stage: str, err: BaseException) -> None:
                if run:  # leaving the `with` then ends the MLflow run as FAILED
                    mlflow.set_tags({"rubricrl.failed_stage": stage, "rubricrl.error": error_summary(str(err))[1][:500]})
                    mlflow.log_text(str(err), "error.txt")

            run_stages(order)
            if "eval_general" in order and (root / "metrics/general.json").exists():
                try:
                    retrains = retrain_until_general_passes(root, params.general.retrain, order, run_stages, env)
                except BaseException as err:
                    fail("eval_general", err)
                    raise
                if run:
                    mlflow.set_tag("rubricrl.general_retrains", retrains)
            if not stages and params.registry.candidates:
                try:
                    register_and_promote(str(root))
                except BaseException as err:
                    fail("registry", err)
                    raise
            lock = root / "dvc.lock"
            if run and lock.exists():
                mlflow.log_artifact(str(lock))
                mlflow.set_tags(_lock_hashes(lock))
            if params.pipeline.push:
                pushed = dvc_push(root, env)
                if run:
                    mlflow.set_tag("rubricrl.dvc_push", "ok" if pushed else "failed")
    return order


def retrain_until_general_passes(root: Path, retrain, order: list[str], run_stages, env: dict) -> int:
    """The seed's remedy for a general-ability drop: while the general gate fails, write a lower GRPO learning
    rate and a higher beta into params.yaml and rerun grpo and every stage after it; at most
    general.retrain.max_attempts times, then stop naming the suite. Returns how many retrains it took."""
    from rubricrl.general.retrain import ATTEMPT_ENV, GeneralGateError, gate_failures, lower_grpo

    for attempt in range(retrain.max_attempts + 1):
        failures = gate_failures(root / "metrics/general.json")
        if not failures:
            return attempt
        if attempt == retrain.max_attempts:
            raise GeneralGateError(
                "general gate failed" + (f" after {attempt} retrain(s) of GRPO" if attempt else "") + ":\n"
                + "\n".join(f"  - {f}" for f in failures)
                + "\nNothing was registered or promoted. See outputs/general/report.md; raise general.tolerance or "
                  "general.retrain.max_attempts, or lower grpo.learning_rate by hand.")
        change = lower_grpo(root / "params.yaml", retrain)
        print(f"general gate failed ({'; '.join(failures)}): retraining GRPO, attempt {attempt + 1} of "
              f"{retrain.max_attempts}: " + ", ".join(f"{k} {a:g} -> {b:g}" for k, (a, b) in change.items())
              + " (written to params.yaml)", file=sys.stderr, flush=True)
        env[ATTEMPT_ENV] = str(attempt + 1)
        run_stages(order[order.index("grpo"):])
    raise AssertionError("unreachable")


@task(name="registry")
def register_and_promote(project: str) -> list[dict]:
    """Each trained candidate (registry.candidates, in training order) is registered as a version (its verified
    exports as versions of `<name>-gguf` / `<name>-gptq`), becomes `challenger` and is promoted through the gates.

    One promotion per candidate: SFT is a fallback champion when GRPO fails a gate, and the student competes
    with the champion on the same gates. A flow step, not a DVC stage: the registry is shared state outside the
    workspace (aliases move, roll back, and other runs promote), so it must be consulted on every run, never
    skipped as "up to date"."""
    import json

    from rubricrl import registry
    from rubricrl.atomic import write_text
    from rubricrl.config import load_params
    from rubricrl.rubric.report import gate_failures

    root = Path(project)
    params = load_params(root / "params.yaml")
    rubric_gate = gate_failures(json.loads((root / "outputs/rubric/report.json").read_text(encoding="utf-8")),
                                params.rubric)
    decisions = []
    for stage in params.registry.candidates:
        version = registry.register(params, stage, root / registry.CANDIDATES[stage][0], stage, rubric_gate, root=root)
        print(f"registry: {params.registry.name} version {version} <- {stage}", file=sys.stderr, flush=True)
        for model, v, alias in registry.register_exports(params, stage, version, root=root):
            print(f"registry: {model} version {v} <- {stage} export (@{alias})", file=sys.stderr, flush=True)
        if params.registry.promote:
            decisions.append({"stage": stage, **registry.promote(params, report=None)})
    if decisions:
        write_text(root / registry.REPORT, "\n".join(registry.promotion_markdown(d) for d in decisions))
    print(final_tables(root, params, decisions), file=sys.stderr, flush=True)
    return decisions


def final_tables(root: Path, params, decisions: list[dict]) -> str:
    """The general suites per model and the registry decisions, for the end of a run."""
    import json

    from rubricrl.general.run import SUITES

    lines = []
    general = root / "metrics/general.json"
    if general.exists():
        models = json.loads(general.read_text(encoding="utf-8"))["models"]
        distill = root / "metrics/distill.json"
        student = json.loads(distill.read_text(encoding="utf-8")).get("general") if distill.exists() else None
        models.update((student or {}).get("models", {}))
        lines += ["general suites      " + "".join(f"{m:>10}" for m in models)]
        cell = lambda row: f"{row['score']:>10.3f}" if row and row.get("score") is not None else f"{'-':>10}"  # noqa: E731
        lines += [f"{s:<20}" + "".join(cell(models[m].get(s)) for m in models) for s in SUITES]
    for d in decisions:
        verdict = ("promoted to champion" if d["promoted"] else "already champion" if d["passed"] else "not promoted")
        lines += ["", f"registry {d['model']}: version {d['challenger']} ({d.get('stage', 'challenger')}) {verdict}; "
                      f"champion: {d['champion_after'] or 'none'} (was {d['champion_before'] or 'none'})"]
        lines += [f"  {'pass' if g['passed'] else 'FAIL'} {g['name']}: {g['detail']}" for g in d["gates"]]
    return "\n".join(lines)


def dvc_push(root: Path, env: dict) -> bool:
    """Send what the run made to the default DVC remote; a failure warns and leaves the run successful."""
    proc = subprocess.run([sys.executable, "-m", "dvc", "push", "-q"], cwd=root, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"warning: dvc push failed (the run's results are still in the local DVC cache): "
              f"{(proc.stderr or proc.stdout).strip()[-300:]}", file=sys.stderr)
    return proc.returncode == 0


def _lock_hashes(lock: Path) -> dict[str, str]:
    """DVC's own hashes of every stage output, as lineage tags of the pipeline run."""
    tags = {}
    for name, s in (yaml.safe_load(lock.read_text()) or {}).get("stages", {}).items():
        for o in s.get("outs", []):
            if "md5" in o:
                tags[f"dvc.md5.{o['path']}"] = o["md5"]
    return tags


def run_pipeline(stages: list[str] | None = None, force: bool = False) -> list[str]:
    from rubricrl.config import load_params

    load_params(ROOT / "params.yaml")  # a bad key stops here, before Prefect or any stage starts
    SUMMARY.clear()
    before = cpu_times()
    try:
        return pipeline(stages=stages, force=force)
    finally:
        if SUMMARY:
            print(summary_table(SUMMARY, steal_share(before, cpu_times())), file=sys.stderr)


# --- scheduled and retriggered runs -------------------------------------------------------------------

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
    from rubricrl.errors import ConfigError

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


# --- status and recovery ------------------------------------------------------------------------------

def recent_runs(limit: int = 10) -> list[dict]:
    """The last pipeline runs from Prefect's API, newest first: name, state, start, duration, failed stage, why."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName
    from prefect.client.schemas.sorting import FlowRunSort

    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=[FLOW])),
                                     sort=FlowRunSort.EXPECTED_START_TIME_DESC, limit=limit)
    rows = []
    for r in runs:
        start = r.start_time or r.expected_start_time
        if r.start_time and r.end_time:
            seconds = (r.end_time - r.start_time).total_seconds()
        elif r.start_time:  # still running
            seconds = (datetime.now(timezone.utc) - r.start_time).total_seconds()
        else:
            seconds = None
        failed = r.state is not None and (r.state.is_failed() or r.state.is_crashed())
        stage, why = error_summary(r.state.message) if failed else ("", "")
        rows.append({"name": r.name, "state": r.state_name or "", "start": start, "started": bool(r.start_time),
                     "seconds": seconds, "stage": stage, "error": why,
                     "by": "retrigger" if (r.parameters or {}).get("force_stages") else "schedule" if r.auto_scheduled
                     else "deployment" if r.deployment_id else "run"})
    return rows


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


if __name__ == "__main__":
    run_pipeline()
