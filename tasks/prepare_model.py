"""DVC stage `prepare_model`: the policy as a normal HF folder (embedded SmolLM2, a local path or a hub id)."""

from rubricrl import tracking
from rubricrl.cli_support import stage_main
from rubricrl.config import load_params
from rubricrl.models import prepare_policy

OUT = "outputs/models/base"


def main() -> None:
    params = load_params()
    with tracking.stage_run(params.tracking, "prepare_model", {"policy": params.policy.model_dump()}) as run:
        out = prepare_policy(params.policy.model, OUT)
        run.set_tag("policy.model", params.policy.model)
        run.log_outputs([out / "config.json"])


if __name__ == "__main__":
    stage_main(main)
