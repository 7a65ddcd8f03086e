"""The run report (rubricrl/runreport.py, the `report` stage): sections, plots embedded in one HTML file,
rollback markers, and "Not produced yet" notes for inputs an earlier stage has not written."""

from __future__ import annotations

import base64
import csv
import dataclasses
import json
import re
import shutil
from contextlib import contextmanager
from pathlib import Path

import pytest

from rubricrl.runreport import NOT_PRODUCED, ReportInputs, build_report, plot_kl
from tasks import report as stage

ROOT = Path(__file__).resolve().parent.parent
SECTIONS = ["## At a glance", "## GRPO training: reward per criterion", "## KL and rollbacks",
            "## Reward-hacking monitor", "## Rubric calibration", "## Models compared", "## Paired differences",
            "## Export retention"]
CRITERIA = {"format": "rule", "faithfulness": "judge", "missed_values": "penalty"}
ROLLBACKS = [
    {"step": 3, "kind": "kl", "kl": 0.9, "reward": 4.0, "reason": "KL 0.9 above the bound 0.5", "old_beta": 0.02,
     "new_beta": 0.04, "restored_step": 1, "checkpoint": "checkpoints/checkpoint-1", "examples": []},
    {"step": 6, "kind": "reward_hacking", "kl": 0.02, "reward": 9.0, "reason": "reward hacking suspected",
     "old_beta": 0.04, "new_beta": 0.08, "restored_step": 4, "checkpoint": "checkpoints/checkpoint-4", "examples": []},
]


def write_csv(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


def write_json(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))


def step_row(step: int, criterion_columns: bool) -> dict:
    row = {"step": step, "reward": 3.0 + step * 0.5, "reward_std": 1.0, "kl": 0.001 * step, "beta": 0.02 if step < 4 else 0.04,
           "entropy": 0.4, "mean_length": 80.0, "clipped_ratio": "", "learning_rate": 3e-6}  # "" = NaN (write_csv)
    if criterion_columns:
        row.update({f"rewards/{c}/mean": 1.0 + 0.1 * step for c in CRITERIA})
    return row


def make_run(root: Path, criterion_columns: bool = True, rollbacks_file: bool = True) -> Path:
    """Fake outputs of every earlier stage at the paths the report stage reads, in their real formats."""
    steps = range(1, 9)
    write_csv(root / "outputs/grpo/history.csv", [step_row(s, criterion_columns) for s in steps])
    write_csv(root / "outputs/grpo/monitor.csv",
              [{"step": s, "reward": 6.0 + s / 10, "field_accuracy": 0.4 - s / 100, "exact_object_rate": 0.1,
                "null_for_present_rate": 0.05, "invented_rate": ""} for s in (0, 4, 8)])
    if rollbacks_file:
        write_json(root / "outputs/grpo/rollbacks.json", {"rollbacks": ROLLBACKS})
    if not criterion_columns:  # what train_grpo writes today beside history.csv
        log = [{"step": s, "reward": 3.0, **{f"rewards/{c}/mean": 2.0 for c in CRITERIA}} for s in steps]
        write_json(root / "outputs/grpo/train_result.json", {"log_history": log + [{"train_runtime": 1.0}],
                                                             "rollbacks": ROLLBACKS})
    write_json(root / "outputs/rubric/report.json", {
        "rubric": "generated", "n_items": 100, "n_tasks": 10, "min_margin": 0.4, "gate_failures": [], "dropped": [],
        "components": {c: {"kind": k, "auc": 0.9, "keep": True} for c, k in CRITERIA.items()},
        "probes": {"missing_field": {"mean_margin": 1.8, "worst_margin": 1.0, "pass": True},
                   "distractor_value": {"mean_margin": 0.9, "worst_margin": 0.3, "pass": False}},
        "reward": {"spearman_accuracy": 0.63, "kendall_tau": 0.53, "pairwise_accuracy": 1.0, "n_pairs": 90},
        "on_policy": {"spearman_accuracy": 0.92, "pairwise_accuracy": 0.98, "n_pairs": 52, "n_samples": 48}})
    summary = []
    for model, reward in (("base", -3.3), ("sft", 7.0), ("grpo", 7.1)):
        for part in ("all", "in_domain", "held_out_domain"):
            summary.append({"label": f"{model}/{part}", "model": model, "part": part, "n": 25, "reward_mean": reward,
                            "reward_ci_low": reward - 0.5, "reward_ci_high": reward + 0.5, "json_valid_rate": 0.9,
                            "field_accuracy": 0.25, "field_accuracy_ci_low": 0.2, "field_accuracy_ci_high": 0.3})
    write_csv(root / "outputs/eval/summary.csv", summary)
    paired = [{"model": m, "vs": v, "part": p, "metric": k, "diff": 0.1, "ci": [-0.05, 0.25], "p": 0.2, "n": 25}
              for m, v in (("sft", "base"), ("grpo", "sft")) for p in ("all", "in_domain")
              for k in ("reward", "field_accuracy", "invented_rate")]
    write_json(root / "metrics/eval.json", {"models": {}, "paired": paired})
    write_json(root / "metrics/data.json", {"train": {"n": 800, "domains": {"news": 100}}, "test": {"n": 200}})
    write_json(root / "metrics/sft.json", {"train_tasks": 80, "wall_seconds": 600.0})
    write_json(root / "metrics/rubric.json", {"gate_passed": 1, "spearman_accuracy": 0.63})
    write_json(root / "metrics/grpo.json", {"steps": 8, "rollbacks": 2, "hack_rollbacks": 1, "final_beta": 0.08,
                                            "reward_first": 3.5, "reward_last": 7.0})
    return root


def rooted(root: Path) -> ReportInputs:
    """The stage's own inputs, under root."""
    inp = stage.INPUTS
    return dataclasses.replace(
        inp, **{f.name: root / getattr(inp, f.name) for f in dataclasses.fields(inp)
                if isinstance(getattr(inp, f.name), str)},
        metrics={k: root / v for k, v in inp.metrics.items()})


def section(md: str, heading: str) -> str:
    start = md.index(heading + "\n")
    nxt = md.find("\n## ", start + len(heading))
    return md[start: nxt if nxt >= 0 else len(md)]


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    root = make_run(tmp_path_factory.mktemp("run"))
    return build_report(rooted(root), root / "out", {"commit": "abc123"})


def test_the_report_has_every_section_and_its_plots(full):
    md = full.markdown
    for heading in SECTIONS:
        assert heading + "\n" in md, heading
    assert set(full.figures) == {"reward_criteria", "kl", "hack_monitor", "calibration", "models", "paired"}
    for fig in full.figures.values():
        assert fig.path.is_file() and fig.path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"]({fig.path.name})" in md  # Markdown links the PNG beside it
    assert (full.files[0].parent / "report.md").read_text() == md
    # Every input was there: the only "not produced" note is the export slot's.
    assert md.count(NOT_PRODUCED) == 1 and NOT_PRODUCED in section(md, "## Export retention")
    glance = section(md, "## At a glance")
    assert "GRPO: 8 steps" in glance and "rubric gate: passed" in glance and "sft - base" in glance
    calib = section(md, "## Rubric calibration")
    assert "| corruption set | 0.63 |" in calib and "| policy samples | 0.92 |" in calib
    assert "| grpo - sft | all | +0.100 [-0.050, +0.250], p=0.200 |" in section(md, "## Paired differences")
    assert "| sft | in_domain | 25 | 7.00 [6.50, 7.50] | 0.250 [0.200, 0.300] | 0.9 |" in section(md, "## Models compared")


def test_the_html_is_one_file_with_every_png_embedded(full):
    page = (full.files[0].parent / "report.html").read_text()
    assert page == full.html
    for fig in full.figures.values():
        assert f"data:image/png;base64,{base64.b64encode(fig.path.read_bytes()).decode()}" in page, fig.name
    assert not re.search(r'src="(?!data:)', page)  # nothing loaded from beside the file, or from the web
    for heading in SECTIONS:
        assert f"<h2>{heading[3:]}</h2>" in page
    assert "<table>" in page and "<td>grpo - sft</td>" in page


def test_rollbacks_are_marked_on_the_kl_plot_and_listed(full, tmp_path):
    kl = full.figures["kl"]
    assert kl.data["rollback_steps"] == [3, 6]
    assert [(m["step"], m["kind"], m["kl"]) for m in kl.data["markers"]] == [(3, "kl", 0.9), (6, "reward_hacking", 0.02)]
    assert full.figures["hack_monitor"].data["hack_steps"] == [6]  # only reward-hacking rollbacks there
    assert full.figures["reward_criteria"].data["rollback_steps"] == [3, 6]
    table = section(full.markdown, "## KL and rollbacks")
    assert "| 3 | kl | 0.9 | 4 | 0.02 -> 0.04 | 1 |" in table and "| 6 | reward_hacking |" in table
    # The plotting function on its own: no rollbacks, no markers.
    assert plot_kl([{"step": 1, "kl": 0.1}, {"step": 2, "kl": 0.2}], [], tmp_path).data["rollback_steps"] == []


def test_criteria_come_from_history_columns_or_train_result(full, tmp_path):
    assert full.figures["reward_criteria"].data["criteria"] == sorted(CRITERIA)
    assert full.figures["reward_criteria"].data["penalties"] == ["missed_values"]  # kinds from the calibration report
    assert "| faithfulness | judge | 1.1 | 1.8 |" in full.markdown
    # Today's grpo stage: no per-criterion columns, no rollbacks.json; train_result.json beside history.csv has both.
    root = make_run(tmp_path / "run", criterion_columns=False, rollbacks_file=False)
    rep = build_report(ReportInputs(history=root / stage.INPUTS.history), root / "out")  # the GRPO sections only
    assert rep.figures["reward_criteria"].data["criteria"] == sorted(CRITERIA)
    assert rep.figures["kl"].data["rollback_steps"] == [3, 6]
    assert "train_result.json" in rep.markdown


def test_missing_inputs_give_not_produced_notes(tmp_path):
    rep = build_report(rooted(tmp_path), tmp_path / "out")  # no earlier stage has written anything
    md = rep.markdown
    for heading in SECTIONS:
        assert heading + "\n" in md
    for heading in SECTIONS[1:]:
        assert NOT_PRODUCED in section(md, heading), heading
    for name in ("outputs/grpo/history.csv", "outputs/grpo/monitor.csv", "outputs/rubric/report.json",
                 "outputs/eval/summary.csv", "metrics/eval.json", "metrics/grpo.json"):
        assert name in md
    assert rep.figures == {} and not list((tmp_path / "out").glob("*.png"))
    assert (tmp_path / "out" / "report.html").read_text().count('class="note"') >= len(SECTIONS) - 1
    assert NOT_PRODUCED in build_report(ReportInputs(), tmp_path / "none").markdown  # nothing configured at all


def test_some_inputs_missing_and_one_unreadable(tmp_path):
    root = make_run(tmp_path)
    (root / "outputs/grpo/monitor.csv").unlink()
    (root / "outputs/grpo/rollbacks.json").unlink()  # no record of the 2 rollbacks metrics/grpo.json counts
    (root / "outputs/rubric/report.json").write_text("{not json")
    rep = build_report(dataclasses.replace(rooted(root), eval_summary=None, eval_metrics=None), root / "out")
    md = rep.markdown
    assert NOT_PRODUCED in section(md, "## Reward-hacking monitor") and "hack_monitor" not in rep.figures
    assert "rollbacks counted in the grpo metrics: 2" in section(md, "## KL and rollbacks")
    assert "could not be built" in section(md, "## Rubric calibration") and "JSONDecodeError" in md
    # A rollbacks file named explicitly (the declared grpo output, once there is one) is read first.
    write_json(root / "elsewhere/rollbacks.json", {"rollbacks": ROLLBACKS[:1]})
    inputs = ReportInputs(history=root / stage.INPUTS.history, rollbacks=root / "elsewhere/rollbacks.json")
    kl = build_report(inputs, root / "out2").figures["kl"]
    assert kl.data["rollback_steps"] == [3]
    assert NOT_PRODUCED in section(md, "## Models compared") and "no file configured" in md
    assert set(rep.figures) == {"reward_criteria", "kl"}


def test_the_export_slot_shows_the_export_metrics_once_they_exist(tmp_path):
    inputs = ReportInputs(export=tmp_path / "metrics/export.json")  # the file the export stage will write
    assert f"`{tmp_path / 'metrics/export.json'}`" in section(build_report(inputs, tmp_path / "a").markdown,
                                                              "## Export retention")
    write_json(tmp_path / "metrics/export.json", {"grpo": {
        "source": {"field_accuracy": 0.48, "reward": 9.5}, "source_size_mb": 513.2, "hf_tokens_per_s": 11.0,
        "artifacts": {"q8_0": {"size_mb": 138.1, "field_accuracy": 0.5, "retention": {"field_accuracy": 1.04},
                               "reward": 9.75, "tokens_per_s": 19.8, "verified": True, "meets_goal": True},
                      "gptq": {"artifact": "outputs/export/grpo/gptq", "verified": False,
                               "error": "outputs/export/grpo/gptq: verification failed: bad file"}}}})
    slot = section(build_report(inputs, tmp_path / "b").markdown, "## Export retention")
    assert NOT_PRODUCED not in slot
    assert "| grpo | q8_0 | 138.1 | 0.5 | 1.04 | 9.75 | 19.8 | 1.80x | verified |" in slot
    assert "| grpo | gptq |" in slot and "verification failed: outputs/export/grpo/gptq" in slot
    write_json(tmp_path / "metrics/export.json", {"gguf_q4": {"field_accuracy_retention": 0.97}})  # another shape
    slot = section(build_report(inputs, tmp_path / "c").markdown, "## Export retention")
    assert "| gguf_q4.field_accuracy_retention | 0.97 |" in slot


def test_the_stage_writes_outputs_report_and_logs_every_file(tmp_path, monkeypatch, capsys):
    make_run(tmp_path)
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    monkeypatch.chdir(tmp_path)
    logged = []

    class Recorder:
        def log_artifact(self, path, folder=None):
            assert Path(path).is_file()
            logged.append((Path(path).name, folder))

    @contextmanager
    def fake_stage_run(cfg, name, params, inputs=()):
        assert (name, params) == ("report", {})
        yield Recorder()

    monkeypatch.setattr(stage.tracking, "stage_run", fake_stage_run)
    stage.main()
    out = tmp_path / "outputs/report"
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(["report.md", "report.html", "reward_criteria.png", "kl.png", "hack_monitor.png",
                            "calibration.png", "models.png", "paired.png"])
    assert sorted(logged) == sorted((n, "report") for n in names)
    assert "outputs/report/report.html" in capsys.readouterr().out
