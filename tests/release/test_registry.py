"""MLflow registry promotion: candidates become versions; `champion` moves only when every gate passes."""

import hashlib
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from rubricrl.flow.registry import candidate
from rubricrl.release import registry
from rubricrl.config import load_params
from rubricrl.inference.models import build_tiny_model

ROOT = Path(__file__).resolve().parents[2]
N_TASKS = 24  # a constant gain of one field in four is shown at 24 tasks (the score interval), not at 12


def _rows(right: list[int], fields: int = 4, parts: list[str] | None = None, nulls: int = 0,
          parsed: bool = True) -> list[dict]:
    return [{"id": f"t{i}", "part": parts[i] if parts else "in_domain", "total": float(r), "response": "{}",
             "strict": {"right": r, "fields": fields, "present": fields, "present_right": r,
                        "null_for_present": nulls if parsed else 0, "absent": 0, "invented": 0,
                        "exact": int(r == fields), "parsed": int(parsed)}} for i, r in enumerate(right)]


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project folder as the pipeline leaves it before promotion: data, rubric, two models, their evals."""
    monkeypatch.chdir(tmp_path)
    # An absolute store: MLflow caches its store per URI, so a relative one would leak between tests.
    text = (ROOT / "params.yaml").read_text().replace("sqlite:///mlruns/mlflow.db", f"sqlite:///{tmp_path}/mlruns/mlflow.db")
    # tiny random models: their tokenizer has no GGUF conversion, so greedy answers stay on transformers
    text = text.replace("  engine: auto            # greedy:", "  engine: transformers    # greedy:")
    (tmp_path / "params.yaml").write_text(text)
    for name in ("train", "val", "test"):
        (tmp_path / "data").mkdir(exist_ok=True)
        (tmp_path / "data" / f"{name}.jsonl").write_text(f'{{"split": "{name}"}}\n')
    (tmp_path / "outputs/rubric").mkdir(parents=True)
    (tmp_path / "outputs/rubric/rubric.yaml").write_text("name: test\n")
    build_tiny_model(tmp_path / "outputs/models/sft", seed=1)
    build_tiny_model(tmp_path / "outputs/grpo/model", seed=2)
    set_evals(tmp_path, base=[0] * N_TASKS, sft=[2] * N_TASKS, grpo=[3] * N_TASKS)
    set_general(tmp_path, {"sft": True, "grpo": True})
    return tmp_path


def set_evals(root: Path, parts: list[str] | None = None, nulls: int = 0, unparsed: tuple[str, ...] = (),
              **right: list[int]) -> None:
    models = {}
    for name, r in right.items():
        rows = _rows(r, parts=parts, nulls=nulls, parsed=name not in unparsed)
        (root / "outputs/eval" / name).mkdir(parents=True, exist_ok=True)
        (root / "outputs/eval" / name / "responses.jsonl").write_text("".join(json.dumps(x) + "\n" for x in rows))
        acc = sum(r) / (4 * len(r))
        models[name] = {"all": {"reward_mean": float(sum(r)) / len(r), "strict": {"field_accuracy": acc}}}
    (root / "metrics").mkdir(exist_ok=True)
    (root / "metrics/eval.json").write_text(json.dumps({"models": models}))


def set_general(root: Path, passed: dict[str, bool], qa: dict[str, list[int]] | None = None,
                stamp: str = "s1") -> None:
    """metrics/general.json: each model's gate vs base; with `qa`, its per-item qa rows (outputs/general/<model>/),
    which the registry registers with it and pairs against the champion's."""
    gates = {m: {"passed": ok, "failures": [] if ok else ["qa: -0.300 [-0.5, -0.1], p=0.010 is a drop beyond "
                                                          "the tolerance 0.1"]} for m, ok in passed.items()}
    models = {m: {"qa": {"score": 0.5}, "ifeval": {"score": 0.25}} for m in passed}
    for m, right in (qa or {}).items():
        (root / "outputs/general" / m).mkdir(parents=True, exist_ok=True)
        (root / "outputs/general" / m / "qa.jsonl").write_text(
            "".join(json.dumps({"id": f"qa{i}", "score": float(r)}) + "\n" for i, r in enumerate(right)))
        models[m] = {"qa": {"score": sum(right) / len(right)}}
    (root / "metrics/general.json").write_text(json.dumps({"models": models, "gates": gates,
                                                            **({"stamp": stamp} if qa else {})}))


def register(root: Path, stage: str, rubric_gate=()):
    """As the flow registers a candidate: its evidence read from the stages' results (rubricrl.flow.registry)."""
    params = load_params(root / "params.yaml")
    return registry.register(params, candidate(root, stage), list(rubric_gate), params_file=root / "params.yaml")


def aliases(root: Path) -> dict:
    c = registry.client(load_params(root / "params.yaml").tracking)
    return {a: str(v) for a, v in c.get_registered_model("rubricrl-extractor").aliases.items()}


def test_first_passing_candidate_becomes_champion_with_lineage_tags(project):
    v = register(project, "grpo")
    params = load_params(project / "params.yaml")
    mv = registry.resolve(params, f"rubricrl-extractor/{v}")
    for tag in ("stage", "git.commit", "params.sha256", "model.md5", "source_run", "dvc.md5.data/test.jsonl",
                "dvc.md5.outputs/rubric/rubric.yaml", "eval.all.field_accuracy", "general.qa", "gate.general"):
        assert tag in mv.tags, tag
    assert mv.tags["eval.all.field_accuracy"] == "0.7500" and mv.tags["stage"] == "grpo"
    assert aliases(project) == {"challenger": v}
    d = registry.promote(params)
    assert d["promoted"] and d["champion_before"] is None and d["champion_after"] == v
    assert aliases(project) == {"challenger": v, "champion": v}
    assert "promoted to champion" in (project / registry.REPORT).read_text()
    mv = registry.resolve(params, "rubricrl-extractor@champion")
    assert mv.tags["promotion.decision"] == "champion" and mv.tags["promotion.gate.task"].startswith("pass")
    assert "vs base 0.000" in mv.tags["promotion.gate.task"] and mv.tags["eval.base_rows"] == registry.BASE_ROWS


def test_the_first_candidate_must_beat_the_base_model_on_its_rows(project):
    """The first champion used to be whoever passed the other gates, with no task evidence at all."""
    params = load_params(project / "params.yaml")
    (project / "outputs/eval/base/responses.jsonl").unlink()
    register(project, "sft")
    task = next(g for g in registry.promote(params)["gates"] if g["name"] == "task")
    assert task["outcome"] == "inconclusive" and "no base-model eval rows" in task["detail"]
    assert "champion" not in aliases(project)
    set_evals(project, base=[2] * N_TASKS, grpo=[2] * N_TASKS)  # a policy no better than its base
    register(project, "grpo")
    d = registry.promote(params)
    task = next(g for g in d["gates"] if g["name"] == "task")
    assert not d["promoted"] and task["outcome"] == "inconclusive" and "vs base 0.500" in task["detail"]


def test_a_part_shown_to_regress_fails_the_gate_though_the_pool_passes(project):
    params = load_params(project / "params.yaml")
    half = 2 * N_TASKS
    parts = ["in_domain"] * half + ["held_out_domain"] * half
    set_evals(project, parts=parts, base=[0] * (2 * half), sft=[1] * half + [2] * half)
    champ = register(project, "sft")
    assert registry.promote(params)["promoted"]
    # GRPO: +3 fields of 4 in-domain, -1 held-out: the pool is better, the held-out domain shown worse
    set_evals(project, parts=parts, grpo=[4] * half + [1] * half)
    register(project, "grpo")
    d = registry.promote(params)
    task = next(g for g in d["gates"] if g["name"] == "task")
    assert task["detail"].split("; part ")[0].split(": ", 1)[1].startswith("pass")  # pooled: shown better
    assert task["outcome"] == "fail" and "part held_out_domain: fail: -0.250" in task["detail"]
    assert not d["promoted"] and aliases(project)["champion"] == champ


def test_same_weights_reuse_their_version(project):
    assert register(project, "grpo") == register(project, "grpo")


def test_worse_challenger_stays_and_the_failing_gate_is_named(project):
    params = load_params(project / "params.yaml")
    champ = register(project, "grpo")
    registry.promote(params)
    set_evals(project, sft=[1] * N_TASKS)  # sft: 0.25 field accuracy on the same tasks vs the champion's 0.75
    chal = register(project, "sft")
    d = registry.promote(params)
    assert not d["passed"] and not d["promoted"] and aliases(project) == {"challenger": chal, "champion": champ}
    task = next(g for g in d["gates"] if g["name"] == "task")
    assert not task["passed"] and "field_accuracy challenger 0.250 vs champion 0.750: fail: -0.500" in task["detail"]
    mv = registry.resolve(params, "rubricrl-extractor@challenger")
    assert mv.tags["promotion.decision"] == "rejected: task fail" and mv.tags["promotion.gate.task"].startswith("fail")
    assert "n=24, MDE" in task["detail"] and "superiority" in task["detail"]


def test_abstention_shown_to_rise_fails_the_task_gate_though_accuracy_is_shown_better(project):
    params = load_params(project / "params.yaml")
    champ = register(project, "sft")  # 2 of 4 fields, no nulls
    registry.promote(params)
    set_evals(project, nulls=1, grpo=[3] * N_TASKS)  # one more field right, and one stated value answered null
    register(project, "grpo")
    d = registry.promote(params)
    task = next(g for g in d["gates"] if g["name"] == "task")
    assert task["detail"].split(": ", 2)[1].startswith("pass")  # accuracy: shown better
    assert task["outcome"] == "fail" and "part all: stated values not given (null, left out or unparsed) 0.000 -> " \
        "0.250" in task["detail"]
    assert "abstention shown up by more than 0.02" in task["detail"] and aliases(project)["champion"] == champ


def test_a_first_candidate_that_answers_is_no_abstainer_against_a_base_model_that_does_not(project):
    """The base model parses few answers, so it states few nulls: against it a candidate that answers, with a null
    or two, gives more stated values, not fewer (an unparsed answer gives none of them)."""
    params = load_params(project / "params.yaml")
    set_evals(project, nulls=1, unparsed=("base",), base=[0] * N_TASKS, sft=[2] * N_TASKS)
    register(project, "sft")
    d = registry.promote(params)
    task = next(g for g in d["gates"] if g["name"] == "task")
    assert task["outcome"] == "pass" and "abstention" not in task["detail"], task["detail"]


def test_a_challenger_whose_interval_straddles_the_margin_is_inconclusive_and_stays(project):
    params = load_params(project / "params.yaml")
    champ = register(project, "sft")  # 2 of 4 fields on every task
    registry.promote(params)
    set_evals(project, grpo=[3, 1] * 11 + [3, 2])  # +1 field of 96: the old mean rule promoted this
    chal = register(project, "grpo")
    d = registry.promote(params)
    task = next(g for g in d["gates"] if g["name"] == "task")
    assert task["outcome"] == "inconclusive" and not d["promoted"] and aliases(project)["champion"] == champ
    assert "+0.010" in task["detail"] and "n=24" in task["detail"]
    assert registry.resolve(params, f"rubricrl-extractor/{chal}").tags["promotion.decision"] == "rejected: task inconclusive"
    assert "**inconclusive**" in (project / registry.REPORT).read_text()


@pytest.mark.parametrize("gate", ["rubric", "general"])
def test_a_failed_rubric_or_general_gate_blocks_the_first_champion(project, gate):
    if gate == "general":
        set_general(project, {"grpo": False})
    register(project, "grpo", rubric_gate=["probe 'copy_source': margin 0.1 < 0.4"] if gate == "rubric" else ())
    d = registry.promote(load_params(project / "params.yaml"))
    failed = [g["name"] for g in d["gates"] if not g["passed"]]
    assert failed == [gate] and "champion" not in aliases(project)
    assert "stays challenger" in (project / registry.REPORT).read_text()


def _qa(share: float, n: int = 400) -> list[int]:
    """n qa items, the first share of them right: a lower share is right on a subset of a higher one's items."""
    return [int(i < round(share * n)) for i in range(n)]


def test_a_challenger_that_regresses_against_the_champion_but_not_against_base_is_held(project):
    """Base 0.5, champion 0.8, challenger 0.62 at margin 0.1: +0.12 over base passes, -0.18 against the champion is a
    drop beyond the margin; compared with base only it would have been promoted."""
    params = load_params(project / "params.yaml")
    assert params.general.tolerance["qa"] == 0.1
    set_general(project, {"sft": True, "grpo": True}, qa={"sft": _qa(0.8), "grpo": _qa(0.62)})
    champ = register(project, "sft")
    first = next(g for g in registry.promote(params)["gates"] if g["name"] == "general")
    assert first["against"] == "base" and first["detail"].startswith("vs base (no champion yet): ")
    chal = register(project, "grpo")  # 3 of 4 fields vs the champion's 2: the task gate passes
    d = registry.promote(params)
    gates = {g["name"]: g for g in d["gates"]}
    assert gates["task"]["passed"] and gates["task"]["against"] == f"champion version {champ}"
    general = gates["general"]
    assert general["outcome"] == "fail" and general["against"] == f"champion version {champ}"
    assert general["detail"].startswith(f"vs champion version {champ}: qa fail: -0.180")
    assert general["detail"].endswith(". vs base (must hold too): pass")
    assert not d["promoted"] and aliases(project) == {"challenger": chal, "champion": champ}
    mv = registry.resolve(params, f"rubricrl-extractor/{chal}")
    assert mv.tags["promotion.decision"] == "rejected: general fail"
    assert mv.tags["promotion.gate.general"].startswith(f"fail: vs champion version {champ}: qa fail")
    assert f"| general | champion version {champ} | **fail** |" in (project / registry.REPORT).read_text()
    # GRPO not worse than the SFT champion on the same items (0.82 vs 0.8): every gate passes, GRPO is champion
    set_general(project, {"sft": True, "grpo": True}, qa={"grpo": _qa(0.82)})
    assert register(project, "grpo") == chal  # the same weights: their version, its rows registered anew
    d = registry.promote(params)
    assert d["promoted"] and aliases(project)["champion"] == chal, d["gates"]
    assert next(g for g in d["gates"] if g["name"] == "general")["detail"].startswith(
        f"vs champion version {champ}: qa pass: +0.020")


def test_the_general_gate_falls_back_to_base_where_the_champion_has_no_rows_to_pair(project):
    """No champion, a champion registered without general rows, or rows of other items or settings: the base gate
    decides, and the detail says why."""
    params = load_params(project / "params.yaml")
    register(project, "sft")  # no per-item rows (registered before they were kept)
    registry.promote(params)
    set_general(project, {"grpo": True}, qa={"grpo": _qa(0.2)})  # the base gate (passed) decides, whatever the rows
    register(project, "grpo")
    d = registry.promote(params)
    general = next(g for g in d["gates"] if g["name"] == "general")
    assert general["against"] == "base" and general["passed"] and d["promoted"]
    assert general["detail"] == "vs base (no general rows were registered with the champion version 1): pass"
    set_evals(project, sft=[4] * N_TASKS)
    set_general(project, {"sft": True}, qa={"sft": _qa(0.8)}, stamp="other budgets")
    register(project, "sft")
    general = next(g for g in registry.promote(params)["gates"] if g["name"] == "general")
    assert general["against"] == "base" and "the champion version 2's general rows answer other items or " \
        "settings (rows stamp s1, the challenger's other budgets)" in general["detail"]


def test_the_general_gate_pairs_only_rows_that_answer_the_same_items_the_same_way(monkeypatch):
    """Without the store: a suite the champion has no answers to, or perplexity over other tokens (another
    tokenizer), leaves the decision to the base gate; the same tokens pair."""
    from types import SimpleNamespace

    params = load_params(ROOT / "params.yaml")
    tags = {"gate.general": "pass", registry.GENERAL_STAMP: "s1", "registering_run": "r"}
    challenger, champion = SimpleNamespace(version="2", tags=tags), SimpleNamespace(version="1", tags=tags)
    ppl = lambda tokens: [{"id": f"p{i}", "tokens": tokens, "nll": 2.0 + i % 3 / 10} for i in range(40)]  # noqa: E731
    rows = {"2": {"qa": [{"id": "qa0", "score": 1.0}], "perplexity": ppl(100)}}
    monkeypatch.setattr(registry, "_general_rows", lambda c, mv: rows[mv.version])
    rows["1"] = {"perplexity": ppl(100)}
    g = registry.general_gate(None, challenger, champion, params)
    assert g.against == "base" and "has no answers to the challenger's qa items" in g.detail
    rows["1"] = {"qa": [{"id": "qa0", "score": 1.0}], "perplexity": ppl(120)}
    g = registry.general_gate(None, challenger, champion, params)
    assert g.against == "base" and "tokenizes the perplexity text differently" in g.detail
    rows["2"].pop("qa")
    rows["1"]["perplexity"] = ppl(100)
    g = registry.general_gate(None, challenger, champion, params)
    assert g.against == "champion version 1" and g.detail.startswith("vs champion version 1: perplexity ")
    # Equal to the champion but failing against base (the champion had used up the margin): held, so losses
    # within the margin cannot add up over a chain of promotions
    failing = SimpleNamespace(version="2", tags={**tags, "gate.general": "fail: qa fail: -0.150 [-0.20, -0.11]"})
    held = registry.general_gate(None, failing, champion, params)
    assert not held.passed and held.outcome == "fail" and "vs base (must hold too): fail" in held.detail


def test_dry_run_moves_nothing(project):
    register(project, "grpo")
    d = registry.promote(load_params(project / "params.yaml"), dry_run=True)
    assert d["passed"] and not d["promoted"] and "champion" not in aliases(project)


def test_rollback_returns_to_the_previous_champion(project):
    params = load_params(project / "params.yaml")
    first = register(project, "sft")
    registry.promote(params)
    with pytest.raises(registry.RegistryError, match="first champion"):
        registry.rollback(params)
    set_evals(project, grpo=[4] * N_TASKS)
    second = register(project, "grpo")
    assert registry.promote(params)["promoted"]
    assert registry.rollback(params) == (second, first)
    assert aliases(project)["champion"] == first


def test_concurrent_promotes_leave_one_consistent_champion(project):
    params = load_params(project / "params.yaml")
    v = register(project, "grpo")
    results, errors = [], []

    def go():
        try:
            results.append(registry.promote(params, report=None))
        except Exception as err:  # noqa: BLE001
            errors.append(err)

    threads = [threading.Thread(target=go) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    # The lock serialises them: one promotes, the other finds the challenger already champion.
    assert sorted(r["promoted"] for r in results) == [False, True]
    assert aliases(project)["champion"] == v
    c = registry.client(params.tracking)
    assert json.loads(c.get_registered_model("rubricrl-extractor").tags[registry.HISTORY]) == [v]


@pytest.mark.slow
def test_a_fresh_process_loads_the_champion_with_the_transformers_flavour(project):
    register(project, "grpo")
    registry.promote(load_params(project / "params.yaml"))
    code = (f"import mlflow; mlflow.set_tracking_uri('sqlite:///{project}/mlruns/mlflow.db');"
            "p = mlflow.transformers.load_model('models:/rubricrl-extractor@champion', return_type='components');"
            "m, t = p['model'], p['tokenizer']; ids = t('hello', return_tensors='pt');"
            "out = m.generate(**ids, max_new_tokens=4, do_sample=False); print('generated', out.shape[1] - ids['input_ids'].shape[1])")
    proc = subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "generated 4" in proc.stdout


def test_cli_lists_shows_promotes_rolls_back_and_evaluates_the_champion(project, capsys):
    from rubricrl.cli.main import main
    from rubricrl.core.atomic import write_jsonl
    from rubricrl.data.generate import generate_dataset

    params = ["--params", str(project / "params.yaml")]
    first = register(project, "sft")
    main(["registry", "promote", *params])
    set_evals(project, grpo=[4] * N_TASKS)
    second = register(project, "grpo")
    main(["registry", "promote", "--dry-run", *params])
    assert "would be promoted (dry run)" in capsys.readouterr().out and aliases(project)["champion"] == first
    main(["registry", "promote", *params])
    main(["registry", "list", *params])
    out = capsys.readouterr().out
    assert f"\n{second:<8}challenger,champion" in out and f"\n{first:<8}-" in out
    main(["registry", "show", "rubricrl-extractor@champion", *params])
    assert "stage: grpo" in capsys.readouterr().out
    main(["registry", "rollback", *params])
    assert f"champion {second} -> {first}" in capsys.readouterr().out
    write_jsonl(project / "test_tasks.jsonl", (t.to_dict() for t in generate_dataset(seed=0, n_train=1, n_test=2)["test"]))
    main(["eval", "--model", "models:/rubricrl-extractor@champion", "--tasks", str(project / "test_tasks.jsonl"),
          "--max-new-tokens", "8", *params])
    assert (project / "outputs/eval/rubricrl-extractor_champion/metrics.json").exists()
    assert (project / ".cache/registry/rubricrl-extractor" / first / "config.json").exists()


def test_a_failed_export_verification_blocks_promotion_and_names_the_artifact(project):
    (project / "metrics/export.json").write_text(json.dumps({"grpo": {"artifacts": {
        "q8_0": {"artifact": "outputs/export/grpo/model-q8_0.gguf", "verified": True, "size_mb": 138.0,
                 "retention": {"field_accuracy": 1.0}, "tokens_per_s": 60.0},
        "q4_k_m": {"artifact": "outputs/export/grpo/model-q4_k_m.gguf", "verified": False,
                   "error": "outputs/export/grpo/model-q4_k_m.gguf: verification failed: unreadable GGUF"}}}}))
    v = register(project, "grpo")
    params = load_params(project / "params.yaml")
    assert registry.resolve(params, f"rubricrl-extractor/{v}").tags["export.q8_0.retention"] == "1.0"
    d = registry.promote(params)
    exports = next(g for g in d["gates"] if g["name"] == "exports")
    assert not d["promoted"] and not exports["passed"] and exports["detail"] == "failed verification: q4_k_m"


def test_registering_inside_the_pipeline_run_nests_under_it(project):
    import mlflow

    from rubricrl import tracking

    params = load_params(project / "params.yaml")
    with mlflow.start_run(experiment_id=tracking.setup(params.tracking), run_name="pipeline") as parent:
        v = register(project, "grpo")
    mv = registry.resolve(params, f"rubricrl-extractor/{v}")
    run = registry.client(params.tracking).get_run(mv.tags["registering_run"])
    assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id


def set_student(root: Path, right: list[int], general_passed: bool | None, gate: str = "pass") -> None:
    """The distill stage's outputs: the student, its rows on the test slice, metrics/distill.json."""
    build_tiny_model(root / "outputs/distill/student", seed=3)
    rows = _rows(right)
    (root / "outputs/distill/responses.jsonl").write_text("".join(json.dumps(x) + "\n" for x in rows))
    acc = sum(right) / (4 * len(right))
    nums = {"n": len(right), "reward_mean": float(sum(right)) / len(right), "field_accuracy": acc}
    metrics = {"models": {"student after": {"all": nums, "in_domain": nums}},
               "gate": {"outcome": gate, "line": f"divergence 0.9 -> 0.4 (fell); field accuracy vs teacher {gate}: ..."}}
    if general_passed is not None:
        metrics["general"] = {"models": {"student": {"qa": {"score": 0.5}}},
                              "gates": {"student": {"passed": general_passed,
                                                    "failures": [] if general_passed else ["qa: -0.400 [...]"]}}}
    (root / "metrics/distill.json").write_text(json.dumps(metrics))


def test_the_student_is_a_candidate_with_the_distill_stages_numbers_and_gates(project):
    # Non-inferiority needs power: identical answers within 0.05 take 84 tasks, within 0.25 17 (decide)
    text = (project / "params.yaml").read_text()
    (project / "params.yaml").write_text(text.replace("student_margin: 0.05 ", "student_margin: 0.25 "))
    params = load_params(project / "params.yaml")
    assert params.registry.student_margin == 0.25
    set_evals(project, base=[0] * 40, grpo=[3] * 40)
    champ = register(project, "grpo")  # 0.75
    registry.promote(params)
    set_student(project, [3] * 40, general_passed=None)  # as good on its 40 tasks, but never scored on general suites
    student = register(project, "student")
    mv = registry.resolve(params, f"rubricrl-extractor/{student}")
    assert mv.tags["stage"] == "student" and mv.tags["eval.all.field_accuracy"] == "0.7500"
    d = registry.promote(params)
    assert [g["name"] for g in d["gates"] if not g["passed"]] == ["general"] and aliases(project)["champion"] == champ
    general = next(g for g in d["gates"] if g["name"] == "general")
    assert "not scored on the general suites (distill.general is false)" in general["detail"]
    task = next(g for g in d["gates"] if g["name"] == "task")
    assert "n=40" in task["detail"] and "power" in task["detail"]  # paired on the tasks both answered
    set_student(project, [4] * 40, general_passed=True)
    student = register(project, "student")
    assert registry.resolve(params, f"rubricrl-extractor/{student}").tags["general.qa"] == "0.5000"
    assert registry.promote(params)["promoted"] and aliases(project)["champion"] == student


def test_verified_exports_become_versions_and_failed_ones_do_not(project, capsys):
    import mlflow

    gguf = project / "outputs/export/grpo/model-q8_0.gguf"
    gguf.parent.mkdir(parents=True)
    gguf.write_bytes(b"GGUF" + bytes(range(256)) * 4)

    def verified(hashed=True):  # the export stage's record: the hash of the bytes it verified
        (project / "metrics/export.json").write_text(json.dumps({"grpo": {"hf_tokens_per_s": 10.0, "artifacts": {
            "q8_0": {"artifact": "outputs/export/grpo/model-q8_0.gguf", "verified": True, "size_mb": 0.001,
                     "field_accuracy": 0.5, "reward": 9.0, "retention": {"field_accuracy": 1.04, "reward": 1.02},
                     "tokens_per_s": 18.0, "md5": hashlib.md5(gguf.read_bytes()).hexdigest() if hashed else None},
            "q4_k_m": {"artifact": "outputs/export/grpo/model-q4_k_m.gguf", "verified": False,
                       "error": "outputs/export/grpo/model-q4_k_m.gguf: verification failed: unreadable GGUF"}}}}))

    verified()
    params = load_params(project / "params.yaml")
    v = register(project, "grpo")
    out = registry.register_exports(params, candidate(project, "grpo"), v, root=project)
    assert out == [("rubricrl-extractor-gguf", "1", "grpo-q8_0")]
    assert registry.register_exports(params, candidate(project, "grpo"), v, root=project) == out  # same bytes: same version
    mv = registry.resolve(params, "rubricrl-extractor-gguf@grpo-q8_0")
    assert {k: mv.tags[k] for k in ("format", "quantization", "source_model", "retention.field_accuracy",
                                    "vs_hf_tokens_per_s")} == {
        "format": "gguf", "quantization": "q8_0", "source_model": f"rubricrl-extractor/{v}",
        "retention.field_accuracy": "1.04", "vs_hf_tokens_per_s": "1.8"}
    local = Path(mlflow.artifacts.download_artifacts("models:/rubricrl-extractor-gguf@grpo-q8_0",
                                                     dst_path=str(project / "dl")))
    assert (local / gguf.name).read_bytes() == gguf.read_bytes()
    data = gguf.read_bytes()
    gguf.write_bytes(data[: len(data) // 2])  # cut short after its verification: refused, nothing registered
    with pytest.raises(registry.RegistryError, match=r"model-q8_0\.gguf: changed since it was verified"):
        registry.register_exports(params, candidate(project, "grpo"), v, root=project)
    gguf.write_bytes(data[:100] + bytes(200) + data[300:])  # zeroed in place, same size
    with pytest.raises(registry.RegistryError, match="changed since it was verified"):
        registry.register_exports(params, candidate(project, "grpo"), v, root=project)
    assert len(registry.versions(params, "rubricrl-extractor-gguf")) == 1
    verified(hashed=False)  # a record without a hash (an older export stage): refused too
    gguf.write_bytes(data)
    with pytest.raises(registry.RegistryError, match="recorded no hash"):
        registry.register_exports(params, candidate(project, "grpo"), v, root=project)
    gguf.write_bytes(b"GGUF changed")  # a new export, verified: a new version under the same alias
    verified()
    assert registry.register_exports(params, candidate(project, "grpo"), v, root=project) == [("rubricrl-extractor-gguf", "2", "grpo-q8_0")]
    from rubricrl.cli.main import main

    main(["registry", "list", "--params", str(project / "params.yaml")])
    listed = capsys.readouterr().out
    assert "\nrubricrl-extractor-gguf:" in listed and f"\n2       grpo-q8_0" in listed


def test_the_flow_registers_each_candidate_and_promotes_them_in_training_order(project, monkeypatch, capsys):
    import rubricrl.flow.registry as fr
    from rubricrl.calibrate import gate as report

    monkeypatch.setattr(report, "gate_failures", lambda *a: [])
    (project / "outputs/rubric/report.json").write_text("{}")
    set_student(project, [0] * N_TASKS, general_passed=True)  # the student answers nothing right: passes its own gate
    decisions = fr.register_and_promote.fn(str(project))
    assert [(d["stage"], d["promoted"]) for d in decisions] == [("sft", True), ("grpo", True), ("student", False)]
    assert aliases(project) == {"champion": "2", "challenger": "3"}
    out = capsys.readouterr().err
    assert "version 2 (grpo) promoted to champion" in out and "version 3 (student) not promoted" in out
    assert "fail task: field_accuracy challenger 0.000 vs champion 0.750" in out
    assert (project / registry.REPORT).read_text().count("# Promotion") == 3
    # A student that fails its own gate (distill) is never registered: no new version, the decision says why.
    set_student(project, [4] * 8, general_passed=True, gate="fail")
    decisions = fr.register_and_promote.fn(str(project))
    assert decisions[-1]["registered"] is False and aliases(project) == {"champion": "2", "challenger": "2"}
    assert "student not registered: its gate is fail" in capsys.readouterr().err
    assert "the student was not registered" in (project / registry.REPORT).read_text()


def test_a_grpo_model_with_the_sft_weights_is_not_registered_again(project, monkeypatch, capsys):
    """GRPO stopped by its hack monitor on its initial weights (grpo.monitor.after_trip: stop) is the SFT model: one
    version, whose stage tag stays sft, and a decision that says why GRPO has none."""
    import shutil

    import rubricrl.flow.registry as fr
    from rubricrl.calibrate import gate as report

    monkeypatch.setattr(report, "gate_failures", lambda *a: [])
    (project / "outputs/rubric/report.json").write_text("{}")
    shutil.rmtree(project / "outputs/grpo/model")
    shutil.copytree(project / "outputs/models/sft", project / "outputs/grpo/model")
    gguf = project / "outputs/export/grpo/model-q8_0.gguf"  # GRPO's export: an export of the SFT weights
    gguf.parent.mkdir(parents=True)
    gguf.write_bytes(b"GGUF" + bytes(range(256)) * 4)
    (project / "metrics/export.json").write_text(json.dumps({"grpo": {"hf_tokens_per_s": 10.0, "artifacts": {
        "q8_0": {"artifact": "outputs/export/grpo/model-q8_0.gguf", "verified": True, "size_mb": 0.001,
                 "field_accuracy": 0.5, "reward": 9.0, "retention": {"field_accuracy": 1.0, "reward": 1.0},
                 "tokens_per_s": 18.0, "md5": hashlib.md5(gguf.read_bytes()).hexdigest()}}}}))
    params = load_params(project / "params.yaml")
    params.registry.candidates = ["sft", "grpo"]
    monkeypatch.setattr("rubricrl.config.load_params", lambda *a, **k: params)
    decisions = fr.register_and_promote.fn(str(project))
    assert [(d["stage"], d.get("registered", True)) for d in decisions] == [("sft", True), ("grpo", False)]
    assert "the same weights as sft" in decisions[1]["gates"][0]["detail"]
    [only] = registry.versions(params)
    assert only["tags"]["stage"] == "sft"
    [export] = registry.versions(params, "rubricrl-extractor-gguf")
    assert export["tags"]["source_model"] == f"rubricrl-extractor/{only['version']}" and export["aliases"] == ["grpo-q8_0"]
    err = capsys.readouterr().err
    assert "registry: grpo not registered: the same weights as sft" in err and "of version 1" in err


class Killed(BaseException):
    """A kill -9 between two writes: nothing after it runs (not even `except Exception`)."""


WRITES = ("set_model_version_tag", "set_registered_model_alias", "set_registered_model_tag",
          "delete_registered_model_tag", "create_registered_model", "create_model_version", "set_logged_model_tags",
          "delete_model_version")


@pytest.fixture
def killer(monkeypatch):
    """kill(k): the k-th registry write (an MLflow client write, or the report) raises Killed instead of happening.
    `count` is the number of writes seen since the last kill(...) call."""
    from mlflow import MlflowClient

    state = {"at": None, "count": 0}

    def wrap(fn):
        def write(*args, **kwargs):
            state["count"] += 1
            if state["count"] == state["at"]:
                raise Killed(f"killed before write {state['count']}")
            return fn(*args, **kwargs)
        return write

    for name in WRITES:
        monkeypatch.setattr(MlflowClient, name, wrap(getattr(MlflowClient, name)))
    monkeypatch.setattr(registry, "write_text", wrap(registry.write_text))

    class Kill:
        def __call__(self, at):
            state["at"], state["count"] = at, 0

        @property
        def count(self):
            return state["count"]

    return Kill()


def _store_copy(project: Path, params, label: str):
    """The registry as it stands, copied to its own store (a fresh MLflow URI: no cached engine sees the copy)."""
    import shutil

    dst = project / f"store-{label}"
    shutil.copytree(project / "mlruns", dst)
    tracking = params.tracking.model_copy(update={"uri": f"sqlite:///{dst}/mlflow.db"})
    return params.model_copy(update={"tracking": tracking})


def _registry_state(params, report: Path) -> dict:
    c = registry.client(params.tracking)
    model = c.get_registered_model("rubricrl-extractor")
    versions = {str(v.version): {k: v for k, v in v.tags.items() if k.startswith("promotion.")}
                for v in c.search_model_versions("name = 'rubricrl-extractor'")}
    return {"aliases": {a: str(v) for a, v in model.aliases.items()},
            "tags": {k: v for k, v in model.tags.items() if k.startswith("rubricrl.")},
            "versions": versions, "report": report.read_text() if report.exists() else None}


@pytest.mark.slow
def test_a_promotion_or_rollback_killed_between_any_two_writes_is_completed_by_the_next_command(project, killer,
                                                                                                 capsys):
    from rubricrl.cli.main import main

    params = load_params(project / "params.yaml")
    register(project, "sft")
    registry.promote(params, report=project / "first.md")  # sft (version 1) champion
    register(project, "grpo")  # version 2, better: the promotion moves champion
    # The uninterrupted runs, each on its own copy: promote, then what the next command does after it.
    ref = _store_copy(project, params, "ref")
    killer(None)
    registry.promote(ref, report=project / "ref.md")
    writes = killer.count
    assert writes == 10  # intent, 4 gate tags, decision, alias, history, report, done
    once = _registry_state(ref, project / "ref.md")  # killed before its intent: the rerun is the first promotion
    registry.promote(ref, report=project / "ref.md")
    expected = _registry_state(ref, project / "ref.md")
    assert expected["aliases"]["champion"] == "2" and expected["tags"]["rubricrl.champion_history"] == '["1", "2"]'
    assert "rubricrl.pending" not in expected["tags"]
    kills = 0
    for k in range(1, writes + 1):
        p = _store_copy(project, params, f"promote-{k}")
        killer(k)
        with pytest.raises(Killed):
            registry.promote(p, report=project / f"promote-{k}.md")
        kills += 1
        killer(None)
        if k > 1:  # the intent was recorded: `registry list` shows it unfinished and repairs nothing
            before = _registry_state(p, project / f"promote-{k}.md")
            (project / f"p{k}.yaml").write_text((project / "params.yaml").read_text().replace(
                params.tracking.uri, p.tracking.uri))
            main(["registry", "list", "--params", str(project / f"p{k}.yaml")])
            assert "UNFINISHED: a promotion of version 2 was interrupted" in capsys.readouterr().out
            assert _registry_state(p, project / f"promote-{k}.md") == before
        registry.promote(p, report=project / f"promote-{k}.md")
        assert _registry_state(p, project / f"promote-{k}.md") == (expected if k > 1 else once), k
        if k > 1:
            assert "completed the unfinished promotion of version 2" in capsys.readouterr().err
    # Rollback: champion 2 -> 1, killed before each of its writes, completed by the next command (a dry-run promote).
    registry.rollback(ref)
    rolled = _registry_state(ref, project / "ref.md")
    assert rolled["aliases"]["champion"] == "1" and rolled["tags"]["rubricrl.champion_history"] == '["1"]'
    assert rolled["versions"]["1"]["promotion.decision"] == "champion (restored by rollback from version 2)"
    assert rolled["versions"]["2"]["promotion.decision"] == "rolled back to version 1"
    for k in range(1, 7):  # intent, 2 decision tags, alias, history, done
        p = _store_copy(project, params, f"rollback-{k}")
        registry.promote(p, report=project / f"rb-{k}.md")
        registry.promote(p, report=project / f"rb-{k}.md")  # as `ref` before its rollback
        killer(k)
        with pytest.raises(Killed):
            registry.rollback(p)
        kills += 1
        killer(None)
        if k == 1:  # killed before its intent: nothing happened; the operator's rerun does it
            registry.rollback(p)
        else:
            registry.promote(p, dry_run=True, report=None)
        got = _registry_state(p, project / f"rb-{k}.md")
        assert {x: got[x] for x in ("aliases", "tags", "versions")} == \
            {x: rolled[x] for x in ("aliases", "tags", "versions")}, k
    print(f"registry kills: {kills}, every one completed")
