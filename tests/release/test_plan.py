"""Sizes by power (issue 36 part 1): before a run, which non-inferiority decisions its sizes can reach."""

from __future__ import annotations

import json
import subprocess
import sys

from rubricrl.config import load_params
from rubricrl.release.plan import plan
from tests.flow.test_pipeline import ROOT


def by_gate(reach):
    return {r.gate: r for r in reach}


def test_the_cpu_defaults_suites_are_reported_too_small_for_their_margins(tmp_path):
    """Identical answers are the best case: at IFEval 16 and margin 0.10 an equal model passes with power 0.21;
    it needs 73 items, so no run of these sizes can promote through the general gate."""
    reach = by_gate(plan(load_params(ROOT / "params.yaml", []), tmp_path))
    ifeval = reach["general ifeval (grpo vs base)"]
    assert (ifeval.n, ifeval.needs, ifeval.reachable) == (16, 73, False) and 0.2 < ifeval.power < 0.22
    assert reach["registry student vs champion (field accuracy)"].needs == 151  # margin 0.05
    assert reach["general perplexity (grpo vs base)"].reachable is None  # nats: no spread without a run
    assert "general humaneval (grpo vs base)" not in reach  # sized 0: not run, not planned


def test_a_large_enough_suite_can_pass_and_the_last_runs_spread_is_used(tmp_path):
    params = load_params(ROOT / "params.yaml", [])
    params.general.sizes.qa = 80
    reach = by_gate(plan(params, tmp_path))
    assert reach["general qa (grpo vs base)"].reachable is True  # 80 >= 73
    (tmp_path / "general.json").write_text(json.dumps({"paired": [
        {"model": "grpo", "suite": "qa", "sd": 0.4}, {"model": "grpo", "suite": "perplexity", "sd": 0.05}]}))
    reach = by_gate(plan(params, tmp_path))
    qa = reach["general qa (grpo vs base)"]
    assert qa.prior == "last run" and qa.sd == 0.4 and qa.needs > 80 and qa.reachable is False
    assert reach["general perplexity (grpo vs base)"].reachable is True  # 16 paragraphs, sd 0.05 nats, margin 0.1


def test_config_validate_names_every_decision_that_cannot_pass(tmp_path):
    (tmp_path / "params.yaml").write_text((ROOT / "params.yaml").read_text())  # no metrics/ beside it: the prior
    run = subprocess.run([sys.executable, "-m", "rubricrl.cli.main", "config", "validate", "params.yaml"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "general ifeval (grpo vs base): n=16, margin 0.1" in run.stdout and "needs n >= 73: cannot pass" in run.stdout
    assert "cannot pass at these sizes" in run.stdout
