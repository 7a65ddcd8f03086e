"""Shared entry behaviour for the CLI and stage scripts: user errors print cleanly and exit 2."""

from __future__ import annotations

import sys
from typing import Callable

from rubricrl.errors import RubricRLError


def stage_main(fn: Callable[[], None]) -> None:
    try:
        fn()
    except RubricRLError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
