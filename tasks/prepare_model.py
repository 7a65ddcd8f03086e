"""DVC stage `prepare_model`: `python tasks/prepare_model.py` is its command in dvc.yaml, which lists its params,
deps and outputs. The stage is rubricrl/stages/prepare_model.py (`python -m rubricrl.stages.prepare_model` runs it
too): this file only calls its main(), from the project root's package."""

import sys
from pathlib import Path

if __name__ == "__main__":
    sys.path[0] = str(Path(__file__).resolve().parents[1])  # the project root, not tasks/: as `python -m` there
    from rubricrl.core.entry import stage_main
    from rubricrl.stages.prepare_model import main

    stage_main(main)
