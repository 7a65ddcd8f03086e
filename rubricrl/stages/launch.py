"""The training stages (sft, grpo) as several processes: the relaunch under accelerate and the main process's
MLflow run. Its own module, so only those stages depend on it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

from rubricrl.core.errors import ConfigError
from rubricrl.core.net import free_port


def relaunch_under_accelerate(config: str | None, module: str) -> None:
    """A training stage started as `python -m MODULE` (as DVC and the flow run it) with its accelerate_config set:
    run the same module under `accelerate launch --config_file CONFIG` (8 GPUs and ZeRO-3 in production, 2 CPU
    processes in the miniature) and exit with its code. Under a launcher already (LOCAL_RANK set), or with no
    config: return and train in this process."""
    if config and "LOCAL_RANK" not in os.environ:
        if not Path(config).is_file():
            raise ConfigError(f"{config}: the accelerate config named by accelerate_config does not exist")
        cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", config]
        if single_machine(config):  # a free rendezvous port: two runs on one machine must not share 29500
            cmd += ["--main_process_port", str(free_port())]
        sys.exit(subprocess.call(cmd + ["-m", module]))


def single_machine(config: str | Path) -> bool:
    import yaml

    return int((yaml.safe_load(Path(config).read_text(encoding="utf-8")) or {}).get("num_machines", 1)) == 1



def rank_run(main_process: bool, open_run) -> contextlib.AbstractContextManager:
    """The stage's MLflow run on the main process (`open_run()`), nothing on the others (a NoRun). torchrun stops the
    other ranks with SIGTERM when one fails: the main process then exits, closing its run as FAILED."""
    from rubricrl.tracking import NoRun

    if not main_process:
        return contextlib.nullcontext(NoRun())
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    return open_run()
