"""Distillation: the student built from the teacher's layers, hard prompts by KL, one GKD step."""

import pytest
import torch

from rubricrl.config import DistillParams
from rubricrl.release.distill import (align_vocab, build_student, gkd_train, hardness, layer_importance,
                                      select_layers)
from rubricrl.inference.models import build_tiny_model


def test_layers_are_evenly_spaced_with_both_ends():
    assert select_layers(30, 14) == [0, 2, 4, 7, 9, 11, 13, 16, 18, 20, 22, 25, 27, 29]
    assert select_layers(4, 2) == [0, 3] and select_layers(3, 3) == [0, 1, 2]
    with pytest.raises(ValueError, match="between 1 and the teacher's 4 layers"):
        select_layers(4, 5)


def test_layers_by_importance_keep_both_ends_and_the_most_important_of_the_rest():
    importance = [0.0, 0.5, 0.01, 0.9, 0.02, 0.3, 0.0]
    assert select_layers(7, 4, importance) == [0, 1, 3, 6]
    assert select_layers(7, 2, importance) == [0, 6] and select_layers(7, 1, importance) == [0]
    with pytest.raises(ValueError, match="3 values for 7 layers"):
        select_layers(7, 4, [1.0, 2.0, 3.0])


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("t") / "teacher", hidden_size=32, layers=4, seed=2)


def test_student_copies_the_kept_layers_and_shares_the_rest(teacher, tmp_path):
    from transformers import AutoModelForCausalLM

    info = build_student(teacher, tmp_path / "s", 2)
    assert info["layers"] == [0, 3] and info["teacher_layers"] == 4 and 0 < info["ratio"] < 1
    t = AutoModelForCausalLM.from_pretrained(teacher).state_dict()
    s = AutoModelForCausalLM.from_pretrained(tmp_path / "s").state_dict()
    assert torch.equal(s["model.layers.1.mlp.up_proj.weight"], t["model.layers.3.mlp.up_proj.weight"])
    assert torch.equal(s["model.layers.0.self_attn.q_proj.weight"], t["model.layers.0.self_attn.q_proj.weight"])
    assert torch.equal(s["model.embed_tokens.weight"], t["model.embed_tokens.weight"])
    assert (tmp_path / "s" / "tokenizer.json").exists()


def test_align_vocab_pads_the_student_to_the_teachers_size(teacher):
    from transformers import AutoModelForCausalLM

    student = AutoModelForCausalLM.from_pretrained(teacher)
    n = student.config.vocab_size
    assert not align_vocab(student, n)
    assert align_vocab(student, n + 8) and student.get_input_embeddings().weight.shape[0] == n + 8


def test_hardness_is_zero_for_the_teacher_itself_and_one_gkd_step_runs(teacher, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(teacher)
    convs = [[{"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": f"answer {i} {i}"}]
             for i in range(3)]
    t = AutoModelForCausalLM.from_pretrained(teacher)
    assert hardness(t, t, tok, convs) == pytest.approx([0.0] * 3, abs=1e-6)
    build_student(teacher, tmp_path / "s", 2)
    kl = hardness(t, AutoModelForCausalLM.from_pretrained(tmp_path / "s"), tok, convs)
    assert all(k > 0 for k in kl)
    cfg = DistillParams(steps=1, batch_size=2, max_length=64, max_new_tokens=8, pool=3, n_prompts=2)
    stats = gkd_train(tmp_path / "s", teacher, convs[:2], tmp_path / "after", cfg)
    assert stats["steps"] == 1 and stats["first_loss"] is not None
    before = AutoModelForCausalLM.from_pretrained(tmp_path / "s").state_dict()["model.layers.0.mlp.up_proj.weight"]
    after = AutoModelForCausalLM.from_pretrained(tmp_path / "after").state_dict()["model.layers.0.mlp.up_proj.weight"]
    assert not torch.equal(before, after)  # the step changed the weights


@pytest.mark.slow
def test_importance_measures_each_layer_and_distillation_makes_the_divergence_fall(teacher, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(teacher)
    convs = [[{"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": f"answer {i} {i} {i}"}]
             for i in range(4)]
    t = AutoModelForCausalLM.from_pretrained(teacher)
    importance = layer_importance(t, tok, convs)
    assert len(importance) == 4 and all(0 < x < 2 for x in importance)
    info = build_student(teacher, tmp_path / "s", 2, importance)
    assert info["layers"] == [0, 3]
    before = sum(hardness(t, AutoModelForCausalLM.from_pretrained(tmp_path / "s"), tok, convs)) / 4
    cfg = DistillParams(steps=8, batch_size=2, max_length=64, max_new_tokens=8, pool=4, n_prompts=4,
                        learning_rate=3e-3)
    stats = gkd_train(tmp_path / "s", teacher, convs, tmp_path / "after", cfg)
    after = sum(hardness(t, AutoModelForCausalLM.from_pretrained(tmp_path / "after"), tok, convs)) / 4
    assert len(stats["losses"]) == 8 and stats["losses"][-1] < stats["losses"][0]
    assert after < 0.8 * before, (before, after)  # the divergence the gate checks fell


def test_the_students_gate_needs_a_falling_divergence_and_non_inferior_accuracy():
    from rubricrl.stages.distill import student_gate
    from tests.release.test_registry import _rows

    teacher, same, worse = _rows([3, 2] * 50), _rows([3, 2] * 50), _rows([0, 1] * 10)
    fell, rose = {"before": 0.8, "after": 0.3}, {"before": 0.8, "after": 0.9}
    assert student_gate(fell, teacher, same, 0.1, 200)["outcome"] == "pass"
    # the same answers on 20 tasks: too few to show non-inferiority within 0.1 (power), so no pass
    small = student_gate(fell, teacher[:20], same[:20], 0.1, 200)
    assert small["outcome"] == "inconclusive" and "power 0.00" in small["line"]  # identical answers: from 43
    assert student_gate(rose, teacher, same, 0.1, 200)["outcome"] == "fail"
    g = student_gate(fell, teacher, worse, 0.1, 200)
    assert g["outcome"] == "fail" and "non-inferiority" in g["line"] and "n=20" in g["line"]


@pytest.mark.slow
def test_the_students_general_suites_pair_with_eval_generals_base_rows(tmp_path, monkeypatch):
    from rubricrl.core.atomic import write_jsonl
    from rubricrl.general.run import SUITES, evaluate
    from rubricrl.stages import distill as stage
    from tests.general.test_general_gate import SMALL

    monkeypatch.chdir(tmp_path)
    student = build_tiny_model(tmp_path / "student", seed=1)
    with pytest.raises(FileNotFoundError, match="outputs/general/base/ifeval.jsonl"):
        stage.general_base_rows(SMALL)
    base = evaluate(build_tiny_model(tmp_path / "base", seed=0), SMALL)
    for suite in SUITES:  # as eval_general leaves them
        write_jsonl(stage.GENERAL_BASE / f"{suite}.jsonl", base[suite]["items"])
    general = stage.general_suites(student, SMALL, stage.general_base_rows(SMALL))
    assert set(general["models"]["student"]) == set(SUITES) and set(general["gates"]) == {"student"}
    assert {(r["model"], r["suite"]) for r in general["paired"]} == {("student", s) for s in SUITES}
    assert all(r["n"] == base[r["suite"]]["summary"]["n"] for r in general["paired"])
    assert (stage.OUT / "general/qa.jsonl").exists()
    assert "- student: " in (stage.OUT / "general/report.md").read_text()
