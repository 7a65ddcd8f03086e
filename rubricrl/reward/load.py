"""Where rubrics come from: a shipped one by name (rubricrl/reward/rubrics/*.yaml) or a YAML path, validated
against the spec and the registry of rule and penalty functions."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from rubricrl.core.errors import ConfigError
from rubricrl.core.yamlfile import read_mapping, validation_error
from rubricrl.reward.rules import check_registry
from rubricrl.reward.spec import Rubric

SHIPPED = Path(__file__).resolve().parent / "rubrics"  # rubrics inside the package: found from anywhere


def shipped_rubrics() -> list[str]:
    return sorted(p.stem for p in SHIPPED.glob("*.yaml"))


def rubric_path(ref: str | Path) -> Path:
    """A rubric reference is a YAML path, or the bare name of a shipped rubric ('json_extraction')."""
    ref = str(ref)
    if "/" in ref or "\\" in ref or ref.endswith((".yaml", ".yml")):
        return Path(ref)
    if ref not in shipped_rubrics():
        raise ConfigError(f"rubric '{ref}': not a file path and not a shipped rubric "
                          f"(shipped: {', '.join(shipped_rubrics())}; a path needs a .yaml suffix or a folder)")
    return SHIPPED / f"{ref}.yaml"


def load_rubric(ref: str | Path) -> Rubric:
    path = rubric_path(ref)
    data, root = read_mapping(path, "rubric")
    try:
        rubric = Rubric.model_validate(data)
    except ValidationError as err:
        raise validation_error(err, data, root, path) from None
    problems = check_registry(rubric)
    if problems:
        raise ConfigError("\n".join(f"{path}: {p}" for p in problems))
    return rubric
