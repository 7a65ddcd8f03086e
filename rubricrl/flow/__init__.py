"""The Prefect flow over the DVC stage graph: runs, schedules and retriggers, the general-gate retrain, the
registry step, run status, and the pull steps of the GPU deployment. Nothing below this layer imports Prefect.

Prefect reads its settings once, when it is first imported, so they are set here, before any module of this package
(registry, retrain, pipeline, ...) imports it: a project-local Prefect home, no analytics, and a start-up timeout
for the embedded server that a busy 2-core machine meets (Prefect's default, 20 s, ran out while a training stage
and a llama.cpp server shared the cores)."""

import os
from pathlib import Path


def prefect_env() -> None:
    """A project-local Prefect home and no analytics; without PREFECT_API_URL Prefect runs embedded."""
    os.environ.setdefault("PREFECT_HOME", str(Path.cwd() / ".prefect"))
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    # The embedded server migrates a fresh database on first start: slow on a busy 2-core machine.
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")


prefect_env()
