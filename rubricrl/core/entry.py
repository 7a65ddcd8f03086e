"""Shared entry behaviour for the CLI and stage modules: every failure is one `error:` line, exit 2.

When RUBRICRL_ERROR_FILE names a file (the flow sets it for each stage it runs), a failure is also recorded
there as JSON, {"type", "transient", "message"}: the flow decides a retry on the error's type
(rubricrl.core.errors.TransientError), never on the wording of its message.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import traceback
from typing import Callable

from pydantic import ValidationError

from rubricrl.core.errors import RubricRLError, TransientError

EXIT_ERROR = 2
ERROR_FILE_ENV = "RUBRICRL_ERROR_FILE"


# Loggers whose records are held while a command runs (LogHold): every library's (MLflow printed 40-88 lines of
# traceback on a locked store or a file-size limit before our error line), but not the project's own nor Prefect's
# (the flow's progress).
PASS_THROUGH = ("rubricrl", "prefect")
DETAILS_DIR = ".cache/logs"


def describe(err: BaseException) -> str:
    """What went wrong, for a user, in one line: the project's own message, or the OS's with the file it names."""
    if isinstance(err, RubricRLError):
        return str(err)  # its details may follow on lines of their own (a task file's problems), never a traceback
    if isinstance(err, OSError) and err.filename is not None:
        return f"{err.filename}: {err.strerror or err}"
    if isinstance(err, ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or '(root)'}: {e['msg']}" for e in err.errors())
    first = (str(err).strip().splitlines() or [""])[0]  # SQLAlchemy and others append the SQL and a link
    return f"unexpected {type(err).__name__}: {first} (rerun with --debug or RUBRICRL_DEBUG=1 for the traceback)"


class LogHold:
    """Holds the library loggers' records while a command runs. On success the warnings and errors are printed
    as the libraries would have; on failure nothing of them reaches the terminal (one error line): they and the
    traceback go to a details file.

    It sits in Logger.callHandlers, so it also holds the records of handlers a library installs after it started
    (MLflow configures its loggers when it is first imported, deep inside a stage)."""

    def __init__(self):
        self.records: list[logging.LogRecord] = []
        self._original = None

    def __enter__(self) -> "LogHold":
        original = self._original = logging.Logger.callHandlers
        hold = self

        def call_handlers(logger, record):
            if record.name.split(".", 1)[0] in PASS_THROUGH:
                return original(logger, record)
            if len(hold.records) < 5000:
                hold.records.append(record)

        logging.Logger.callHandlers = call_handlers
        return self

    def restore(self) -> None:
        if self._original is not None:
            logging.Logger.callHandlers = self._original
            self._original = None

    def replay(self) -> None:
        """The held warnings and errors, through the handlers they would have reached (stderr by default)."""
        self.restore()
        for record in self.records:
            if record.levelno >= logging.WARNING:
                logging.getLogger(record.name).callHandlers(record)
        self.records = []

    def details(self, err: BaseException) -> str | None:
        """Write the held records and the traceback to a file under DETAILS_DIR; its path, or None."""
        self.restore()
        try:
            os.makedirs(DETAILS_DIR, exist_ok=True)
            path = os.path.join(DETAILS_DIR, f"error-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log")
            fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
            with open(path, "w", encoding="utf-8") as f:
                for record in self.records:
                    f.write(fmt.format(record) + "\n")
                f.write("".join(traceback.format_exception(err)))
            return path
        except OSError:
            return None  # a full disk or a file-size limit: the error line still says what failed


def stage_main(fn: Callable[[], None], debug: bool = False) -> None:
    debug = debug or os.environ.get("RUBRICRL_DEBUG") == "1"
    hold = LogHold()
    if not debug:
        hold.__enter__()
    try:
        fn()
        hold.replay()
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`rubricrl score ... | head`): nothing more to say, and nothing to flush.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        print("error: output pipe closed by the reader", file=sys.stderr)
        sys.exit(EXIT_ERROR)
    except KeyboardInterrupt:
        hold.restore()
        print("error: interrupted", file=sys.stderr)
        sys.exit(130)
    except Exception as err:  # noqa: BLE001 - the one place that turns any failure into a clean exit
        record(err)
        if debug:
            hold.restore()
            raise
        line = describe(err)
        if not isinstance(err, RubricRLError):  # unexpected: keep the traceback and the libraries' logs
            where = hold.details(err)
            if where:
                line = line.replace("(rerun with", f"(details: {where}; rerun with", 1)
        hold.restore()
        print(f"error: {line}", file=sys.stderr)
        sys.exit(EXIT_ERROR)
    finally:
        hold.restore()


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
