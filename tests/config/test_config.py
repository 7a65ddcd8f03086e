"""Every shipped config validates against the code; bad keys are named with file and line; one source of truth
per setting: the typed defaults are params.yaml, and a GPU profile is an overlay of only what differs."""

from pathlib import Path

import pytest
import yaml

from rubricrl.config import Params, load_params
from rubricrl.core.errors import ConfigError
from rubricrl.reward.load import load_rubric

ROOT = Path(__file__).resolve().parents[2]
PARAMS = ROOT / "params.yaml"
PRODUCTION = ROOT / "configs" / "production.yaml"
# Overlays laid over another profile rather than over params.yaml alone.
STACKED = {"miniature.yaml": [PRODUCTION], "gpu_dry.yaml": [ROOT / "configs" / "gpu.yaml"]}
OVERLAYS = [[*STACKED.get(p.name, []), p] for p in sorted((ROOT / "configs").glob("*.yaml"))
            if not p.name.startswith("accelerate_")]  # params overlays (the profiles), not accelerate's configs


def production():
    return load_params(PARAMS, [PRODUCTION])


@pytest.mark.parametrize("overlays", [[]] + OVERLAYS, ids=lambda o: o[-1].name if o else "params.yaml")
def test_shipped_params_validate(overlays):
    params = load_params(PARAMS, overlays)
    load_rubric(params.scoring.rubric)


def _leaves(mapping: dict, prefix: str = ""):
    for key, value in mapping.items():
        if isinstance(value, dict) and value:
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def _at(mapping, dotted: str, missing="<not a key>"):
    for part in dotted.split("."):
        if not isinstance(mapping, dict) or part not in mapping:
            return missing
        mapping = mapping[part]
    return mapping


def test_params_yaml_writes_every_key_with_its_typed_default():
    """The CPU default is written once: the models' defaults. params.yaml spells every key with that value."""
    defaults = Params().model_dump(mode="json")
    written = yaml.safe_load(PARAMS.read_text())
    missing = [k for k, _ in _leaves(defaults) if _at(written, k) == "<not a key>"]
    differ = [f"{k}: params.yaml {v!r}, rubricrl/config.py {_at(defaults, k)!r}" for k, v in _leaves(written)
              if _at(defaults, k) != v]
    assert not missing, f"keys of rubricrl/config.py that params.yaml does not write: {missing}"
    assert not differ, "params.yaml differs from the typed defaults:\n" + "\n".join(differ)
    assert load_params(PARAMS) == Params()


@pytest.mark.parametrize("overlays", OVERLAYS, ids=lambda o: o[-1].name)
def test_a_profile_overlay_holds_only_keys_that_differ(overlays):
    *beneath, overlay = overlays  # the CPU defaults, or the profile it is laid over (miniature: production)
    defaults = load_params(PARAMS, beneath).model_dump(mode="json")
    layer = yaml.safe_load(overlay.read_text())
    same = [k for k, v in _leaves(layer) if _at(defaults, k) == v]
    assert not same, f"{overlay.name} repeats what it is laid over (an overlay holds only what differs): {same}"
    assert set(layer) < set(Params.model_fields)  # not a whole params file


def test_an_overlay_error_names_the_overlay_file_and_line(tmp_path):
    layer = tmp_path / "gpu.yaml"
    layer.write_text("grpo:\n  beta: 0.04\n  num_generatons: 8\neval:\n  batch_size: 0\n")
    with pytest.raises(ConfigError) as err:
        load_params(PARAMS, [layer])
    msg = str(err.value)
    assert f"{layer}:3: grpo.num_generatons: unknown key" in msg and f"{layer}:5: eval.batch_size:" in msg
    assert str(PARAMS) not in msg


def test_the_overlay_environment_variable_is_read_by_default(tmp_path, monkeypatch):
    layer = tmp_path / "retrain.yaml"
    layer.write_text("grpo:\n  learning_rate: 1.5e-6\n  beta: 0.04\n")
    monkeypatch.setenv("RUBRICRL_PARAMS_OVERLAY", str(layer))
    params = load_params(PARAMS)
    assert (params.grpo.learning_rate, params.grpo.beta) == (1.5e-6, 0.04)
    assert params.grpo.max_steps == Params().grpo.max_steps  # the rest is params.yaml's
    assert load_params(PARAMS, []) == Params()  # an explicit empty list reads no overlay


def test_production_profile_uses_an_llm_judge_that_is_not_the_policy():
    params = production()
    assert params.scoring.judge == "openai"
    assert params.scoring.openai_judge.model != params.policy.model
    assert params.policy.model == "Qwen/Qwen2.5-7B-Instruct"


@pytest.mark.parametrize("path", sorted((ROOT / "rubricrl" / "reward" / "rubrics").glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_rubrics_load(path):
    load_rubric(path)


def test_dvc_stages_name_existing_scripts_and_params_sections():
    from tools.dvc_deps import stage_script

    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    for name, stage in stages.items():
        script = stage_script(stage["cmd"])
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
    from rubricrl.cli.main import main

    main(["config", "validate", str(PARAMS)])
    main(["config", "validate", str(PARAMS), "--overlay", str(PRODUCTION), "--overlay",
          str(ROOT / "configs" / "miniature.yaml")])
    assert capsys.readouterr().out.count(": OK") == 2


def test_cli_config_apply_writes_the_overlay_into_params_keeping_comments(tmp_path, capsys):
    from rubricrl.cli.main import main

    params = tmp_path / "params.yaml"
    params.write_text(PARAMS.read_text())
    main(["config", "apply", str(PRODUCTION), "--params", str(params)])
    assert load_params(params, []) == production()
    text = params.read_text()
    assert "# CPU runs few steps; the seed's 1e-6 is for 500" in text  # params.yaml's comments kept
    assert "grpo.learning_rate: 3e-06 -> 1e-06" in capsys.readouterr().out


def test_production_profile_names_deepspeed_and_accelerate_configs_that_exist():
    import json

    params = production()
    assert params.grpo.use_vllm and params.grpo.num_generations == 8 and params.grpo.beta == 0.02
    assert params.grpo.learning_rate == 1e-6 and params.grpo.max_steps == 500 and params.grpo.save_steps == 50
    for section in (params.sft, params.grpo):
        ds = json.loads((ROOT / section.deepspeed).read_text())
        assert ds["zero_optimization"]["stage"] == 3
    accel = yaml.safe_load((ROOT / "configs" / "accelerate_zero3.yaml").read_text())
    assert accel["distributed_type"] == "DEEPSPEED"
    assert accel["deepspeed_config"]["deepspeed_config_file"] == params.grpo.deepspeed
