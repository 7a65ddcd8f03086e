"""The LLM paths of the rubric stage against the real llama.cpp server (SmolLM2 as the 'stronger' model)."""

import json

import pytest

from rubricrl.config import Params
from rubricrl.data.generate import generate_dataset
from rubricrl.reward.judges.base import JudgeRequest
from rubricrl.reward.judges.openai_judge import OpenAIJudge
from rubricrl.reward.spec import Rubric
from rubricrl.reward.load import load_rubric
from rubricrl.config import JudgeConfig
from rubricrl.calibrate.workflow import generate_draft, run_calibration

pytestmark = pytest.mark.slow


def judge_config(base_url, **over):
    return JudgeConfig(**{"type": "openai", "base_url": base_url, "model": "smollm2-judge",
                          "response_format": "json_object", "cache_dir": None, "max_tokens": 64, **over})


@pytest.fixture(scope="module")
def tasks():
    return generate_dataset(seed=1, n_train=60, n_test=8)["train"]


def test_llm_proposals_are_validated_into_the_draft(llama_server, tasks, tmp_path):
    params = Params.model_validate({"scoring": {"judge": "grounded", "openai_judge": judge_config(llama_server, max_tokens=450).model_dump()},
                                    "rubric": {"llm_proposals": True, "n_answers": 4}})
    draft, problems = generate_draft(tasks, params)
    llm = [c for c in draft.criteria if c.source.startswith("llm:")]
    assert all(c.kind == "judge" and c.judge == "openai" and c.id.startswith("llm_") for c in llm)
    assert all("skipped" in p or "not JSON" in p or "criteria" in p for p in problems)
    if llm:
        assert draft.judges["openai"].base_url == llama_server
    path = tmp_path / "draft.yaml"
    path.write_text(draft.to_yaml())
    assert load_rubric(path) == draft  # whatever was kept is whole and valid


def test_adaptive_sampling_agrees_within_a_bound_at_a_fraction_of_the_calls(llama_server, tasks):
    rubric = load_rubric("json_extraction")
    crit = next(c for c in rubric.criteria if c.kind == "judge")
    reqs = [JudgeRequest(t, json.dumps(t.reference, ensure_ascii=False), t.reference, crit) for t in tasks[:12]]
    # concurrency 1: llama.cpp's server serves one request at a time and loses its prompt cache otherwise
    full = OpenAIJudge(judge_config(llama_server, concurrency=1))
    adaptive = OpenAIJudge(judge_config(llama_server, concurrency=1, adaptive_samples=True, warmup_verdicts=2))
    a = full.judge_batch(reqs)
    b = adaptive.judge_batch(reqs)
    # llama.cpp at temperature 0 is not bit-deterministic (one verdict of 12 flipped 3 -> 0 in a fresh-clone
    # run), so the guarantee is agreement within a bound, not equality of two runs; the bound is measured
    # over many answers, with the noise floor of two full runs, by benchmarks/judge_adaptive.py.
    agree = sum(x.score == y.score for x, y in zip(a, b))
    assert agree >= len(reqs) - 2, [(x.score, y.score) for x, y in zip(a, b)]
    assert 2.0 <= full.calls / len(reqs) <= 2.5  # median of 3, early stop: temperature-0 samples mostly agree
    # Adaptive: each of the 2 warm-up verdicts takes at most 3 calls, then one call a verdict, plus at most 2
    # re-asks; and a real saving against the full median-of-3 (2-2.5 calls a verdict).
    assert adaptive.calls <= 2 * 3 + (len(reqs) - 2) + 2
    assert adaptive.calls <= 0.75 * full.calls


def test_calibration_with_the_openai_judge_reports_consistency_and_calls(llama_server, tasks):
    cfg = judge_config(llama_server, adaptive_samples=True, warmup_verdicts=3, concurrency=1)
    params = Params.model_validate({"scoring": {"judge": "openai", "openai_judge": cfg.model_dump()},
                                    "rubric": {"n_calibration": 5}})
    rubric = Rubric.model_validate(load_rubric("json_extraction").model_dump())
    cal = run_calibration(rubric, tasks, params)
    consistency = cal.report["judge_consistency"]["faithfulness"]
    assert consistency["judge"] == "openai" and consistency["verdicts_with_repeats"] > 0
    assert 0.0 <= consistency["agreement"] <= 1.0
    assert 1.0 <= cal.report["judge_calls_per_response"] <= 1.3
