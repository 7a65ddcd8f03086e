"""Errors a user can act on: each names the file, line or key at fault."""


class RubricRLError(Exception):
    """Base class; the CLI prints these without a traceback and exits non-zero."""


class TaskFileError(RubricRLError):
    """A task or responses file has problems; `problems` lists every one as 'file:line: key: what'."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        head = f"{len(problems)} problem(s) found:" if len(problems) > 1 else "problem found:"
        super().__init__(head + "\n" + "\n".join(f"  {p}" for p in problems))


class ConfigError(RubricRLError):
    """params.yaml or a rubric YAML is invalid."""


class TransientError(RubricRLError):
    """A failure that may heal by itself (an endpoint down or overloaded): the flow retries a stage that failed
    with one (rubricrl.flow.pipeline.transient_failure), and no other."""


class JudgeError(RubricRLError):
    """A judge verdict could not be obtained or parsed after the retries."""


class JudgeUnavailable(JudgeError, TransientError):
    """The judge endpoint did not answer (timeout, connection failure, HTTP 429 or 5xx) after the retries."""


class TrainingError(RubricRLError):
    """Training cannot go on (e.g. KL keeps spiking after every allowed rollback)."""


class SandboxError(RubricRLError):
    """The code sandbox cannot run programs safely on this host (no set-up starts Python, or a run's processes or
    cgroup outlived the clean-up)."""
