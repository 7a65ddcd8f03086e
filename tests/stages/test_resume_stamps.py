"""Each stage's resume stamp (its resume_stamp) by content (issue 37 part 4): a task changed under the same id, a
changed tokenizer or chat template, precision auto as this host resolves it, the accelerate config's content, and
the eval and judge settings of export's restored retention figures. Unit level: tiny files, nothing trained."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rubricrl.config import JudgeConfig, load_params
from rubricrl.core.resume import ResumeDir, digest
from rubricrl.core.taskfile import load_tasks
from rubricrl.stages import distill, eval_general, eval_task, export, grpo, sft
from rubricrl.stages.paths import RUBRIC

ROOT = Path(__file__).resolve().parents[2]
PARAMS = load_params(ROOT / "params.yaml")
TASK = {"id": "t1", "instruction": "Extract the product.", "text": "The AirBeat Pro costs $2,999.",
        "schema": {"type": "object", "properties": {"product": {"type": "string"}}, "required": ["product"]},
        "reference": {"product": "AirBeat Pro"}}
ROWS = [TASK, {**TASK, "id": "t2", "text": "The BoomBox costs $10.", "reference": {"product": "BoomBox"}}]

# stage -> its stamp from (params, tasks, model folder), as its run() builds it
STAMPS = {
    "sft": lambda p, tasks, model: sft.resume_stamp(p.sft, tasks, model),
    "grpo": lambda p, tasks, model: grpo.resume_stamp(p.grpo, p.scoring, tasks, tasks[:1], model, "rubric text"),
    "eval_task": lambda p, tasks, model: eval_task.resume_stamp(p.eval, p.scoring, tasks, {"base": model}),
    "distill": lambda p, tasks, model: distill.resume_stamp(p.distill, p.data.seed, p.general, p.eval.max_new_tokens,
                                                            tasks, tasks[1:], model),
    "export": lambda p, tasks, model: export.resume_stamp(p.export, p.eval, p.scoring, tasks,
                                                          {"grpo": (model, "responses.jsonl")}),
}


def set_(params, section: str, **values):
    """params with some settings of one section changed (the section's validators do not run: settings only)."""
    return params.model_copy(update={section: getattr(params, section).model_copy(update=values)})


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A working folder with a task file and a model folder of the files a stamp reads."""
    monkeypatch.chdir(tmp_path)
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"weights")
    (model / "tokenizer.json").write_text('{"model": {"vocab": {"a": 0}}}')
    (model / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ messages }}"}))
    (tmp_path / "responses.jsonl").write_text('{"id": "t1", "response": "{}"}\n')
    return tmp_path, model


def tasks_of(folder: Path, rows: list[dict], name: str = "tasks.jsonl"):
    path = folder / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return load_tasks(path)


def resumed(stage: str, parts: tuple, root: Path) -> bool:
    return ResumeDir(stage, *parts, root=root).resumed


@pytest.mark.parametrize("stage", STAMPS)
def test_a_task_changed_under_the_same_id_starts_the_stage_over(stage, project):
    folder, model = project
    build = STAMPS[stage]
    assert not resumed(stage, build(PARAMS, tasks_of(folder, ROWS), model), folder / "resume")
    assert resumed(stage, build(PARAMS, tasks_of(folder, ROWS, "again.jsonl"), model), folder / "resume")
    changed = tasks_of(folder, [ROWS[0], {**ROWS[1], "text": "The BoomBox costs $12."}], "changed.jsonl")
    assert not resumed(stage, build(PARAMS, changed, model), folder / "resume")


@pytest.mark.parametrize("change", ["tokenizer.json", "chat_template field", "chat_template.jinja"])
@pytest.mark.parametrize("stage", [*STAMPS, "eval_general"])
def test_a_changed_tokenizer_or_chat_template_of_a_model_starts_the_stage_over(stage, change, project):
    folder, model = project
    tasks = tasks_of(folder, ROWS)

    def build():
        if stage == "eval_general":
            return eval_general.resume_stamp(PARAMS.general, {"base": model})
        return STAMPS[stage](PARAMS, tasks, model)

    assert not resumed(stage, build(), folder / "resume")
    assert resumed(stage, build(), folder / "resume")
    if change == "tokenizer.json":
        (model / "tokenizer.json").write_text('{"model": {"vocab": {"b": 0}}}')
    elif change == "chat_template field":
        (model / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ messages[-1] }}"}))
    else:
        (model / "chat_template.jinja").write_text("{{ messages }}")
    assert not resumed(stage, build(), folder / "resume")


@pytest.mark.parametrize("stage", ["sft", "grpo", "distill"])
def test_precision_auto_is_stamped_as_this_host_resolves_it(stage, project, monkeypatch):
    import rubricrl.inference.hf as hf

    folder, model = project
    tasks = tasks_of(folder, ROWS)
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)  # a CPU host, whatever this machine has

    def stamp(precision: str) -> str:
        return digest(*STAMPS[stage](set_(PARAMS, stage, device="cpu", precision=precision), tasks, model))

    host = {}
    for has_bf16 in (True, False):  # a CPU with native bf16 (AVX-512 BF16, AMX), and one without
        monkeypatch.setattr(hf, "cpu_bf16", lambda: has_bf16)
        host[has_bf16] = stamp("auto")
        assert host[has_bf16] == stamp("bf16" if has_bf16 else "fp32")
    assert host[True] != host[False]  # the same settings, two hosts: bf16 and fp32 runs never share a stamp


@pytest.mark.parametrize("stage", ["sft", "grpo"])
def test_the_accelerate_config_is_stamped_by_content_not_path(stage, project):
    folder, model = project
    tasks = tasks_of(folder, ROWS)
    config = folder / "accelerate.yaml"
    config.write_text("distributed_type: MULTI_GPU\nnum_processes: 2\n")
    params = set_(PARAMS, stage, accelerate_config=str(config))
    assert not resumed(stage, STAMPS[stage](params, tasks, model), folder / "resume")
    assert resumed(stage, STAMPS[stage](params, tasks, model), folder / "resume")
    config.write_text("distributed_type: MULTI_GPU\nnum_processes: 4\n")  # the same path, other processes
    assert not resumed(stage, STAMPS[stage](params, tasks, model), folder / "resume")


@pytest.mark.parametrize("change", ["eval settings", "judge", "rubric file", "source answers"])
@pytest.mark.parametrize("stage", ["eval_task", "export"])
def test_export_and_eval_task_are_stamped_with_the_eval_settings_and_the_judge(stage, change, project):
    """export puts back kept artifacts with their retention figures: a source recomputed under other eval settings,
    another judge or rubric, or other source answers must not meet figures of the old ones."""
    folder, model = project
    if change == "source answers" and stage == "eval_task":
        pytest.skip("eval_task makes the answers")
    tasks = tasks_of(folder, ROWS)
    rubric = folder / RUBRIC.rubric
    rubric.parent.mkdir(parents=True, exist_ok=True)
    rubric.write_text("criteria: []\n")
    assert not resumed(stage, STAMPS[stage](PARAMS, tasks, model), folder / "resume")
    assert resumed(stage, STAMPS[stage](PARAMS, tasks, model), folder / "resume")
    params = PARAMS
    if change == "eval settings":
        params = set_(PARAMS, "eval", max_new_tokens=PARAMS.eval.max_new_tokens + 1)
    elif change == "judge":
        params = set_(PARAMS, "scoring", judge="openai", openai_judge=JudgeConfig(
            type="openai", base_url="http://127.0.0.1:1/v1", model="judge"))
    elif change == "rubric file":
        rubric.write_text("criteria: [{id: json_valid}]\n")
    else:
        (folder / "responses.jsonl").write_text('{"id": "t1", "response": "{\\"product\\": null}"}\n')
    assert not resumed(stage, STAMPS[stage](params, tasks, model), folder / "resume")
