"""The general suites end to end on a tiny model, the gate on paired differences, and the flow's retrain path."""

import json
import shutil
from pathlib import Path

import pytest
import yaml

from rubricrl.config import GeneralParams, load_params
from rubricrl.flow.retrain import GeneralGateError, gate_failures, retrain_until_general_passes
from rubricrl.general.run import SUITES, compare, evaluate, gate, generation_speed, markdown, rows_stamp
from rubricrl.inference.models import build_tiny_model
from tests.inference.test_llamacpp_engine import smol_tiny  # noqa: F401  (the fixture: a tiny model llama.cpp can convert)

ROOT = Path(__file__).resolve().parents[2]
SMALL = GeneralParams(sizes={"ifeval": 4, "humaneval": 2, "qa": 4, "perplexity": 3}, perplexity_max_tokens=32, engine="transformers",
                      max_new_tokens={"ifeval": 12, "humaneval": 12, "qa": 12}, n_boot=200)


@pytest.mark.slow
def test_every_suite_runs_on_a_tiny_model_and_compares_paired(tmp_path):
    base = evaluate(build_tiny_model(tmp_path / "a", seed=0), SMALL)
    other = evaluate(build_tiny_model(tmp_path / "b", seed=1), SMALL)
    assert set(base) == set(SUITES)
    for suite, n in (("ifeval", 4), ("humaneval", 2), ("qa", 4), ("perplexity", 3)):
        assert len(base[suite]["items"]) == n and base[suite]["summary"]["n"] == n
    assert base["perplexity"]["score"] > 1  # a random model: perplexity far above 1
    # each generating suite's decoding, counted (the eval_general result's tokens/s)
    assert all(base[s]["generation"]["new_tokens"] > 0 and base[s]["generation"]["seconds"] > 0
               for s in ("ifeval", "humaneval", "qa"))
    speed = generation_speed(base)
    assert speed["new_tokens"] == sum(base[s]["generation"]["new_tokens"] for s in ("ifeval", "humaneval", "qa"))
    assert speed["tokens_per_s"] > 0
    paired = compare({"base": base, "grpo": other}, n_boot=200)
    assert {(r["model"], r["suite"]) for r in paired} == {("grpo", s) for s in SUITES}
    ppl = next(r for r in paired if r["suite"] == "perplexity")
    # Token-weighted: base nll - model nll.
    tok = sum(r["tokens"] for r in base["perplexity"]["items"])
    want = (sum(r["nll"] * r["tokens"] for r in base["perplexity"]["items"])
            - sum(r["nll"] * r["tokens"] for r in other["perplexity"]["items"])) / tok
    assert ppl["diff"] == pytest.approx(want)
    text = markdown({"base": base, "grpo": other}, paired, gate(paired, SMALL.tolerance, ["grpo"]), SMALL.tolerance)
    assert "| humaneval | 2 |" in text and "## Gate" in text
    assert f"humaneval sandbox: {base['humaneval']['summary']['sandbox']}." in text  # its mechanisms on this host


def _row(suite, diff, model="grpo", n=400):
    """A paired row with a powered n (decide refuses a pass an equal model would rarely get)."""
    return {"model": model, "suite": suite, "diff": diff, "ci": [diff - 0.1, diff + 0.1], "p": 0.04, "n": n,
            "sd": 0.1, "a": 0.5, "b": 0.5 - diff}


def test_gate_fails_on_a_drop_beyond_the_tolerance_and_names_the_suite():
    tol = {"ifeval": 0.1, "humaneval": 0.1, "qa": 0.1, "perplexity": 0.05}
    paired = [_row("ifeval", 0.05), _row("humaneval", 0.0), _row("qa", -0.25), _row("perplexity", 0.1),
              _row("qa", -0.5, model="sft")]
    g = gate(paired, tol, ["grpo"])
    assert list(g) == ["grpo"] and not g["grpo"]["passed"] and g["grpo"]["outcome"] == "fail"
    assert len(g["grpo"]["failures"]) == 1 and g["grpo"]["failures"][0].startswith("qa: fail: -0.250")
    assert {s: d["outcome"] for s, d in g["grpo"]["decisions"].items()} == {
        "ifeval": "pass", "humaneval": "pass", "qa": "fail", "perplexity": "pass"}
    assert "n=400" in g["grpo"]["decisions"]["qa"]["line"]
    # the interval's lower bound exactly at -tolerance passes
    assert gate([_row("qa", 0.0)], tol, ["grpo"])["grpo"]["outcome"] == "pass"
    # the same interval on 16 items: an equal model would pass too rarely there, so it decides nothing
    small = gate([_row("qa", 0.0, n=16)], tol, ["grpo"])["grpo"]
    assert small["outcome"] == "inconclusive" and "underpowered" in small["decisions"]["qa"]["line"]


def test_a_drop_the_interval_cannot_rule_out_is_inconclusive_not_a_pass():
    tol = {"ifeval": 0.1, "humaneval": 0.1, "qa": 0.1, "perplexity": 0.1}
    g = gate([_row("qa", -0.05)], tol, ["grpo"])["grpo"]  # -0.05 [-0.15, +0.05]: the old mean rule passed it
    assert g["outcome"] == "inconclusive" and not g["passed"] and g["failures"] == []


def test_a_suite_every_model_scores_at_its_floor_is_uninformative():
    tol = {"ifeval": 0.1, "humaneval": 0.1, "qa": 0.1, "perplexity": 0.1}
    floor = {"model": "grpo", "suite": "humaneval", "diff": 0.0, "ci": [0.0, 0.0], "p": 1.0, "n": 5, "a": 0.0,
             "b": 0.0, "mde": None}
    g = gate([_row("qa", 0.1), floor], tol, ["grpo"])["grpo"]
    assert g["decisions"]["humaneval"]["outcome"] == "uninformative" and g["outcome"] == "inconclusive"
    assert "uninformative" in markdown({"base": {"qa": {"summary": {"n": 16}, "score": 0.5}}}, [floor],
                                       {"grpo": g}, tol)


def test_rows_pair_across_runs_only_when_answered_alike():
    """The registry pairs a challenger's rows with a champion's of an earlier run only under the same stamp: the
    sizes may differ (rows pair on the items both answered), a reply budget or the engine may not."""
    stamp = rows_stamp(SMALL)
    assert rows_stamp(SMALL.model_copy(update={"sizes": SMALL.sizes.model_copy(update={"qa": 2})})) == stamp
    assert rows_stamp(SMALL.model_copy(update={"max_new_tokens": {**SMALL.max_new_tokens, "qa": 13}})) != stamp
    assert rows_stamp(SMALL.model_copy(update={"engine": "llama_cpp"})) != stamp


def test_a_suite_sized_zero_is_not_run(tmp_path):
    cfg = SMALL.model_copy(update={"sizes": SMALL.sizes.model_copy(update={"humaneval": 0, "ifeval": 0})})
    out = evaluate(build_tiny_model(tmp_path / "a", seed=0), cfg)
    assert set(out) == {"qa", "perplexity"}


@pytest.fixture
def project(tmp_path):
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    (tmp_path / "metrics").mkdir()
    return tmp_path


def _write_gate(root: Path, passed: bool) -> None:
    failures = [] if passed else ["qa: -0.300 [-0.500, -0.100], p=0.010 is a drop beyond the tolerance 0.1"]
    (root / "metrics/general.json").write_text(json.dumps({"gates": {"grpo": {"passed": passed, "failures": failures}}}))


ORDER = ["data", "prepare_model", "sft", "rubric", "grpo", "eval_task", "eval_general", "report"]


def test_a_failed_general_gate_retrains_grpo_with_lower_lr_and_higher_beta(project):
    _write_gate(project, passed=False)  # the injected failure
    ran, env = [], {}
    outcomes = iter([False, True])  # still failing after the first retrain, passing after the second
    before = (project / "params.yaml").read_text()

    def run_stages(names, forced=False):
        # What a stage process of this attempt reads: params.yaml with the overlays the flow passes.
        seen = load_params(project / "params.yaml", [project / p for p in env["RUBRICRL_PARAMS_OVERLAY"].split(":")])
        ran.append((names, forced, env.get("RUBRICRL_ATTEMPT"), seen.grpo.learning_rate, seen.grpo.beta))
        _write_gate(project, next(outcomes))

    retrain = load_params(project / "params.yaml").general.retrain
    assert retrain_until_general_passes(project, retrain, ORDER, run_stages, env) == 2
    # grpo and everything downstream, forced, each attempt tagged, each with a lower lr and a higher beta
    assert [r[:3] for r in ran] == [(ORDER[4:], True, "1"), (ORDER[4:], True, "2")]
    assert [r[3:] for r in ran] == [pytest.approx((1.5e-6, 0.04)), pytest.approx((0.75e-6, 0.08))]
    assert (project / "params.yaml").read_text() == before  # never rewritten: the overlays carry the change
    assert yaml.safe_load((project / ".cache/retrain/attempt-2.yaml").read_text()) == {
        "grpo": {"learning_rate": 7.5e-07, "beta": 0.08}}


def test_the_flow_stops_naming_the_suite_after_the_last_attempt(project):
    _write_gate(project, passed=False)
    calls = []
    retrain = load_params(project / "params.yaml").general.retrain
    with pytest.raises(GeneralGateError, match=r"after 2 retrain\(s\) of GRPO:\n  - grpo: qa: -0.300"):
        retrain_until_general_passes(project, retrain, ORDER, lambda names, forced: calls.append(names), {})
    assert len(calls) == 2
    assert gate_failures(project / "metrics/general.json") == [
        "grpo: qa: -0.300 [-0.500, -0.100], p=0.010 is a drop beyond the tolerance 0.1"]


def test_a_passing_gate_retrains_nothing(project):
    _write_gate(project, passed=True)
    before = (project / "params.yaml").read_text()
    assert retrain_until_general_passes(project, load_params(project / "params.yaml").general.retrain, ORDER,
                                        lambda names, forced: pytest.fail("no retrain expected"), {}) == 0
    assert (project / "params.yaml").read_text() == before


@pytest.mark.slow
def test_the_llama_cpp_engine_gives_every_suite_too(smol_tiny, seeded_gguf_cache):  # noqa: F811
    cfg = SMALL.model_copy(update={"engine": "llama_cpp"})
    out = evaluate(smol_tiny, cfg)
    assert {s: len(out[s]["items"]) for s in SUITES} == {"ifeval": 4, "humaneval": 2, "qa": 4, "perplexity": 3}
    assert all(isinstance(r["response"], str) for s in ("ifeval", "humaneval", "qa") for r in out[s]["items"])
