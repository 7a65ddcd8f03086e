"""DVC stage `prepare_model`: the policy as a normal HF folder (embedded SmolLM2, a local path or a hub id)."""

from __future__ import annotations

import json
from pathlib import Path

from rubricrl import tracking
from rubricrl.config import Params, load_params
from rubricrl.core.entry import stage_main
from rubricrl.core.tables import table
from rubricrl.inference.models import prepare_policy
from rubricrl.stages.base import Result, write_section
from rubricrl.stages.paths import PREPARE_MODEL as PATHS


class PrepareResult(Result):
    model: str  # policy.model as given
    architecture: str
    layers: int | None
    hidden_size: int | None
    vocab_size: int | None
    tied_embeddings: bool | None
    weights_mb: float


def run(params: Params) -> PrepareResult:
    with tracking.stage_run(params.tracking, "prepare_model", {"policy": params.policy.model_dump()}) as run:
        out = prepare_policy(params.policy.model, PATHS.model)
        run.set_tag("policy.model", params.policy.model)
        run.log_outputs([out / "config.json"])
    result = describe(params.policy.model, out)
    write_section(PATHS.section, section(result))
    return result


def describe(model: str, folder: Path) -> PrepareResult:
    """What a person checks of the prepared policy, from its config and weight files (nothing is loaded)."""
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    return PrepareResult(model=model, architecture=",".join(config.get("architectures") or [config.get("model_type", "?")]),
                         layers=config.get("num_hidden_layers"), hidden_size=config.get("hidden_size"),
                         vocab_size=config.get("vocab_size"), tied_embeddings=config.get("tie_word_embeddings"),
                         weights_mb=round(sum(p.stat().st_size for p in folder.glob("*.safetensors")) / 2**20, 1))


def section(result: PrepareResult) -> str:
    r = result
    return "\n".join(["# Base model", "",
                      f"`{r.model}` prepared as a Hugging Face folder (`{PATHS.model}`): the model SFT and the "
                      "evaluations start from.", "",
                      table(["architecture", "layers", "hidden size", "vocabulary", "tied embeddings", "weights MB"],
                            [[r.architecture, r.layers, r.hidden_size, r.vocab_size, r.tied_embeddings, r.weights_mb]],
                            digits=1)])


def main() -> None:
    """The stage: tasks/prepare_model.py (dvc.yaml's command) and `python -m` run it under stage_main."""
    run(load_params())


if __name__ == "__main__":
    stage_main(main)
