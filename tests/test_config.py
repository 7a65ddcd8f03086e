"""Every shipped config validates against the code; bad keys are named with file and line."""

from pathlib import Path

import pytest
import yaml

from rubricrl.config import Params, load_params
from rubricrl.errors import ConfigError
from rubricrl.rubric.spec import load_rubric

ROOT = Path(__file__).resolve().parent.parent
SHIPPED_PARAMS = [ROOT / "params.yaml", ROOT / "configs" / "production.yaml"]  # the CPU default and the GPU profile


@pytest.mark.parametrize("path", SHIPPED_PARAMS, ids=lambda p: p.name)
def test_shipped_params_validate(path):
    params = load_params(path)
    load_rubric(params.scoring.rubric)


def test_production_profile_uses_an_llm_judge_that_is_not_the_policy():
    params = load_params(ROOT / "configs" / "production.yaml")
    assert params.scoring.judge == "openai"
    assert params.scoring.openai_judge.model != params.policy.model
    assert params.policy.model == "Qwen/Qwen2.5-7B-Instruct"


@pytest.mark.parametrize("path", sorted((ROOT / "rubricrl" / "rubrics").glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_rubrics_load(path):
    load_rubric(path)


def test_dvc_stages_name_existing_scripts_and_params_sections():
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    for name, stage in stages.items():
        script = stage["cmd"].split()[1]
        assert (ROOT / script).exists(), f"stage {name}: {script} missing"
        for section in stage.get("params", []):
            assert section.split(".")[0] in Params.model_fields, f"stage {name}: params section {section!r} unknown"


def test_unknown_and_mistyped_keys_are_named_with_line(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("data:\n  seed: 0\n  n_trian: 5\n  n_test: many\nscoring:\n  judge: openai\n")
    with pytest.raises(ConfigError) as err:
        load_params(path)
    msg = str(err.value)
    assert f"{path}:3: data.n_trian: unknown key" in msg
    assert f"{path}:4: data.n_test:" in msg
    assert f"{path}:5: scoring:" in msg and "openai_judge: required" in msg
    assert f"{path}: missing section(s): rubric, sft, grpo, eval, general, distill, export, registry, policy, tracking" in msg


def test_cli_config_validate(capsys):
    from rubricrl.cli import main

    main(["config", "validate", *map(str, SHIPPED_PARAMS)])
    assert capsys.readouterr().out.count(": OK") == len(SHIPPED_PARAMS)


def test_production_profile_names_deepspeed_and_accelerate_configs_that_exist():
    import json

    params = load_params(ROOT / "configs" / "production.yaml")
    assert params.grpo.use_vllm and params.grpo.num_generations == 8 and params.grpo.beta == 0.02
    assert params.grpo.learning_rate == 1e-6 and params.grpo.max_steps == 500 and params.grpo.save_steps == 50
    for section in (params.sft, params.grpo):
        ds = json.loads((ROOT / section.deepspeed).read_text())
        assert ds["zero_optimization"]["stage"] == 3
    accel = yaml.safe_load((ROOT / "configs" / "accelerate_zero3.yaml").read_text())
    assert accel["distributed_type"] == "DEEPSPEED"
    assert accel["deepspeed_config"]["deepspeed_config_file"] == params.grpo.deepspeed
