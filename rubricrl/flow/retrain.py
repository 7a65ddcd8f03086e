"""The seed's remedy when general ability drops: retrain GRPO with a lower learning rate and a higher beta.

The flow reads the general gate from metrics/general.json after eval_general. When a gated model failed, the
lowered values go into an overlay file (.cache/retrain/attempt-N.yaml: grpo.learning_rate x lr_factor,
grpo.beta x beta_factor), never into params.yaml: the retrain's stage processes read it through
RUBRICRL_PARAMS_OVERLAY (rubricrl.config.load_params), and grpo and every stage after it run again, forced
(params.yaml, and so DVC, did not change). Each attempt's MLflow stage runs log the parameters they trained
with and carry the tags `rubricrl.attempt` and `rubricrl.params_overlay`. To keep the lowered values as the
new default: `rubricrl config apply .cache/retrain/attempt-N.yaml`. After general.retrain.max_attempts the flow
stops, naming the suite that failed.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import yaml

from rubricrl.config import OVERLAY_ENV, load_params
from rubricrl.core.atomic import write_text
from rubricrl.core.errors import RubricRLError
from rubricrl.stages.paths import EVAL_GENERAL
from rubricrl.tracking import ATTEMPT_ENV

OVERLAYS = Path(".cache/retrain")


class GeneralGateError(RubricRLError):
    """The general gate still fails after every allowed retrain."""


def gate_failures(metrics: str | Path = EVAL_GENERAL.result) -> list[str]:
    """'model: suite: difference ...' for every suite of a gated model (general.gated) whose general gate failed
    (a drop shown beyond its margin; an inconclusive suite is no reason to retrain, and promotes nothing)."""
    data = json.loads(Path(metrics).read_text(encoding="utf-8"))
    gated = data.get("gated")
    return [f"{model}: {f}" for model, g in (data.get("gates") or {}).items()
            if (gated is None or model in gated) for f in g["failures"]]


def lowered(params, retrain) -> dict:
    """The overlay of one retrain: learning rate x lr_factor, beta x beta_factor (beta 0 starts at beta_floor)."""
    lr, beta = params.grpo.learning_rate, params.grpo.beta
    return {"grpo": {"learning_rate": float(f"{lr * retrain.lr_factor:.6g}"),
                     "beta": float(f"{max(beta, retrain.beta_floor) * retrain.beta_factor:.6g}")}}


def retrain_until_general_passes(root: Path, retrain, order: list[str], run_stages, env: dict) -> int:
    """While the general gate fails, rerun grpo and every stage after it (forced) with a lower GRPO learning rate
    and a higher beta, from an overlay (module doc); at most general.retrain.max_attempts times, then stop naming
    the suite. `run_stages(names, forced=True)` runs stages with `env`. Returns how many retrains it took."""
    root = Path(root)
    overlays = [p for p in env.get(OVERLAY_ENV, "").split(os.pathsep) if p]
    for attempt in range(retrain.max_attempts + 1):
        failures = gate_failures(root / EVAL_GENERAL.result)
        if not failures:
            return attempt
        if attempt == retrain.max_attempts:
            raise GeneralGateError(
                "general gate failed" + (f" after {attempt} retrain(s) of GRPO" if attempt else "") + ":\n"
                + "\n".join(f"  - {f}" for f in failures)
                + "\nNothing was registered or promoted. See outputs/general/report.md; raise general.tolerance or "
                  "general.retrain.max_attempts, or lower grpo.learning_rate by hand.")
        current = load_params(root / "params.yaml", [root / p for p in overlays])
        layer = lowered(current, retrain)
        path = OVERLAYS / f"attempt-{attempt + 1}.yaml"
        write_text(root / path, yaml.safe_dump(layer, sort_keys=False))
        overlays.append(path.as_posix())
        env[OVERLAY_ENV] = os.pathsep.join(overlays)
        env[ATTEMPT_ENV] = str(attempt + 1)
        old, new = current.grpo, layer["grpo"]
        print(f"general gate failed ({'; '.join(failures)}): retraining GRPO, attempt {attempt + 1} of "
              f"{retrain.max_attempts}: learning_rate {old.learning_rate:g} -> {new['learning_rate']:g}, beta "
              f"{old.beta:g} -> {new['beta']:g} (overlay {path}; params.yaml unchanged)", file=sys.stderr, flush=True)
        run_stages(order[order.index("grpo"):], forced=True)
    raise AssertionError("unreachable")
