"""Training settings: the documented production profile, the TRL mapping, data preparation."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from transformers import AutoTokenizer

from rubricrl.core.errors import ConfigError
from rubricrl.inference.models import build_tiny_model
from rubricrl import config as settings_module
from rubricrl.train.data import grpo_rows
from rubricrl.train.general import GENERAL_INSTRUCTIONS, general_count
from rubricrl.config import GRPOSettings
from rubricrl.train.trainer_args import grpo_config
from tests.train_helpers import tiny_tasks


def test_the_production_profile_is_written_once():
    """configs/production.yaml is the one copy: nothing in the code restates its numbers."""
    import inspect

    from rubricrl.train import trainer_args

    assert not hasattr(GRPOSettings, "seed_production") and not hasattr(trainer_args, "ZERO3")
    for module in (settings_module, trainer_args):
        assert "1.0e-6" not in inspect.getsource(module) and "Qwen2.5-7B-Instruct" not in inspect.getsource(module)


def test_settings_reject_unknown_keys_and_zero_beta():
    with pytest.raises(ValidationError):
        GRPOSettings(betta=0.1)
    with pytest.raises(ValidationError):
        GRPOSettings(beta=0.0)


def test_cpu_settings_map_to_grpo_config(tmp_path):
    args = grpo_config(GRPOSettings(), tmp_path, beta=0.03, reward_weights=[1.0, -1.0])
    assert (args.beta, args.use_cpu, args.bf16, args.logging_steps) == (0.03, True, False, 1)
    assert args.save_total_limit is None  # rubricrl prunes, sparing the last good checkpoint
    assert (args.gradient_checkpointing, args.temperature, args.reward_weights) == (False, 0.9, [1.0, -1.0])  # the CPU default
    # TRL's loss and advantage choices come from the settings, its defaults said out loud
    assert (args.loss_type, args.multi_objective_aggregation, args.scale_rewards) == ("dapo", "sum_then_normalize",
                                                                                       "group")
    gdpo = grpo_config(GRPOSettings(multi_objective_aggregation="normalize_then_sum", loss_type="dr_grpo",
                                    scale_rewards="none"), tmp_path, beta=0.03, reward_weights=[1.0, -1.0])
    assert (gdpo.loss_type, gdpo.multi_objective_aggregation, gdpo.scale_rewards) == ("dr_grpo", "normalize_then_sum",
                                                                                       "none")
    with pytest.raises(ConfigError, match="num_generations"):
        grpo_config(GRPOSettings(num_generations=3), tmp_path, beta=0.02, reward_weights=[1.0])


def test_grpo_rows_mix_general_prompts_and_leave_out_long_ones(tmp_path):
    tok = AutoTokenizer.from_pretrained(build_tiny_model(tmp_path / "tiny"))
    rows, skipped = grpo_rows(tiny_tasks(), tok, max_prompt_length=4096, general_share=0.25, seed=0)
    assert skipped == [] and sum(r["task_id"].startswith("general:") for r in rows) == general_count(3, 0.25) == 1
    rows, skipped = grpo_rows(tiny_tasks(), tok, max_prompt_length=64, general_share=0.0, seed=0)
    assert rows == [] and skipped == ["t1", "t2", "t3"]
    assert len(GENERAL_INSTRUCTIONS) >= 40 and any(any("\u4e00" <= ch <= "\u9fff" for ch in g)
                                                    for g in GENERAL_INSTRUCTIONS)


def test_every_other_general_row_carries_a_verifiable_constraint_checked_by_ifeval():
    import json

    from rubricrl.train.general import CONSTRAINTS, general_rows
    from rubricrl.train.reward_mix import if_passed

    rows = general_rows(10, seed=0)
    checked = [r for r in rows if r["check"]]
    assert len(checked) == 5 and all(":if" in r["task_id"] for r in checked)
    assert all(not r["check"] and ":if" not in r["task_id"] for r in rows[::2])
    for lang, options in CONSTRAINTS.items():
        for text, instruction, kwargs in options:  # each constraint builds a working checker
            check = json.dumps({"instruction_id_list": [instruction], "kwargs": [kwargs]})
            assert if_passed(check, "") is False
    lower = json.dumps({"instruction_id_list": ["change_case:english_lowercase"], "kwargs": [{}]})
    assert if_passed(lower, "the sky looks blue because air scatters short blue light more than red light")
    assert not if_passed(lower, "The sky looks Blue because air scatters short blue light more than red light")
    end = json.dumps({"instruction_id_list": ["startend:end_checker"], "kwargs": [{"end_phrase": "还有其他问题吗？"}]},
                     ensure_ascii=False)
    assert if_passed(end, "长城是中国古代的防御工程。还有其他问题吗？") and not if_passed(end, "长城是中国古代的防御工程。")


def test_general_rows_get_the_check_as_reward_or_a_constant_medium():
    import json

    from rubricrl.train.reward_mix import TrainingReward
    from tests.train_helpers import rubric_reward

    mix = TrainingReward(rubric_reward())
    lower = json.dumps({"instruction_id_list": ["change_case:english_lowercase"], "kwargs": [{}]})
    completions = [[{"role": "assistant", "content": t}] for t in (
        "water evaporates from the sea, forms clouds and falls again as rain",
        "Water evaporates from the Sea, forms Clouds and falls again as Rain", "anything", "Anything")]
    columns = {"task_id": ["general:14:if0", "general:14:if0", "general:3", "general:3"],
               "check": [lower, lower, "", ""]}
    per_func = [f(prompts=[None] * 4, completions=completions, **columns) for f in mix.funcs]
    totals = [sum(w * c[i] for w, c in zip(mix.weights, per_func)) for i in range(4)]
    rubric = mix.reward.scorer.rubric
    top = sum(c.weight * c.range[1] for c in rubric.criteria)
    bottom = sum(c.weight * c.range[0] for c in rubric.criteria)
    assert totals[0] == pytest.approx(top) and totals[1] == pytest.approx(bottom)
    assert totals[2] == totals[3] == pytest.approx((top + bottom) / 2)  # constant: zero advantage in its group
