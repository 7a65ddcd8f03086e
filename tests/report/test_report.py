"""The run report (rubricrl/report, the `report` stage) assembles the sections the stages wrote: every stage and
the registry's decisions, figures embedded in one HTML file, "Not produced yet" notes for what a stage has not
written, and numbers that agree with the stage metrics files (each section is written from its stage's result)."""

from __future__ import annotations

import base64
import json
import re
from contextlib import contextmanager
from pathlib import Path

import pytest

from rubricrl.config import Params
from rubricrl.report import stage as report_stage
from rubricrl.report.assemble import NOT_PRODUCED, assemble
from rubricrl.stages import paths

ROOT = Path(__file__).resolve().parents[2]
TITLES = ["Data", "Base model", "SFT baseline", "Rubric calibration", "GRPO training", "Task evaluation",
          "General capability", "Distillation", "Exports", "Registry decisions"]
ROLLBACKS = [
    {"step": 3, "kind": "kl", "kl": 0.9, "reward": 4.0, "reason": "KL 0.9 above the bound 0.5", "old_beta": 0.02,
     "new_beta": 0.04, "restored_step": 1, "checkpoint": "checkpoints/checkpoint-1", "examples": []},
    {"step": 6, "kind": "reward_hacking", "kl": 0.02, "reward": 9.0, "reason": "reward hacking suspected",
     "old_beta": 0.04, "new_beta": 0.08, "restored_step": 4, "checkpoint": "checkpoints/checkpoint-4",
     "examples": [{"task_id": "t1", "accuracy_before": 0.8, "accuracy_now": 0.2, "reward_before": 9.0,
                   "reward_now": 11.0, "response_before": "{}", "response_now": '{"a": null}'}]},
]


def grpo_log() -> list[dict]:
    log = [{"step": 0, "monitor/reward": 6.0, "monitor/field_accuracy": 0.4}]
    for s in range(1, 9):
        log.append({"step": s, "reward": 3.0 + 0.5 * s, "reward_std": 1.0, "kl": 0.001 * s, "learning_rate": 3e-6,
                    "rewards/format/mean": 2.0 + 0.1 * s, "rewards/faithfulness/mean": 1.0 + 0.1 * s,
                    "rewards/missed_values/mean": 0.5})
        if s % 4 == 0:
            log[-1].update({"monitor/reward": 6.0 + s / 10, "monitor/field_accuracy": 0.4 - s / 100})
    return log


def make_run(root: Path) -> dict:
    """Every stage's result and section as its stage writes them (the stages' own writers, on small inputs)."""
    from rubricrl.calibrate.draft import derive_rubric
    from rubricrl.calibrate.workflow import run_calibration, write_outputs
    from rubricrl.core.atomic import write_json, write_text
    from rubricrl.data.generate import generate_dataset
    from rubricrl.data.prepare import split_stats
    from rubricrl.evaluate.task import evaluate_responses
    from rubricrl.general.run import markdown as general_markdown
    from rubricrl.release.registry import promotion_markdown
    from rubricrl.reward.load import load_rubric
    from rubricrl.reward.scoring import RubricScorer
    from rubricrl.stages import data, distill, eval_task, export, grpo, prepare_model, sft
    from rubricrl.stages.eval_general import GeneralResult
    from rubricrl.stages.rubric import RubricResult

    params = Params(rubric={"policy_samples": 0, "n_calibration": 6})
    made = generate_dataset(seed=0, n_train=12, n_test=8)
    splits = {"train": made["train"][:6], "val": made["train"][6:], "test": made["test"]}
    results = {"data": data.DataResult(**split_stats(splits))}
    results["prepare_model"] = prepare_model.PrepareResult(model="smollm2-135m-instruct", architecture="LlamaForCausalLM",
                                                           layers=30, hidden_size=576, vocab_size=49152,
                                                           tied_embeddings=True, weights_mb=513.2)
    results["sft"] = sft.SFTResult(train_tasks=80, wall_seconds=312.4, examples=80, steps=10, first_loss=1.2345,
                                   last_loss=0.4321)
    for name in ("data", "sft"):
        results[name].write(root / paths.STAGES[name].files("metrics")[0])
    write_text(root / paths.DATA.section, data.section(results["data"], params))
    write_text(root / paths.PREPARE_MODEL.section, prepare_model.section(results["prepare_model"]))
    write_text(root / paths.SFT.section, sft.section(results["sft"], params))

    draft = derive_rubric(splits["train"])
    cal = run_calibration(draft, splits["val"], params)
    results["rubric"] = RubricResult(**write_outputs(root / "outputs/rubric", draft, cal, params, []))
    results["rubric"].write(root / paths.RUBRIC.result)

    rubric = load_rubric(params.scoring.rubric)
    log = grpo_log()
    train = {"global_step": 8, "resumed_from_step": None, "beta": 0.08, "rollbacks": ROLLBACKS, "world_size": 1,
             "train_seconds": 600.0, "log_history": log}
    with _chdir(root):
        grpo.write_section(train, rubric)
    results["grpo"] = {"reward_first": round(sum(3.0 + 0.5 * s for s in range(1, 5)) / 4, 4),
                       "reward_last": round(sum(3.0 + 0.5 * s for s in range(5, 9)) / 4, 4)}

    scorer = RubricScorer(rubric)
    tasks = splits["test"]
    gold = [json.dumps(t.reference, ensure_ascii=False) for t in tasks]
    answers = {"base": ["no JSON"] * len(tasks), "sft": gold[:4] + ["{}"] * (len(tasks) - 4), "grpo": gold}
    evaluated = {m: evaluate_responses(tasks, a, scorer, n_boot=200) for m, a in answers.items()}
    summary = {m: {p: eval_task.headline(g) for p, g in {"all": e["all"], **e["parts"]}.items()}
               for m, e in evaluated.items()}
    from rubricrl.evaluate.plots import plot_models, plot_paired
    from rubricrl.evaluate.section import comparison_markdown
    from rubricrl.metrics.compare import paired_comparisons

    paired = paired_comparisons({m: e["samples"] for m, e in evaluated.items()}, n_resamples=200)
    plot_models(eval_task.summary_rows(summary), root / paths.EVAL_TASK.out)
    plot_paired(paired, root / paths.EVAL_TASK.out)
    write_text(root / paths.EVAL_TASK.section, comparison_markdown(summary, paired, rubric.max_total, figures=True))
    results["eval_task"] = eval_task.EvalResult(models=summary, paired=paired)
    results["eval_task"].write(root / paths.EVAL_TASK.result)

    suites = {"ifeval": 0.3, "humaneval": 0.0, "qa": 0.4, "perplexity": 16.25}
    general = {m: {s: {"score": v + d, "summary": {"n": 10}} for s, v in suites.items()}
               for m, d in (("base", 0.0), ("sft", 0.1), ("grpo", 0.2))}
    gpaired = [{"model": m, "suite": s, "diff": 0.1, "ci": [-0.1, 0.3], "p": 0.3, "n": 10} for m in ("sft", "grpo")
               for s in suites]
    gates = {"sft": {"passed": True, "failures": []}, "grpo": {"passed": True, "failures": []}}
    tol = {s: 0.1 for s in suites}
    write_text(root / paths.EVAL_GENERAL.section, general_markdown(general, gpaired, gates, tol))
    results["eval_general"] = GeneralResult(models={m: {s: {"score": r["score"], **r["summary"]} for s, r in g.items()}
                                                    for m, g in general.items()}, paired=gpaired, gates=gates,
                                            gated=["grpo"], tolerance=tol)
    results["eval_general"].write(root / paths.EVAL_GENERAL.result)

    nums = {"all": {"n": 8, "reward_mean": 9.533, "field_accuracy": 0.481, "null_for_present_rate": 0.22,
                    "invented_rate": 0.308}}
    info = {"student": "14-layer SmolLM2", "student_params": 77.9e6, "teacher_params": 134.5e6, "ratio": 0.58,
            "layers": [0, 2, 29], "teacher_layers": 30, "n_prompts": 4, "pool": 8, "hardness_kept": 15.5,
            "hardness_pool": 14.4}
    dtrain = {"steps": 4, "first_loss": 0.688, "last_loss": 0.681, "train_seconds": 59.0}
    by_model = {"student before": nums, "student after": nums, "teacher": nums}
    write_text(root / paths.DISTILL.section, distill.markdown(info, dtrain, by_model, {"field_accuracy": 1.0}))
    results["distill"] = distill.DistillResult(student=info, train=dtrain, models=by_model,
                                               retention={"field_accuracy": 1.0})
    results["distill"].write(root / paths.DISTILL.result)

    exported = {"grpo": {"source": {"field_accuracy": 0.48, "reward": 9.5}, "source_size_mb": 513.2,
                         "hf_tokens_per_s": 11.0,
                         "artifacts": {"q8_0": {"size_mb": 138.1, "field_accuracy": 0.5, "retention": {"field_accuracy": 1.04},
                                                "reward": 9.75, "tokens_per_s": 19.8, "verified": True, "meets_goal": True},
                                       "gptq": {"artifact": "outputs/export/grpo/gptq", "verified": False,
                                                "error": "outputs/export/grpo/gptq: verification failed: bad file"}}}}
    write_text(root / paths.EXPORT.section, export.markdown(exported, params.export))
    write_json(root / paths.EXPORT.result, exported)
    results["export"] = exported

    decisions = [{"model": "rubricrl-extractor", "challenger": "2", "champion_before": "1", "champion_after": "2",
                  "passed": True, "promoted": True, "dry_run": False,
                  "gates": [{"name": "task", "passed": True, "detail": "field_accuracy +0.008 [-0.016, +0.037]"}]}]
    write_text(root / report_stage.REGISTRY, "\n".join(promotion_markdown(d) for d in decisions))
    return results


@contextmanager
def _chdir(path: Path):
    import os

    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("run")
    results = make_run(root)
    report = assemble(report_stage.sections(root), root / "out", meta={"commit": "abc123"})
    return root, results, report


def section(md: str, title: str) -> str:
    start = md.index(f"## {title}\n")
    nxt = md.find("\n## ", start + 3)
    return md[start: nxt if nxt >= 0 else len(md)]


def test_the_report_has_every_stage_and_the_registry_decisions(run):
    root, _, rep = run
    md = rep.markdown
    for title in TITLES:
        assert f"## {title}\n" in md, title
    assert NOT_PRODUCED not in md and rep.missing == []
    assert (root / "out/report.md").read_text() == md
    # Each stage's own headings sit one level below its section heading.
    assert "### Reward-hacking probes" in section(md, "Rubric calibration")
    assert "### Paired differences" in section(md, "Task evaluation")
    assert "version 2" in section(md, "Registry decisions") and "promoted to champion" in md


def test_every_figure_is_copied_and_embedded_in_one_html_file(run):
    root, _, rep = run
    names = sorted(f.name for f in rep.figures)
    assert names == sorted(["rubric-separation.png", "rubric-reward_vs_accuracy.png", "grpo-reward.png", "grpo-kl.png",
                            "grpo-monitor.png", "eval_task-models.png", "eval_task-paired.png"])
    page = (root / "out/report.html").read_text()
    for fig in rep.figures:
        assert fig.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"]({fig.name})" in rep.markdown
        assert f"data:image/png;base64,{base64.b64encode(fig.read_bytes()).decode()}" in page, fig.name
    assert not re.search(r'src="(?!data:)', page)  # nothing loaded from beside the file, or from the web
    assert "<table>" in page and "<td>grpo - sft</td>" in page
    for title in TITLES:
        assert f">{title}</h2>" in page


def test_the_numbers_agree_with_the_stage_metrics_files(run):
    """Every section is written from its stage's result, which is its metrics file: read the files back and find
    their numbers in the report."""
    root, results, rep = run
    md = rep.markdown
    data = json.loads((root / paths.DATA.stats).read_text())
    assert all(f"| {split} | {data[split]['n']} |" in section(md, "Data") for split in ("train", "val", "test"))
    sft = json.loads((root / paths.SFT.result).read_text())
    assert f"| {sft['examples']} | {sft['steps']} | {sft['first_loss']:.4f} | {sft['last_loss']:.4f} |" in md
    rubric = json.loads((root / paths.RUBRIC.result).read_text())
    cal = section(md, "Rubric calibration")
    assert f"| Spearman vs strict field accuracy | {rubric['spearman_accuracy']:.4f} |" in cal
    assert f"{rubric['pairwise_accuracy']} (" in cal
    g = results["grpo"]
    assert f"{g['reward_first']:.3f} -> {g['reward_last']:.3f}" in section(md, "GRPO training")
    ev = json.loads((root / paths.EVAL_TASK.result).read_text())
    task = section(md, "Task evaluation")
    for model, parts in ev["models"].items():
        for part, h in parts.items():
            acc = h["strict"]["field_accuracy"]
            assert f"| {model} | {part} | {h['n']} | {h['reward_mean']:.2f}" in task and f"{acc:.3f}" in task
    gen = json.loads((root / paths.EVAL_GENERAL.result).read_text())
    general = section(md, "General capability")
    for suite in ("ifeval", "qa", "perplexity"):
        row = f"| {suite} | 10 | " + " | ".join(f"{gen['models'][m][suite]['score']:.3f}" for m in ("base", "sft", "grpo"))
        assert row in general, row
    dist = json.loads((root / paths.DISTILL.result).read_text())
    after = dist["models"]["student after"]["all"]
    assert f"| student after | all | 8 | {after['reward_mean']:.3f} | {after['field_accuracy']:.3f} |" in md
    exp = json.loads((root / paths.EXPORT.result).read_text())["grpo"]["artifacts"]["q8_0"]
    assert f"| grpo | q8_0 | {exp['size_mb']} | {exp['field_accuracy']:.3f} | {exp['retention']['field_accuracy']}" \
        in section(md, "Exports")


def test_rollbacks_are_marked_and_listed_in_the_grpo_section(run, tmp_path):
    from rubricrl.train.plots import plot_kl, plot_reward
    from rubricrl.train.section import criterion_series, history_rows

    root, _, rep = run
    grpo = section(rep.markdown, "GRPO training")
    assert "| 3 | KL 0.9 above the bound 0.5 | 0.9 | 4 | 0.02 -> 0.04 | 1 |" in grpo
    assert "Reward hacking suspected at step 6" in grpo
    history = history_rows(grpo_log())
    kl = plot_kl(history, ROLLBACKS, tmp_path)
    assert kl.data["rollback_steps"] == [3, 6]
    assert [(m["step"], m["kind"], m["kl"]) for m in kl.data["markers"]] == [(3, "kl", 0.9), (6, "reward_hacking", 0.02)]
    reward = plot_reward(history, criterion_series(grpo_log()), {"missed_values": "penalty"}, ROLLBACKS, tmp_path)
    assert reward.data["criteria"] == ["faithfulness", "format", "missed_values"]
    assert reward.data["penalties"] == ["missed_values"] and reward.data["rollback_steps"] == [3, 6]
    assert plot_kl([{"step": 1, "kl": 0.1}, {"step": 2, "kl": 0.2}], [], tmp_path).data["rollback_steps"] == []


def test_a_section_not_written_yet_is_a_note(tmp_path):
    rep = assemble(report_stage.sections(tmp_path), tmp_path / "out")
    for title in TITLES:
        assert NOT_PRODUCED in section(rep.markdown, title), title
    assert rep.missing == list(paths.STAGES) + ["registry"] and rep.figures == []
    assert "`" + str(tmp_path / paths.GRPO.section) + "`" in rep.markdown
    (tmp_path / "outputs/sections").mkdir(parents=True)
    (tmp_path / paths.SFT.section).write_text("# SFT\n\nTrained.\n\n![loss](loss.png)\n")  # a figure not there
    rep = assemble(report_stage.sections(tmp_path), tmp_path / "out2")
    assert "Trained." in section(rep.markdown, "SFT baseline") and "figure `loss.png` not produced" in rep.markdown


def test_the_stage_writes_outputs_report_and_logs_every_file(run, tmp_path, monkeypatch, capsys):
    import shutil

    root, _, _ = run
    shutil.copytree(root, tmp_path / "proj")
    monkeypatch.chdir(tmp_path / "proj")
    logged = []

    class Recorder:
        def log_artifact(self, path, folder=None):
            assert Path(path).is_file()
            logged.append((Path(path).name, folder))

    @contextmanager
    def fake_stage_run(cfg, name, params, inputs=()):
        assert (name, params) == ("report", {})
        yield Recorder()

    monkeypatch.setattr(report_stage.tracking, "stage_run", fake_stage_run)
    report_stage.run(Params())
    out = tmp_path / "proj/outputs/report"
    names = sorted(p.name for p in out.iterdir())
    assert "report.md" in names and "report.html" in names and "grpo-kl.png" in names and len(names) == 9
    assert sorted(logged) == sorted((n, "report") for n in names)
    assert "outputs/report/report.html" in capsys.readouterr().out


def test_dvc_yaml_gives_the_report_stage_every_section_and_figure():
    import yaml

    spec = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["report"]
    data_deps = [d for d in spec["deps"] if not d.endswith(".py")]
    assert data_deps == report_stage.deps()
    for stage, decl in paths.STAGES.items():
        covered = [d for d in data_deps if decl.section == d or decl.section.startswith(d + "/")]
        assert covered, f"the report stage does not depend on {stage}'s section {decl.section}"
