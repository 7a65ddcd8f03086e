"""The Prefect flow: runs whatever stages dvc.yaml holds, in dependency order, one task each.

Each stage runs as `dvc repro --single-item <stage>` in the project folder (the working folder, or the flow's
`project` parameter), so DVC decides what is up to date and the stage modules stay free of Prefect. The flow
opens the MLflow pipeline run; stage runs nest under it. One pipeline run at a time (a Prefect global
concurrency limit): a second run waits for the first. After the stages: the general-gate retrain
(rubricrl.flow.retrain), the registry (rubricrl.flow.registry) and the run report with the registry's decisions.
Schedules and retriggers: rubricrl.flow.serve.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path

import yaml
from prefect import flow, task
from prefect.tasks import exponential_backoff

from rubricrl.core.entry import ERROR_FILE_ENV
from rubricrl.core.errors import RubricRLError
from rubricrl.flow.registry import register_and_promote
from rubricrl.flow.retrain import retrain_until_general_passes
from rubricrl.stages import graph
from rubricrl.stages.paths import EVAL_GENERAL

REPORT_STAGE = "report"
ROOT = Path.cwd()  # the project: `rubricrl pipeline` runs in its folder, a deployment sets its working folder
FLOW = "rubricrl-pipeline"
LIMIT = "rubricrl-pipeline"  # the global concurrency limit: one pipeline run at a time


def dvc_stages(dvc_yaml: Path | None = None) -> dict:
    return graph.dvc_stages(dvc_yaml or ROOT / "dvc.yaml")


def stage_order(dvc_yaml: Path | None = None) -> list[str]:
    """Stages in dependency order (rubricrl.stages.graph, which the one-GPU script reads without Prefect)."""
    return graph.stage_order(dvc_yaml or ROOT / "dvc.yaml")


def network_stages(params, stages: dict) -> set[str]:
    """Stages that call the openai judge endpoint under these params, from their dvc.yaml params keys: with
    scoring.judge 'openai' every stage that reads scoring.openai_judge; with rubric.llm_proposals the rubric stage;
    with scoring.checklist_judge set every stage that reads it (the free-text checklist's judge panel)."""
    out = set()
    for name, spec in stages.items():
        keys = {k for k in spec.get("params") or [] if isinstance(k, str)}
        if keys & {"scoring", "scoring.openai_judge"} and (
                params.scoring.judge == "openai" or (params.rubric.llm_proposals and "rubric" in keys)):
            out.add(name)
        if keys & {"scoring", "scoring.checklist_judge"} and params.scoring.checklist_judge is not None:
            out.add(name)
    return out


class StageFailed(RubricRLError):
    """A stage's command exited non-zero. `transient`: its error is of a type that may heal by itself (an
    unreachable judge endpoint: rubricrl.core.errors.TransientError), as the stage itself recorded it."""

    def __init__(self, stage: str, returncode: int, output: str, error: dict | None):
        self.stage, self.returncode, self.error = stage, returncode, error or {}
        self.transient = bool(self.error.get("transient"))
        super().__init__(f"stage '{stage}' failed (exit {returncode}): {output[-2000:]}")


def transient_failure(task, task_run, state) -> bool:
    """retry_condition_fn of a network stage: retry only a failure whose error type is transient. The judge
    already retries each request (scoring.openai_judge.max_retries); this covers an endpoint that is down for
    longer (a restarting vLLM). A failed gate, a bad key (HTTP 401) or a code error would fail the same way
    again, after hours of a rerun stage, so they are not retried."""
    try:
        err = state.result(raise_on_failure=False)
    except Exception:  # noqa: BLE001 - an unreadable result: no type to decide on
        return False
    return isinstance(err, StageFailed) and err.transient


SUMMARY: list[dict] = []  # this process's stage runs: stage, outcome, seconds (the table at the end of a run)


@task(name="dvc-stage", task_run_name="stage-{stage}")
def run_stage(stage: str, force: bool, env: dict, project: str | None = None) -> None:
    cmd = [sys.executable, "-m", "dvc", "repro", "--single-item", stage] + (["--force"] if force else [])
    # Output streams live (a training stage runs for many minutes); the tail goes into the error, and the stage
    # records its error's type in a file of its own (rubricrl.core.entry.stage_main), which decides a retry.
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="rubricrl-stage-") as tmp:
        error_file = Path(tmp) / "error.json"
        proc = subprocess.Popen(cmd, cwd=project or ROOT, env={**env, ERROR_FILE_ENV: str(error_file)},
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
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
            error = json.loads(error_file.read_text(encoding="utf-8")) if error_file.is_file() else None
            raise StageFailed(stage, proc.returncode, tail.decode("utf-8", "replace").replace("\r", "\n").strip(),
                              error)
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
    if params.registry.candidates:  # before the time is spent: which gates' decisions these sizes can reach
        from rubricrl.release.plan import summary

        print(summary(params, root / "metrics"), file=sys.stderr, flush=True)
    # Stage commands say `python ...`: make that this environment's interpreter.
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    with one_run_at_a_time():
        run = None
        if params.tracking.enabled:
            exp_id = tracking.setup(params.tracking)
            tracking.end_stale_runs(exp_id, "pipeline")  # a killed flow's run: KILLED, not RUNNING for ever
            run = mlflow.start_run(experiment_id=exp_id, run_name="pipeline",
                                   tags={"git.commit": tracking.git_commit(), "rubricrl.stages": ",".join(order),
                                         tracking.PID_TAG: tracking.process_tag()})
        with run or nullcontext():
            if run:
                env[tracking.PARENT_ENV] = run.info.run_id

            def run_stages(names: list[str], forced: bool = False) -> None:
                for stage in names:
                    try:
                        stage_task(stage in network)(stage, forced or force or stage in (force_stages or []), env,
                                                     str(root))
                    except BaseException as err:
                        fail(stage, err)
                        raise

            def fail(stage: str, err: BaseException) -> None:
                if run:  # leaving the `with` then ends the MLflow run as FAILED
                    mlflow.set_tags({"rubricrl.failed_stage": stage, "rubricrl.error": error_summary(str(err))[1][:500]})
                    mlflow.log_text(str(err), "error.txt")

            # The run report comes last: it assembles every stage's section and the registry's decisions.
            last, before = [s for s in order if s == REPORT_STAGE], [s for s in order if s != REPORT_STAGE]
            run_stages(before)
            if "eval_general" in order and (root / EVAL_GENERAL.result).exists():
                try:
                    retrains = retrain_until_general_passes(root, params.general.retrain, before, run_stages, env)
                except BaseException as err:
                    fail("eval_general", err)
                    raise
                if run:
                    mlflow.set_tag("rubricrl.general_retrains", retrains)
            registered = False
            if not stages and params.registry.candidates:
                try:
                    register_and_promote(str(root))
                    registered = True
                except BaseException as err:
                    fail("registry", err)
                    raise
            run_stages(last, forced=registered)  # the decisions are new: the report shows them
            lock = root / "dvc.lock"
            if run and lock.exists():
                mlflow.log_artifact(str(lock))
                mlflow.set_tags(_lock_hashes(lock))
            if params.pipeline.push:
                pushed = dvc_push(root, env)
                if run:
                    mlflow.set_tag("rubricrl.dvc_push", "ok" if pushed else "failed")
    return order


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


