"""The seed's remedy when general ability drops: retrain GRPO with a lower learning rate and a higher beta.

The pipeline flow reads the general gate from metrics/general.json after eval_general; when a gated model
failed it writes the lowered values into params.yaml (a round trip that keeps comments and layout, as
`dvc exp run -S` does), so `dvc repro` reruns grpo and everything downstream, and dvc.lock, the MLflow
runs and the model agree on the settings that made it. Each attempt's stage runs carry the tag
`rubricrl.attempt`. After general.retrain.max_attempts the flow stops, naming the suite that failed.
"""

from __future__ import annotations

import json
from pathlib import Path

from rubricrl.errors import RubricRLError
from rubricrl.tracking import ATTEMPT_ENV  # noqa: F401  (the flow sets it for each retrain's stage runs)


class GeneralGateError(RubricRLError):
    """The general gate still fails after every allowed retrain."""


def gate_failures(metrics: str | Path = "metrics/general.json") -> list[str]:
    """'model: suite: difference ...' for every gated model (general.gated) that failed its general gate."""
    data = json.loads(Path(metrics).read_text(encoding="utf-8"))
    gated = data.get("gated")
    return [f"{model}: {f}" for model, g in (data.get("gates") or {}).items()
            if not g["passed"] and (gated is None or model in gated) for f in g["failures"]]


def lower_grpo(params_path: str | Path, retrain) -> dict[str, tuple[float, float]]:
    """grpo.learning_rate x lr_factor and grpo.beta x beta_factor (beta 0 starts at beta_floor) in params.yaml.

    retrain: GeneralRetrain. Returns {"learning_rate": (old, new), "beta": (old, new)}."""
    from ruamel.yaml import YAML

    yaml = YAML()  # round trip: comments, order and layout survive
    yaml.preserve_quotes = True
    yaml.representer.add_representer(type(None), lambda r, _: r.represent_scalar("tag:yaml.org,2002:null", "null"))
    path = Path(params_path)
    doc = yaml.load(path.read_text(encoding="utf-8"))
    grpo = doc["grpo"]
    lr, beta = float(grpo["learning_rate"]), float(grpo.get("beta", 0.0))
    new_lr, new_beta = lr * retrain.lr_factor, max(beta, retrain.beta_floor) * retrain.beta_factor
    grpo["learning_rate"], grpo["beta"] = float(f"{new_lr:.6g}"), float(f"{new_beta:.6g}")
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        yaml.dump(doc, f)
    tmp.replace(path)
    return {"learning_rate": (lr, grpo["learning_rate"]), "beta": (beta, grpo["beta"])}
