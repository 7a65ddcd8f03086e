"""The stage graph of dvc.yaml: its stages and their dependency order, read without DVC or Prefect.

The one source of the stage order for the Prefect flow (rubricrl.flow.pipeline) and for the one-GPU script
(tools/gpu_run.py), which runs where neither DVC nor Prefect is installed.
"""

from __future__ import annotations

from graphlib import TopologicalSorter
from pathlib import Path

import yaml


def covers(out: str, dep: str) -> bool:
    """An output path provides a dependency path: the same path, or one inside the other."""
    out, dep = out.rstrip("/"), dep.rstrip("/")
    return dep == out or dep.startswith(out + "/") or out.startswith(dep + "/")


def entry_paths(entries) -> list[str]:
    """Stage deps/outs/metrics entries are strings or one-key mappings with options."""
    return [next(iter(e)) if isinstance(e, dict) else e for e in entries or []]


def dvc_stages(dvc_yaml: Path) -> dict:
    return (yaml.safe_load(dvc_yaml.read_text()) or {}).get("stages", {})


def stage_order(dvc_yaml: Path) -> list[str]:
    """Stages in dependency order: a stage comes after every stage whose outputs it reads."""
    stages = dvc_stages(dvc_yaml)
    outs = {name: entry_paths(s.get("outs")) + entry_paths(s.get("metrics")) + entry_paths(s.get("plots"))
            for name, s in stages.items()}
    graph = TopologicalSorter()
    for name, s in stages.items():
        deps = entry_paths(s.get("deps"))
        graph.add(name, *[other for other, paths in outs.items() if other != name
                          and any(covers(o, d) for o in paths for d in deps)])
    return list(graph.static_order())
