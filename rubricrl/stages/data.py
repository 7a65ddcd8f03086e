"""DVC stage `data`: build the train/val/test task files (generated, or the user's JSONL) and their stats."""

from __future__ import annotations

from pathlib import Path

from rubricrl import tracking
from rubricrl.config import Params, load_params
from rubricrl.calibrate.items_draft import fill_items
from rubricrl.core.atomic import output_set, write_jsonl
from rubricrl.core.taskfile import Task
from rubricrl.core.entry import stage_main
from rubricrl.core.tables import table
from rubricrl.data.prepare import prepare_splits, split_stats
from rubricrl.stages.base import Result, write_section
from rubricrl.stages.paths import DATA as PATHS


class DataResult(Result):
    """metrics/data.json: per split, its size and what it holds (split_stats)."""

    train: dict
    val: dict
    test: dict
    items_drafted: dict = {}  # free-text tasks written with `items: []`: how many got the deterministic draft


def draft_missing_items(splits: dict[str, list[Task]]) -> tuple[dict[str, list[Task]], dict]:
    """The deterministic draft (rubricrl/calibrate/items_draft.py) for free-text tasks written with `items: []`
    (`rubricrl rubric items --llm` adds a judge endpoint's proposals to a task file before the run)."""
    out, total = {}, {"drafted": 0, "proposed": 0, "problems": []}
    for name, tasks in splits.items():
        out[name], done = fill_items(tasks)
        total = {k: total[k] + done[k] for k in total}
    return out, total


def run(params: Params) -> DataResult:
    cfg = params.data
    inputs = [cfg.tasks_file] if cfg.source == "file" else []
    with tracking.stage_run(params.tracking, "data", {"data": cfg.model_dump()}, inputs=inputs) as run:
        splits = prepare_splits(cfg)  # validates everything before anything is written
        splits, drafted = draft_missing_items(splits)
        out = Path(PATHS.train).parent
        with output_set(out, f"{out}: another run is writing here; waiting for it") as stage:
            for name in ("train", "val", "test"):  # the three files appear together or not at all
                write_jsonl(stage / Path(getattr(PATHS, name)).name, (t.to_dict() for t in splits[name]))
        result = DataResult(**split_stats(splits), items_drafted=drafted)
        result.write(PATHS.stats)
        write_section(PATHS.section, section(result, params))
        stats = result.model_dump()
        run.log_metrics({f"{s}.{k}": v for s, d in stats.items() for k, v in d.items()
                         if isinstance(v, (int, float))})
        run.log_dict(stats, "data_stats.json")
        run.log_outputs([PATHS.train, PATHS.val, PATHS.test])
    return result


def section(result: DataResult, params: Params) -> str:
    cfg = params.data
    source = (f"generated ({cfg.task_family.replace('_', ' ')}, seed {cfg.seed})" if cfg.source == "generate"
              else f"`{cfg.tasks_file}`")
    splits = {name: s for name, s in result.model_dump().items() if name in ("train", "val", "test")}
    rows = [[name, s["n"], ", ".join(f"{k} {v}" for k, v in s["kinds"].items()), s["with_reference"], s["share_hard"],
             s["share_gold_null"], s["distinct_schemas"], ", ".join(f"{k} {v}" for k, v in s["parts"].items()),
             ", ".join(f"{k} {v}" for k, v in s["langs"].items())]
            for name, s in splits.items()]
    return "\n".join([
        "# Data", "",
        f"Tasks {source}: {result.train['n']} train, {result.val['n']} validation (calibration and the hack monitor, "
        f"never trained on), {result.test['n']} test.", "",
        table(["split", "tasks", "kinds", "with reference", "hard share", "gold-null share", "schemas", "parts",
               "languages"], rows),
        *(["", f"Items drafted for {result.items_drafted['drafted']} free-text task(s) written without them "
               "(the deterministic draft: identifiers, language, a stated length limit, invented numbers, words "
               "for a grader)."] if result.items_drafted.get("drafted") else []),
        "", "Domains: " + "; ".join(f"{name}: " + ", ".join(f"{k} {v}" for k, v in s["domains"].items())
                                   for name, s in splits.items()) + "."])


def main() -> None:
    """The stage: tasks/data.py (dvc.yaml's command) and `python -m` run it under stage_main."""
    run(load_params())


if __name__ == "__main__":
    stage_main(main)
