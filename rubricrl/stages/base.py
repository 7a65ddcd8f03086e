"""What every stage module shares: its typed result (the stage's metrics file), read back by the flow and the
registry step, and the writing of its report section."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict

from rubricrl.core.atomic import write_json, write_text
from rubricrl.core.errors import ConfigError

R = TypeVar("R", bound="Result")


class Result(BaseModel):
    """A stage's typed result: exactly what its metrics file holds."""

    model_config = ConfigDict(extra="forbid")

    def write(self, path: str | Path) -> None:
        write_json(path, self.model_dump(mode="json"))

    @classmethod
    def read(cls: type[R], path: str | Path) -> R:
        """The result a stage wrote; an error naming the file and the stage when it is missing or unreadable."""
        try:
            return cls.model_validate(json.loads(Path(path).read_text(encoding="utf-8")))
        except FileNotFoundError:
            raise ConfigError(f"{path}: not written yet (run its stage)") from None
        except ValueError as err:  # not JSON, or not this stage's shape (pydantic's error is a ValueError)
            raise ConfigError(f"{path}: not a result of its stage: {str(err).splitlines()[0]}") from None


def write_section(path: str | Path, markdown: str) -> None:
    """A stage's part of the run report (Markdown; images referenced relative to its folder)."""
    write_text(path, markdown.rstrip() + "\n")
