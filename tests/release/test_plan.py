"""Sizes by power (issue 36 part 1): before a run, which non-inferiority decisions its sizes can reach."""

from __future__ import annotations

import json
import subprocess
import sys

from rubricrl.config import load_params
from rubricrl.metrics.decide import required_n
from rubricrl.release.plan import plan
from tests.flow.test_pipeline import ROOT


def by_gate(reach):
    return {r.gate: r for r in reach}


def test_the_cpu_defaults_suites_are_sized_to_reach_their_margins_and_a_small_suite_is_reported(tmp_path):
    """Identical answers are the best case: at margin 0.10 an equal model passes outright from 43 items. The CPU
    default's IFEval (240) and QA (120) reach it for both registered policies, and the spreads a run measured too
    (SFT - base: IFEval 0.478 needs 218, QA 0.281 needs 106); at 16 IFEval items identical answers cannot pass
    (power 0), so no run of that size can promote through the general gate, and the plan says so before the run."""
    params = load_params(ROOT / "params.yaml", [])
    reach = by_gate(plan(params, tmp_path))
    for model in ("sft", "grpo"):
        for suite, n in (("ifeval", 240), ("qa", 120)):
            r = reach[f"general {suite} ({model} vs base)"]
            assert (r.n, r.needs, r.reachable, r.power) == (n, 43, True, 1.0)
    assert reach["general perplexity (grpo vs base)"].reachable is None  # nats: no spread without a run
    assert "general humaneval (grpo vs base)" not in reach  # sized 0: not run, not planned
    assert reach["registry student vs champion (field accuracy)"].needs == 84  # margin 0.05
    params.general.sizes.ifeval = 16
    ifeval = by_gate(plan(params, tmp_path))["general ifeval (grpo vs base)"]
    assert (ifeval.n, ifeval.needs, ifeval.reachable, ifeval.power) == (16, 43, False, 0.0)


def test_a_large_enough_suite_can_pass_and_the_last_runs_spread_is_used(tmp_path):
    params = load_params(ROOT / "params.yaml", [])
    params.general.sizes.qa = 80
    reach = by_gate(plan(params, tmp_path))
    assert reach["general qa (grpo vs base)"].reachable is True  # 80 >= 43
    (tmp_path / "general.json").write_text(json.dumps({"paired": [
        {"model": "grpo", "suite": "qa", "sd": 0.4}, {"model": "grpo", "suite": "perplexity", "sd": 0.05}]}))
    reach = by_gate(plan(params, tmp_path))
    qa = reach["general qa (grpo vs base)"]
    assert qa.prior == "last run" and qa.sd == 0.4 and qa.needs > 80 and qa.reachable is False
    assert reach["general qa (sft vs base)"].prior == "identical answers"  # the last run's spread is per model
    assert reach["general perplexity (grpo vs base)"].reachable is True  # 24 paragraphs, sd 0.05 nats, margin 0.1
    # a default run's spreads (be03dfb: what its reported powers, 0.81 at IFEval 240 and 0.88 at QA 160 under the
    # old normal approximation, imply)
    (tmp_path / "general.json").write_text(json.dumps({"paired": [
        {"model": "sft", "suite": "ifeval", "sd": 0.478, "binary": True},
        {"model": "sft", "suite": "qa", "sd": 0.281, "binary": True}]}))
    reach = by_gate(plan(load_params(ROOT / "params.yaml", []), tmp_path))
    assert [reach[f"general {s} (sft vs base)"].needs for s in ("ifeval", "qa")] == [218, 106]
    assert [round(reach[f"general {s} (sft vs base)"].power, 2) for s in ("ifeval", "qa")] == [0.85, 0.88]
    assert all(reach[f"general {s} (sft vs base)"].reachable for s in ("ifeval", "qa"))
    # the sizes keep power 0.8 at a spread one standard error above those (sd^2 + sqrt(sd^2 (1 - sd^2) / n)); IFEval
    # is capped at its 240 short-answer prompts
    assert [required_n(0.10, 1.0, sd, binary=True) for sd in (0.506, 0.317)] == [239, 119]


def test_config_validate_names_every_decision_that_cannot_pass(tmp_path):
    (tmp_path / "params.yaml").write_text((ROOT / "params.yaml").read_text())  # no metrics/ beside it: the prior
    run = subprocess.run([sys.executable, "-m", "rubricrl.cli.main", "config", "validate", "params.yaml"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "general ifeval (grpo vs base): n=240, margin 0.1" in run.stdout and "needs n >= 43: can pass" in run.stdout
    # the student's gates on 8 tasks cannot: named, with the n they need
    assert "distill student vs teacher (field accuracy): n=8" in run.stdout
    assert "cannot pass at these sizes" in run.stdout


def test_the_plan_warns_that_gdpo_erases_the_prices(tmp_path):
    from rubricrl.config import Params
    from rubricrl.release.plan import AGGREGATION_WARNING, summary

    assert AGGREGATION_WARNING not in summary(Params(), tmp_path / "metrics")
    gdpo = Params().model_copy(deep=True)
    gdpo.grpo.multi_objective_aggregation = "normalize_then_sum"
    assert summary(gdpo, tmp_path / "metrics").endswith(AGGREGATION_WARNING)
