"""Named points where the chaos test kills the process with SIGKILL, at an exact moment of its progress.

`RUBRICRL_KILL_AT="<point>:<n>"` kills this process the n-th time it reaches `point` (a kill -9: no handler,
no cleanup, nothing flushed that was not already written). Unset, as everywhere outside that test, a point
costs one environment lookup. The points:

- "journal": inside a journal append, after the first half of its bytes reached the file (a torn last line);
- "checkpoint": after a training checkpoint was marked complete (the stage's first save, or a later one);
- "save": a training checkpoint written but not yet marked complete (a rerun discards it: the steps since the
  last save are lost, the worst moment);
- "publish": a finished folder written beside its final name, not yet renamed into place (mid-write of an output);
- "tracking": before an MLflow call of a stage (a metric, a tag or an artifact: during the registry calls).
"""

from __future__ import annotations

import os
import signal
from collections import Counter

ENV = "RUBRICRL_KILL_AT"
POINTS = ("journal", "checkpoint", "save", "publish", "tracking")
_reached: Counter[str] = Counter()


def point(name: str) -> None:
    """Count one arrival at `name`; SIGKILL this process when it is the one RUBRICRL_KILL_AT names."""
    spec = os.environ.get(ENV)
    if not spec:
        return
    want, _, nth = spec.partition(":")
    if want != name:
        return
    _reached[name] += 1
    if _reached[name] == int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)
