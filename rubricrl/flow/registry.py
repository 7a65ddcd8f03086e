"""The registry step of the flow: every trained candidate becomes a version of the registered model and is
promoted through the gates (rubricrl.release.registry); the decisions are written for the run report.

The candidates' evidence comes from the stages' typed results (their metrics files, read by their Result
models) at the paths the stages declare (rubricrl.stages.paths): the registry itself knows no stage's files.
A flow step, not a DVC stage: the registry is shared state outside the workspace (aliases move, roll back, and
other runs promote), so it must be consulted on every run, never skipped as "up to date".
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from prefect import task

from rubricrl.release.registry import STUDENT, Candidate
from rubricrl.stages import paths
from rubricrl.stages.distill import DistillResult
from rubricrl.stages.eval_general import GeneralResult
from rubricrl.stages.eval_task import EvalResult
from rubricrl.stages.export import ExportResult

TRAINED = {"sft": (paths.SFT.model, "sft"), "grpo": (paths.GRPO.model, "grpo"), STUDENT: (paths.DISTILL.student, "distill")}
LINEAGE = (paths.DATA.train, paths.DATA.val, paths.DATA.test, paths.RUBRIC.rubric)  # hashed as DVC does


def candidate(root: Path, name: str) -> Candidate:
    """A candidate's evidence from the stages' results: its numbers per part, its general suites, gate (vs base)
    and per-item rows (a later challenger's general gate pairs them), its exports (none before the export stage
    ran)."""
    root = Path(root)
    model_dir, trained_by = TRAINED[name]
    exports = ExportResult.read(root / paths.EXPORT.result).root.get(name) or {} \
        if (root / paths.EXPORT.result).exists() else {}
    common = dict(name=name, trained_by=trained_by, model_dir=root / model_dir, test_file=root / paths.DATA.test,
                  lineage={rel: root / rel for rel in LINEAGE}, exports=exports.get("artifacts", {}),
                  hf_tokens_per_s=exports.get("hf_tokens_per_s"), base_rows=root / paths.EVAL_TASK.responses("base"))
    if name == STUDENT:  # the distill stage's numbers: the student after distillation on its test slice
        d = DistillResult.read(root / paths.DISTILL.result)
        numbers = {part: {"reward_mean": h["reward_mean"], "field_accuracy": h["field_accuracy"]}
                   for part, h in d.models["student after"].items()}
        general = None if d.general is None else {
            "scores": {s: r.get("score") for s, r in d.general["models"]["student"].items()},
            "gate": d.general["gates"].get("student"), "stamp": d.general.get("stamp"),
            "rows": {s: root / paths.DISTILL.general_rows / f"{s}.jsonl" for s in d.general["models"]["student"]}}
        return Candidate(rows=root / paths.DISTILL.responses, numbers=numbers, general=general,
                         general_note="not scored on the general suites (distill.general is false)", **common)
    e = EvalResult.read(root / paths.EVAL_TASK.result)
    numbers = {part: {"reward_mean": h.get("reward_mean"), "field_accuracy": (h.get("strict") or {}).get("field_accuracy")}
               for part, h in (e.models.get(name) or {}).items()}
    general = None
    if (root / paths.EVAL_GENERAL.result).exists():
        g = GeneralResult.read(root / paths.EVAL_GENERAL.result)
        general = {"scores": {s: r.get("score") for s, r in (g.models.get(name) or {}).items()},
                   "gate": g.gates.get(name), "stamp": g.stamp,
                   "rows": {s: root / paths.EVAL_GENERAL.rows(name) / f"{s}.jsonl" for s in g.models.get(name) or {}}}
    return Candidate(rows=root / paths.EVAL_TASK.responses(name), numbers=numbers, general=general, **common)


def student_gate(root: Path) -> dict:
    """The distill stage's own gate on its student (a student from before that gate existed counts as failed)."""
    d = DistillResult.read(root / paths.DISTILL.result)
    return d.gate or {"outcome": "fail", "line": "metrics/distill.json has no student gate: re-run the distill stage"}


@task(name="registry")
def register_and_promote(project: str) -> list[dict]:
    """Each trained candidate (registry.candidates, in training order) is registered as a version (its verified
    exports as versions of `<name>-gguf` / `<name>-gptq`), becomes `challenger` and is promoted through the gates.

    One promotion per candidate: SFT is a fallback champion when GRPO fails a gate, and the student competes
    with the champion on the same gates. GRPO's general gate is against the champion's answers (SFT's, promoted
    just before, or an earlier run's), against base only where there is no champion."""
    from rubricrl import tracking
    from rubricrl.calibrate.gate import gate_failures
    from rubricrl.config import load_params
    from rubricrl.core.atomic import write_json, write_text
    from rubricrl.release import registry

    root = Path(project)
    params = load_params(root / "params.yaml")
    rubric_gate = gate_failures(json.loads((root / paths.RUBRIC.report).read_text(encoding="utf-8")), params.rubric)
    decisions = []
    weights: dict[str, tuple[str, str]] = {}  # weights md5 -> (candidate, version) registered with them in this run
    for name in params.registry.candidates:
        if name == STUDENT and (gate := student_gate(root))["outcome"] != "pass":
            print(f"registry: student not registered: its gate is {gate['outcome']}: {gate['line']}",
                  file=sys.stderr, flush=True)
            champ = decisions[-1]["champion_after"] if decisions else None
            decisions.append({"stage": name, "model": params.registry.name, "challenger": None, "registered": False,
                              "passed": False, "promoted": False, "champion_before": champ, "champion_after": champ,
                              "gates": [{"name": "student", "passed": False, "outcome": gate["outcome"],
                                         "detail": gate["line"]}]})
            continue
        cand = candidate(root, name)
        md5 = tracking.weights_digest(cand.model_dir)
        if md5 in weights:  # e.g. GRPO stopped by its hack monitor on its initial (SFT) weights: no new candidate
            first, version = weights[md5]
            print(f"registry: {name} not registered: the same weights as {first} (md5 {md5}), already version "
                  f"{version}", file=sys.stderr, flush=True)
            # its exports are exports of those weights: registered against that version
            for model, v, alias in registry.register_exports(params, cand, version, root=root):
                print(f"registry: {model} version {v} <- {name} export (@{alias}), of version {version}",
                      file=sys.stderr, flush=True)
            champ = decisions[-1]["champion_after"] if decisions else None
            decisions.append({"stage": name, "model": params.registry.name, "challenger": None, "registered": False,
                              "passed": False, "promoted": False, "champion_before": champ, "champion_after": champ,
                              "gates": [{"name": "weights", "passed": False, "outcome": "inconclusive",
                                         "detail": f"the same weights as {first}: nothing new to promote"}]})
            continue
        version = registry.register(params, cand, rubric_gate, params_file=root / "params.yaml")
        weights[md5] = (name, version)
        print(f"registry: {params.registry.name} version {version} <- {name}", file=sys.stderr, flush=True)
        for model, v, alias in registry.register_exports(params, cand, version, root=root):
            print(f"registry: {model} version {v} <- {name} export (@{alias})", file=sys.stderr, flush=True)
        if params.registry.promote:
            decisions.append({"stage": name, **registry.promote(params, report=None)})
    if decisions:
        write_text(root / registry.REPORT, "\n".join(registry.promotion_markdown(d) for d in decisions))
        write_json(root / registry.DECISIONS, {"decisions": decisions})
    print(final_tables(root, decisions), file=sys.stderr, flush=True)
    return decisions


def trained_with(root: Path) -> str:
    """How each training stage ran: its precision as trained (auto resolved) and its processes."""
    from rubricrl.stages.grpo import GRPOResult
    from rubricrl.stages.sft import SFTResult

    parts = []
    for name, model, path in (("sft", SFTResult, paths.SFT.result), ("grpo", GRPOResult, paths.GRPO.result)):
        if (root / path).exists():
            r = model.read(root / path)
            parts.append(f"{name} {r.precision} x {r.processes} process(es)"
                         + (f", {len(r.skipped_updates)} non-finite update(s) skipped" if r.skipped_updates else ""))
    if (root / paths.DISTILL.result).exists():
        train = DistillResult.read(root / paths.DISTILL.result).train
        parts.append(f"distill {train.get('precision', 'fp32')}")
    return "trained with: " + ("; ".join(parts) if parts else "nothing trained yet")


def final_tables(root: Path, decisions: list[dict]) -> str:
    """The general suites per model and the registry decisions, for the end of a run."""
    from rubricrl.general.run import SUITES

    lines = [trained_with(root)]
    if (root / paths.EVAL_GENERAL.result).exists():
        models = dict(GeneralResult.read(root / paths.EVAL_GENERAL.result).models)
        if (root / paths.DISTILL.result).exists():
            models.update((DistillResult.read(root / paths.DISTILL.result).general or {}).get("models", {}))
        lines += ["general suites      " + "".join(f"{m:>10}" for m in models)]
        cell = lambda row: f"{row['score']:>10.3f}" if row and row.get("score") is not None else f"{'-':>10}"  # noqa: E731
        lines += [f"{s:<20}" + "".join(cell(models[m].get(s)) for m in models) for s in SUITES]
    for d in decisions:
        verdict = ("not registered" if d.get("registered") is False else "promoted to champion" if d["promoted"]
                   else "already champion" if d["passed"] else "not promoted")
        lines += ["", f"registry {d['model']}: version {d['challenger'] or '-'} ({d.get('stage', 'challenger')}) {verdict}; "
                      f"champion: {d['champion_after'] or 'none'} (was {d['champion_before'] or 'none'})"]
        lines += [f"  {g.get('outcome') or ('pass' if g['passed'] else 'fail')} {g['name']}: {g['detail']}" for g in d["gates"]]
    return "\n".join(lines)
