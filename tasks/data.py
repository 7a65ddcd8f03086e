"""DVC stage `data`: build the train/test task files (generated, or the user's JSONL) and their stats."""

from pathlib import Path

from rubricrl import tracking
from rubricrl.atomic import output_set, write_json, write_jsonl
from rubricrl.cli_support import stage_main
from rubricrl.config import load_params
from rubricrl.data.prepare import prepare_splits, split_stats

OUT_DIR = Path("data")
OUT = {name: OUT_DIR / f"{name}.jsonl" for name in ("train", "val", "test")}
METRICS = "metrics/data.json"


def main() -> None:
    params = load_params()
    cfg = params.data
    inputs = [cfg.tasks_file] if cfg.source == "file" else []
    with tracking.stage_run(params.tracking, "data", {"data": cfg.model_dump()}, inputs=inputs) as run:
        splits = prepare_splits(cfg)  # validates everything before anything is written
        with output_set(OUT_DIR, f"{OUT_DIR}: another run is writing here; waiting for it") as stage:
            for name, path in OUT.items():  # the three files appear together or not at all
                write_jsonl(stage / path.name, (t.to_dict() for t in splits[name]))
        stats = split_stats(splits)
        write_json(METRICS, stats)
        run.log_metrics({f"{s}.{k}": v for s, d in stats.items() for k, v in d.items() if not isinstance(v, dict)})
        run.log_dict(stats, "data_stats.json")
        run.log_outputs(list(OUT.values()))


if __name__ == "__main__":
    stage_main(main)
