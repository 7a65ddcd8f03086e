"""DVC stage `eval_task`: `python tasks/eval_task.py` is its command in dvc.yaml, which lists its params, deps and
outputs. The stage is rubricrl/stages/eval_task.py (`python -m rubricrl.stages.eval_task` runs it too): this file
only calls its main(), from the project root's package."""

import sys
from pathlib import Path

if __name__ == "__main__":
    sys.path[0] = str(Path(__file__).resolve().parents[1])  # the project root, not tasks/: as `python -m` there
    from rubricrl.core.entry import stage_main
    from rubricrl.stages.eval_task import main

    stage_main(main)
