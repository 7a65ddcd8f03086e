"""Shared entry behaviour for the CLI and stage modules: every failure is one `error:` line, exit 2.

When RUBRICRL_ERROR_FILE names a file (the flow sets it for each stage it runs), a failure is also recorded
there as JSON, {"type", "transient", "message"}: the flow decides a retry on the error's type
(rubricrl.core.errors.TransientError), never on the wording of its message.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Callable

from pydantic import ValidationError

from rubricrl.core.errors import RubricRLError, TransientError

EXIT_ERROR = 2
ERROR_FILE_ENV = "RUBRICRL_ERROR_FILE"


def describe(err: BaseException) -> str:
    """What went wrong, for a user: the project's own message, or the OS's with the file it names."""
    if isinstance(err, RubricRLError):
        return str(err)
    if isinstance(err, OSError) and err.filename is not None:
        return f"{err.filename}: {err.strerror or err}"
    if isinstance(err, ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or '(root)'}: {e['msg']}" for e in err.errors())
    return f"unexpected {type(err).__name__}: {err} (rerun with --debug or RUBRICRL_DEBUG=1 for the traceback)"


def stage_main(fn: Callable[[], None], debug: bool = False) -> None:
    debug = debug or os.environ.get("RUBRICRL_DEBUG") == "1"
    try:
        fn()
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`rubricrl score ... | head`): nothing more to say, and nothing to flush.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        print("error: output pipe closed by the reader", file=sys.stderr)
        sys.exit(EXIT_ERROR)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        sys.exit(130)
    except Exception as err:  # noqa: BLE001 - the one place that turns any failure into a clean exit
        record(err)
        if debug:
            raise
        print(f"error: {describe(err)}", file=sys.stderr)
        sys.exit(EXIT_ERROR)


def record(err: BaseException) -> None:
    """Write the error's type to RUBRICRL_ERROR_FILE, if set (the flow reads it to decide a retry)."""
    path = os.environ.get(ERROR_FILE_ENV)
    if not path:
        return
    kind = type(err)
    try:
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"type": f"{kind.__module__}.{kind.__qualname__}", "transient": isinstance(err, TransientError),
                       "message": describe(err)[:2000]}, f)
    except OSError:
        pass  # the record is a hint for retries; the error line below still says what failed
