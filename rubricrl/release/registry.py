"""The MLflow model registry: every trained candidate is a version of one registered model; the alias
`champion` moves only through gates (MLflow aliases, not the deprecated stages).

- `register`: a candidate (an HF folder and the stage that made it) becomes a version, logged with MLflow's
  transformers flavour and tagged with its lineage (stage, git commit, DVC md5 of its data and rubric, params
  hash, the MLflow run that trained it) and its eval numbers (strict field accuracy and reward per test part,
  the general suites, the rubric and general gates). Its per-task eval rows and its per-item general rows are
  artifacts of the registering run, so a later promotion can pair them. The newest candidate gets the alias
  `challenger`. The same weights registered again (a rerun where nothing changed) update the existing version
  instead of adding a copy (found by its `model.md5` tag).
- `promote`: `challenger` against `champion` on the same test tasks, paired by task id. `champion` moves only
  when every gate passes (rubric gate, general gate, the task gate, and exports verified once there are any).
  The general gate is non-inferiority per suite against the champion's answers to the same items (paired by item,
  margins general.tolerance), so a challenger cannot lose the margin plus the champion's gain over base; against
  the base model (the gate eval_general or distill recorded, tag `gate.general`) only where there is no champion
  or the champion's rows cannot be paired (registered without them, other items or settings): each gate names
  its reference (`against`), and the base comparison is reported beside the champion's.
  Gates decide on intervals (rubricrl.metrics.decide): the task gate asks a policy for superiority (the 95%
  interval of challenger - champion above registry.task_margin) and the student for non-inferiority (above
  -registry.student_margin); an inconclusive gate (the interval straddles its margin) promotes nothing. A part
  (in-domain, held-out domain) shown to drop below -registry.part_margin fails the gate. The first candidate
  is held to the same superiority against the base model (its eval rows, logged with the candidate). Decision and each gate's numbers are written as version tags and as a
  Markdown report.
- `rollback`: `champion` back to the previous champion (the registered model keeps the history as a tag).
- `register_exports`: each verified export of a candidate (GGUF Q8_0, the 4-bit type chosen by retention `q4`,
  Q4_K_M, GPTQ) becomes a version of `<name>-gguf` or `<name>-gptq` (the file or folder logged as a run artifact),
  tagged with its format, quantization (the type actually stored, with its tensor types and fallbacks),
  retention, size, tokens/s and the candidate version it came from, under the alias `<source>-<kind>` (e.g.
  `models:/rubricrl-extractor-gguf@grpo-q4`). A failed verification is not registered: it is a tag on the
  candidate, and the export gate names it. A 4-bit selection that no type survived registers nothing and blocks
  nothing (the candidate's tag `export.q4.selected` says why).

Every write to the registry is all or nothing. A registration (of a candidate, or of all of one candidate's
exports together), a promotion and a rollback each record one intent on the registered model first (the tag
PENDING: every version's tags, the aliases, for a promotion the champion history and the report), then make their
writes, each repeatable, then remove it; killed between any two writes, the operation is completed by the next
registry command (register, register_exports, promote, rollback: finish_pending) before it does anything else. A new
version is created with all its tags in one write (the model or file logged to the registering run first, then
MlflowClient.create_model_version), so no version exists without its hash. A version without its hash or gate tags
(left by a registration from before this journal) is never resolved (`resolve(NAME)`: the newest complete version)
nor aliased (move_alias) and is marked in `versions()` and `registry list`; one without its hash, made by a
registering run, is deleted by the next command (remove_orphans), one with it is completed when its weights are
registered again.

Candidates (Candidate, built by the flow's registry step from the stages' typed results): sft and grpo with the
eval_task stage's rows and numbers; the distilled student with the distill stage's (its test slice, and the
general suites when `distill.general` scored it).

Registrations, promote and rollback hold a file lock beside the tracking store while they read the aliases, decide
and move them, so two concurrent promotes serialise and the second decides against the first's champion. The
lock is local to the machine: with a remote tracking server, promote from one place (the pipeline flow).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator

from rubricrl import tracking
from rubricrl.core.atomic import write_text
from rubricrl.core.jsonio import read_jsonl
from rubricrl.core.tables import table
from rubricrl.core.errors import RubricRLError

CHALLENGER, CHAMPION = "challenger", "champion"
HISTORY = "rubricrl.champion_history"  # registered-model tag: the champion versions, oldest first (JSON)
# registered-model tag: a registration, promotion or rollback that recorded its intent and has not marked itself
# done (JSON)
PENDING = "rubricrl.pending"
MODEL_HASH, EXPORT_HASH = "model.md5", "artifact.md5"  # what finds a version again: the same weights, the same bytes
# A version without these is half made (a registration killed before its tags, by code before registrations were
# journaled): no reader resolves it and no alias moves to it.
COMPLETE = {"model": (MODEL_HASH, "gate.rubric", "gate.general"), "export": (EXPORT_HASH, "source_model", "verified")}
ROWS = "eval/responses.jsonl"  # the registering run's per-task eval rows (id, part, total, strict)
BASE_ROWS = "eval/base/responses.jsonl"  # ... and the base model's, the first candidate's task evidence
GENERAL_ROWS = "general"  # the registering run's per-item general rows, <suite>.jsonl (the general gate pairs them)
GENERAL_STAMP = "general.rows_stamp"  # what they answer (general.run.rows_stamp): only equal stamps are paired
NO_ROWS = "none"  # GENERAL_STAMP of a version registered without general rows
REPORT = Path("outputs/registry/promotion.md")
DECISIONS = Path("outputs/registry/decisions.json")  # every promotion decision of the last run (the run report shows them)
TASK_METRIC = "field_accuracy"
# stated values not given (answered null, left out, or no parsed answer): a rise is a regression. Not
# null_for_present alone: against the base model, which parses few answers (so states few nulls), every candidate
# that answers would look like an abstainer (rubricrl.metrics.compare)
ABSTENTION = "unstated_rate"
STUDENT = "student"
EXPORT_FORMATS = {"q8_0": "gguf", "q4": "gguf", "q4_k_m": "gguf", "gptq": "gptq"}
CHAT_TASK = "llm/v1/chat"  # MLflow's OpenAI-style chat task for the transformers flavour


def serving_config(params) -> dict:
    """Generation settings of the served model: the eval's greedy decoding (rubricrl.inference.generate) and its
    token budget; a request's `max_tokens` overrides the budget."""
    return {"do_sample": False, "num_beams": 1, "max_new_tokens": params.eval.max_new_tokens}


@dataclass(frozen=True)
class Candidate:
    """What the registry needs of a trained model, read by the flow from the stages' typed results: the registry
    never parses a stage's files itself.

    numbers: per test part {"reward_mean", "field_accuracy"}; general: {"scores": {suite: score}, "gate":
    {"passed", "failures"} (vs base), "rows": {suite: its per-item rows file}, "stamp": what they answer}, or None
    when the candidate was not scored on the general suites (`general_note` says why); exports: the export stage's
    record of each artifact (kind -> {artifact, verified, size_mb, ...})."""

    name: str  # sft, grpo, student
    trained_by: str  # the stage whose MLflow run trained it (its source_run tag)
    model_dir: Path
    rows: Path  # its per-task eval rows (id, part, total, strict): a promotion pairs them
    numbers: dict[str, dict]
    test_file: Path  # the test split the rows answer (its md5 pairs two versions' rows)
    lineage: dict[str, Path]  # tag name (a project path) -> file, hashed as DVC does
    general: dict | None = None
    general_note: str = "not scored on the general suites"
    exports: dict[str, dict] = field(default_factory=dict)
    hf_tokens_per_s: float | None = None
    base_rows: Path | None = None  # the base model's eval rows on (a subset of) the same tasks


class RegistryError(RubricRLError):
    """A registry operation that cannot be done (no challenger, nothing to roll back to, ...)."""


@dataclass
class Gate:
    name: str
    passed: bool
    detail: str
    outcome: str = ""  # pass, fail, inconclusive (derived from passed when not given)
    against: str = ""  # the reference it compared with ("champion version 3", "base"); "" for a gate of its own

    def __post_init__(self):
        self.outcome = self.outcome or ("pass" if self.passed else "fail")


def client(cfg, create: bool = False):
    """An MlflowClient on the project's tracking store (cfg: TrackingParams). create=False (list, show, promote,
    rollback): a missing or unreadable store is an error naming it, never a new empty one; the pipeline's
    registration creates it."""
    from mlflow import MlflowClient

    tracking.setup(cfg, create=create)
    return MlflowClient()


@contextmanager
def registry_lock(cfg) -> Iterator[None]:
    from filelock import FileLock

    store = Path(cfg.uri.removeprefix("sqlite:///")).parent if cfg.uri.startswith("sqlite:///") else Path(".cache")
    store.mkdir(parents=True, exist_ok=True)
    with FileLock(str(store / "registry.lock"), timeout=600):
        yield


def params_sha256(path: str | Path = "params.yaml") -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def missing_tags(model: str, tags: dict) -> list[str]:
    """The tags a version of `model` (a candidate's, or an export's: `<name>-gguf`, `<name>-gptq`) lacks to be
    complete; empty: complete."""
    kind = "export" if model.rsplit("-", 1)[-1] in set(EXPORT_FORMATS.values()) else "model"
    return [t for t in COMPLETE[kind] if t not in tags]


def move_alias(c, model: str, alias: str, version: str) -> None:
    """Point an alias at a version, only a complete one."""
    missing = missing_tags(model, c.get_model_version(model, version).tags)
    if missing:
        raise RegistryError(f"'{model}' version {version} has no {', '.join(missing)} tag (a registration that was "
                            f"interrupted): not moving '{alias}' to it; re-run the registry step")
    c.set_registered_model_alias(model, alias, version)


def alias_version(c, name: str, alias: str):
    """The version an alias points at, or None (no such alias or registered model)."""
    from mlflow.exceptions import MlflowException

    try:
        return c.get_model_version_by_alias(name, alias)
    except MlflowException:
        return None


def _training_run(c, experiment: str, stage: str) -> str | None:
    """The newest finished MLflow run of the stage that made the candidate."""
    exp = c.get_experiment_by_name(experiment)
    if exp is None:
        return None
    runs = c.search_runs([exp.experiment_id], f"tags.`rubricrl.stage` = '{stage}' and attributes.status = 'FINISHED'",
                         order_by=["attributes.start_time DESC"], max_results=1)
    return runs[0].info.run_id if runs else None


def _text(tags: dict) -> dict[str, str]:
    return {k: "none" if v is None else (f"{v:.4f}" if isinstance(v, float) else str(v)) for k, v in tags.items()}


def eval_tags(candidate: Candidate) -> dict[str, str]:
    """The candidate's numbers per test part, its general suites and its general gate."""
    tags = {}
    for part, h in candidate.numbers.items():
        tags[f"eval.{part}.reward"] = h.get("reward_mean")
        tags[f"eval.{part}.{TASK_METRIC}"] = h.get(TASK_METRIC)
    g = candidate.general
    if g is not None:
        tags.update({f"general.{suite}": score for suite, score in (g.get("scores") or {}).items()})
        if g.get("gate") is not None:
            gate = g["gate"]
            lines = [f"{suite} {d['line']}" for suite, d in (gate.get("decisions") or {}).items()] or gate["failures"]
            tags["gate.general"] = gate.get("outcome", "pass" if gate["passed"] else "fail") + (
                ": " + "; ".join(lines) if lines else "")
    return _text(tags)


def export_tags(candidate: Candidate) -> dict[str, str]:
    """export.<kind>.{verified,retention,size_mb,tokens_per_s,artifact} of the candidate's exports."""
    tags = {}
    for kind, a in candidate.exports.items():
        if a.get("kept") is False:  # a 4-bit selection no type survived: no artifact, nothing failed
            tags[f"export.{kind}.selected"] = f"none: {a.get('error', '')}"[:500]
            continue
        tags[f"export.{kind}.verified"] = "true" if a.get("verified") else "false"
        if a.get("type"):
            tags[f"export.{kind}.type"] = a["type"]
        tags[f"export.{kind}.artifact"] = a.get("artifact", "")
        if a.get("verified"):
            tags[f"export.{kind}.retention"] = str((a.get("retention") or {}).get("field_accuracy"))
            tags[f"export.{kind}.size_mb"] = str(a.get("size_mb"))
            tags[f"export.{kind}.tokens_per_s"] = f"{a.get('tokens_per_s', 0):.1f}"
        else:
            tags[f"export.{kind}.error"] = str(a.get("error", ""))[:500]
    return tags


def register(params, candidate: Candidate, rubric_gate: list[str], params_file: str | Path = "params.yaml") -> str:
    """Register the candidate; move `challenger` to it. Returns its version. `rubric_gate`: the calibration gate's
    failures (empty: passed).

    All or nothing: the model is logged to the registering run first (no registry write), then one intent (the
    PENDING tag, op "register": the weights' md5, every tag, the alias) is recorded, the version is created with all
    its tags in one write (or, for weights already registered, the tags that changed are set), `challenger` moves,
    and the intent is removed. Killed anywhere in between, the next registry command completes it
    (finish_pending)."""
    import mlflow

    c = candidate
    if not c.rows.exists():
        stage = "distill" if c.name == STUDENT else "eval_task"
        raise RegistryError(f"{c.rows}: no task eval of '{c.name}' to register it with (run the {stage} stage)")
    cfg, name = params.tracking, params.registry.name
    client_ = client(cfg, create=True)
    md5 = tracking.weights_digest(c.model_dir)
    tags = {
        "stage": c.name, "git.commit": tracking.git_commit(), "params.sha256": params_sha256(params_file),
        "model.md5": md5, "source_run": _training_run(client_, cfg.experiment, c.trained_by) or "unknown",
        "gate.rubric": "passed" if not rubric_gate else "failed: " + "; ".join(rubric_gate),
        "gate.general": f"failed: {c.general_note}",
        "eval.test_md5": tracking.file_md5(c.test_file),
        **{f"dvc.md5.{rel}": tracking.file_md5(path) for rel, path in c.lineage.items() if path.exists()},
        **eval_tags(c), **export_tags(c),
    }
    with registry_lock(cfg):
        finish_pending(client_, name)
        _ensure_model(client_, name)
        found = _with_hash(client_, name, MODEL_HASH, md5)
        entry = {"model": name, "hash_tag": MODEL_HASH, "tags": tags, "alias": CHALLENGER}
        # Every registration logs the eval rows it tags (a promotion pairs them); only new weights log a model.
        with tracking.stage_run(cfg, f"register-{c.name}", {"registry": params.registry.model_dump()}) as run:
            run.log_artifact(c.rows, "eval")
            if c.base_rows is not None and c.base_rows.exists():
                run.log_artifact(c.base_rows, "eval/base")
                tags["eval.base_rows"] = BASE_ROWS
            general_rows = {s: f for s, f in ((c.general or {}).get("rows") or {}).items() if Path(f).exists()}
            tags[GENERAL_STAMP] = NO_ROWS  # set either way: a re-registration without rows must not keep a stamp
            if general_rows and (c.general or {}).get("stamp"):  # a later challenger's general gate pairs them
                for f in general_rows.values():
                    run.log_artifact(f, GENERAL_ROWS)
                tags[GENERAL_STAMP] = c.general["stamp"]
            tags["registering_run"] = mlflow.active_run().info.run_id
            if not found:
                from transformers import AutoModelForCausalLM, AutoTokenizer

                components = {"model": AutoModelForCausalLM.from_pretrained(str(c.model_dir)),
                              "tokenizer": AutoTokenizer.from_pretrained(str(c.model_dir))}
                # MLflow's chat task: `mlflow models serve` takes OpenAI-style messages, applies the model's chat
                # template and decodes greedily with the eval's budget (README, "Serving the champion"). Logged to
                # the run only: the version is created below, with its tags, as log_model's registered_model_name
                # would create it (from models:/<model id>), so serving and loading see the same model.
                info = mlflow.transformers.log_model(
                    transformers_model=components, name="model", task=CHAT_TASK,
                    model_config=serving_config(params), pip_requirements=_requirements(), model_card=None)
                entry.update(source=info.model_uri, run_id=info.run_id, model_id=info.model_id)
        [(_, version, _)] = _register_all(client_, name, {"op": "register", "stage": c.name, "entries": [entry]})
    return version


def register_exports(params, candidate: Candidate, source_version: str,
                     root: str | Path = ".") -> list[tuple[str, str, str]]:
    """Each verified export of the candidate as a version of `<name>-gguf` / `<name>-gptq`, aliased
    `<source>-<quantization>`. Returns [(registered model, version, alias)]. The same bytes registered again (a
    rerun where nothing changed) reuse their version. Artifact paths are relative to `root`.

    All the candidate's exports or none: their files are logged first (no registry write), then one intent covers
    every version and alias (as register), so a kill between two of them is completed by the next command."""
    import mlflow

    root, source, hf_speed = Path(root), candidate.name, candidate.hf_tokens_per_s
    cfg, name = params.tracking, params.registry.name
    # Only the bytes the export stage verified, all or nothing: every hash is checked before anything is published.
    checked = {}
    for kind, a in candidate.exports.items():
        if not a.get("verified"):
            continue  # tagged on the candidate (export.<kind>.verified=false): the export gate names it
        path = root / a["artifact"]
        if not path.exists():
            raise RegistryError(f"{path}: the verified {kind} export of '{source}' is missing (re-run the export stage)")
        md5 = tracking.artifact_md5(path)
        if not a.get("md5"):
            raise RegistryError(f"{path}: the export stage recorded no hash of the {kind} export it verified "
                                f"(metrics/export.json): re-run the export stage")
        if md5 != a["md5"]:
            raise RegistryError(f"{path}: changed since it was verified (md5 {md5}, verified {a['md5']}): not "
                                f"registering unverified bytes; re-run the export stage")
        checked[kind] = (a, path, md5)
    if not checked:
        return []
    c = client(cfg, create=True)
    entries = []
    with registry_lock(cfg):
        finish_pending(c, name)
        _ensure_model(c, name)  # the intent lives on the candidates' registered model
        for kind, (a, path, md5) in checked.items():
            model, alias = f"{name}-{EXPORT_FORMATS[kind]}", f"{source}-{kind}"
            retention = a.get("retention") or {}
            stored = ", ".join(f"{t} {n}" for t, n in (a.get("types") or {}).items())
            tags = {"format": EXPORT_FORMATS[kind], "quantization": a.get("type", kind), "source": source,
                    "tensor_types": stored or "unknown", "fallback_tensors": str(a.get("fallback", "unknown")),
                    "bits_per_weight": str(a.get("bits_per_weight", "unknown")),
                    "retention.valid_json": str(retention.get("valid_json")),
                    "source_model": f"{name}/{source_version}", EXPORT_HASH: md5, "artifact": a["artifact"],
                    "size_mb": str(a.get("size_mb")), "tokens_per_s": f"{a.get('tokens_per_s', 0):.1f}",
                    "field_accuracy": str(a.get(TASK_METRIC)), "reward": str(a.get("reward")),
                    "retention.field_accuracy": str(retention.get(TASK_METRIC)),
                    "retention.reward": str(retention.get("reward")), "verified": "true",
                    "vs_hf_tokens_per_s": str(round(a["tokens_per_s"] / hf_speed, 2))
                    if a.get("tokens_per_s") and hf_speed else "none"}
            entry = {"model": model, "hash_tag": EXPORT_HASH, "tags": tags, "alias": alias,
                     "description": f"{EXPORT_FORMATS[kind].upper()} exports of {name}"}
            if not (c.search_registered_models(f"name = '{model}'") and _with_hash(c, model, EXPORT_HASH, md5)):
                with tracking.stage_run(cfg, f"register-{source}-{kind}", {"export": {"source": source, "kind": kind}}):
                    run = mlflow.active_run()
                    if path.is_dir():
                        mlflow.log_artifacts(str(path), f"export/{kind}")
                    else:
                        mlflow.log_artifact(str(path), f"export/{kind}")
                    entry.update(source=f"{run.info.artifact_uri}/export/{kind}", run_id=run.info.run_id)
            entries.append(entry)
        return _register_all(c, name, {"op": "register", "stage": source, "exports": True, "entries": entries})


def _ensure_model(c, model: str, description: str | None = None) -> None:
    if not c.search_registered_models(f"name = '{model}'"):
        c.create_registered_model(model, description=description)


def _with_hash(c, model: str, hash_tag: str, value: str) -> list:
    """The versions of `model` tagged with this hash (the same weights or bytes), newest first."""
    found = c.search_model_versions(f"name = '{model}' and tags.`{hash_tag}` = '{value}'")
    return sorted(found, key=lambda v: -int(v.version))


def _register_all(c, name: str, intent: dict) -> list[tuple[str, str, str]]:
    """Record a registration's intent on `name`, make its writes (each repeatable), mark it done. Each entry: the
    version with its hash tag's value (created from `source` with every tag in one write when there is none; else
    the tags that differ set), then its alias. Returns [(registered model, version, alias)]."""
    from mlflow.exceptions import MlflowException

    c.set_registered_model_tag(name, PENDING, json.dumps(intent))
    out = []
    for e in intent["entries"]:
        model, tags = e["model"], e["tags"]
        _ensure_model(c, model, e.get("description"))
        found = _with_hash(c, model, e["hash_tag"], tags[e["hash_tag"]])
        if found:
            mv = found[0]
            for k, v in tags.items():
                if mv.tags.get(k) != v:
                    c.set_model_version_tag(model, str(mv.version), k, v)
        elif e.get("source"):
            try:
                # created with its tags in one write: a kill cannot leave a version without its hash
                mv = c.create_model_version(model, e["source"], run_id=e.get("run_id"), tags=tags,
                                            model_id=e.get("model_id"), await_creation_for=60)
            except MlflowException as err:  # its logged model or files were deleted since: nothing to complete
                print(f"registry: {model}: the version the registration of {intent['stage']} recorded cannot be "
                      f"made ({err.message[:300]}): not registered; re-run the registry step", file=sys.stderr)
                continue
        else:
            print(f"registry: {model}: no version with {e['hash_tag']} {tags[e['hash_tag']]} to complete the "
                  f"registration of {intent['stage']} on (deleted since): re-run the registry step", file=sys.stderr)
            continue
        version = str(mv.version)
        if e.get("model_id") and mv.source == e["source"]:  # the logged model names its version (MLflow's UI)
            c.set_logged_model_tags(e["model_id"], {"mlflow.modelVersions": json.dumps(
                [{"name": model, "version": version}])})
        move_alias(c, model, e["alias"], version)
        out.append((model, version, e["alias"]))
    c.delete_registered_model_tag(name, PENDING)
    return out


def _requirements() -> list[str]:
    """Pinned from this environment (MLflow would otherwise infer them by loading the model in a subprocess)."""
    from importlib.metadata import version

    return [f"{p}=={version(p)}" for p in ("torch", "transformers", "tokenizers", "safetensors", "accelerate")]


def _rows(c, mv, artifact: str = ROWS) -> tuple[list[dict], str | None]:
    """Per-task eval rows of a version (or, artifact BASE_ROWS, the base model's logged with it) and the md5 of
    the test file they came from."""
    import mlflow

    run = mv.tags.get("registering_run")
    if not run or (artifact == BASE_ROWS and not mv.tags.get("eval.base_rows")):
        return [], None
    path = mlflow.artifacts.download_artifacts(run_id=run, artifact_path=artifact)
    rows = read_jsonl(path)
    return rows, mv.tags.get("eval.test_md5")


def _tag_gate(mv, tag: str, what: str) -> Gate:
    """A gate recorded at registration: its tag starts with the outcome (pass/passed, fail/failed, inconclusive)."""
    value = mv.tags.get(tag)
    if value is None:
        return Gate(what, False, f"no {tag} tag: the candidate was registered without it")
    word = value.split(":", 1)[0].strip()
    outcome = {"passed": "pass", "failed": "fail"}.get(word, word)
    return Gate(what, outcome == "pass", value, outcome if outcome in ("pass", "fail", "inconclusive") else "fail")


def _general_rows(c, mv) -> dict[str, list[dict]]:
    """Per suite, the per-item general rows registered with a version ({} when it has none)."""
    import mlflow
    from mlflow.exceptions import MlflowException

    run = mv.tags.get("registering_run")
    if not run or mv.tags.get(GENERAL_STAMP, NO_ROWS) == NO_ROWS:
        return {}
    try:
        folder = Path(mlflow.artifacts.download_artifacts(run_id=run, artifact_path=GENERAL_ROWS))
    except (MlflowException, OSError):  # its run or files were deleted since
        return {}
    return {f.stem: read_jsonl(f) for f in sorted(folder.glob("*.jsonl"))}


def general_gate(c, challenger, champion, params) -> Gate:
    """Non-inferiority of the challenger per general suite against the champion's answers to the same items, paired
    by item id (rubricrl.general.run: compare, gate; margins general.tolerance): a challenger that loses more than
    the margin to the champion is held even when it is within the margin of base. Against the base model (the gate
    eval_general or distill recorded at registration, tag gate.general) where there is no champion, the challenger
    is the champion, or the champion's rows cannot be paired with the challenger's (none registered with it, other
    items or settings: general.run.rows_stamp, a suite it was not scored on). Beside a champion comparison the base
    gate must hold too (a chain of promotions each within the margin of the last would drift from base). The
    detail names the references."""
    from rubricrl.general.run import compare, gate
    from rubricrl.metrics.decide import combine

    base = _tag_gate(challenger, "gate.general", "general")

    def on_base(why: str) -> Gate:
        return Gate("general", base.passed, f"vs base ({why}): {base.detail}", base.outcome, against="base")

    if champion is None:
        return on_base("no champion yet")
    reference = f"champion version {champion.version}"
    if str(champion.version) == str(challenger.version):
        return on_base(f"the challenger is the {reference}")
    mine, theirs = challenger.tags.get(GENERAL_STAMP, NO_ROWS), champion.tags.get(GENERAL_STAMP, NO_ROWS)
    if mine == NO_ROWS:
        return on_base("no general rows were registered with the challenger")
    if theirs == NO_ROWS:
        return on_base(f"no general rows were registered with the {reference}")
    if mine != theirs:
        return on_base(f"the {reference}'s general rows answer other items or settings (rows stamp {theirs}, the "
                       f"challenger's {mine})")
    rows_a, rows_b = _general_rows(c, challenger), _general_rows(c, champion)
    if not rows_a or not rows_b:
        return on_base(f"the general rows of the challenger or the {reference} cannot be read from their runs")
    unpaired = [s for s in rows_a if not {r["id"] for r in rows_a[s]} & {r["id"] for r in rows_b.get(s, [])}]
    if unpaired:
        return on_base(f"the {reference} has no answers to the challenger's {', '.join(unpaired)} items")
    # perplexity pairs nats per token: only over the same tokens (another tokenizer counts other ones)
    tokens = {r["id"]: r.get("tokens") for r in rows_b.get("perplexity", [])}
    if any(r["id"] in tokens and r.get("tokens") != tokens[r["id"]] for r in rows_a.get("perplexity", [])):
        return on_base(f"the {reference} tokenizes the perplexity text differently (another tokenizer)")
    paired = compare({"champion": {s: {"items": r} for s, r in rows_b.items()},
                      "challenger": {s: {"items": r} for s, r in rows_a.items()}},
                     base="champion", n_boot=params.general.n_boot)
    g = gate(paired, params.general.tolerance, ["challenger"])["challenger"]
    lines = [f"{s} {d['line']}" for s, d in g["decisions"].items()]
    # Both must hold: against the champion alone, losses within the margin would add up over promotions.
    outcome = combine([g["outcome"], base.outcome])
    return Gate("general", outcome == "pass", f"vs {reference}: " + "; ".join(lines)
                + f". vs base (must hold too): {base.detail}", outcome, against=reference)


def task_gate(c, challenger, champion, params) -> Gate:
    """Challenger's strict field accuracy minus the reference's, paired by task, decided on its 95% interval
    (rubricrl.metrics.decide). The reference is the champion, or for the first candidate the base model (its rows
    logged at registration): a policy must be shown better (superiority over registry.task_margin), the student
    not worse than the champion by more than registry.student_margin (non-inferiority; the first candidate, student
    or not, must beat the base model). Pooled over parts, and no part (in-domain, held-out domain) may regress:
    a part whose interval lies below -registry.part_margin fails the gate whatever the pool says. Inconclusive (an
    interval straddling its margin) does not pass."""
    from rubricrl.metrics.compare import paired_comparisons
    from rubricrl.metrics.decide import decide
    from rubricrl.metrics.paired import describe

    if champion is not None and str(champion.version) == str(challenger.version):
        return Gate("task", True, f"challenger is champion (version {champion.version})",
                    against=f"champion version {champion.version}")
    rows_a, test_a = _rows(c, challenger)
    if champion is None:
        against, reference = "base", "the base model"
        rows_b, test_b = _rows(c, challenger, BASE_ROWS)
        if not rows_b:
            return Gate("task", False, f"first candidate (version {challenger.version}): no base-model eval rows "
                                       f"were registered with it, so nothing shows it beats the base model: re-run "
                                       f"the eval_task stage (it evaluates base) and the registry step",
                        "inconclusive", "base")
    else:
        against, reference = "champion", f"champion version {champion.version}"
        rows_b, test_b = _rows(c, champion)
    if not rows_a or not rows_b or test_a != test_b:
        return Gate("task", False, f"version {challenger.version} and {reference} were not evaluated on the "
                                   f"same test tasks (test md5 {test_a} vs {test_b}): re-run the eval_task stage "
                                   f"with the champion's split, or compare by hand", "inconclusive",
                        "base" if champion is None else reference)
    every = [r for r in paired_comparisons({against: rows_b, "challenger": rows_a}, n_resamples=params.eval.n_boot)
             if r["diff"] is not None]
    paired = [r for r in every if r["metric"] == TASK_METRIC]
    pooled = next((r for r in paired if r["part"] == "all"), None)
    if pooled is None:
        return Gate("task", False, f"no paired tasks with gold fields in common with {reference}", "inconclusive",
                    "base" if champion is None else reference)
    student = challenger.tags.get("stage") == STUDENT and champion is not None
    d = decide(pooled, "noninferiority" if student else "superiority",
               params.registry.student_margin if student else params.registry.task_margin)
    outcome, lines = d.outcome, [f"{TASK_METRIC} challenger {pooled['a']:.3f} vs {against} {pooled['b']:.3f}: {d.line}"]
    parts = [r for r in paired if r["part"] != "all"]
    for r in parts if len(parts) > 1 else []:
        p = decide(r, "noninferiority", params.registry.part_margin)
        lines.append(f"part {r['part']}: {p.line}")
        if p.outcome == "fail":
            outcome = "fail"
    # Abstention is a regression even at flat accuracy: stated values not given (answered null, left out, or no
    # parsed answer) shown to rise by more than registry.null_margin, pooled or on any part, fails the gate.
    for r in (r for r in every if r["metric"] == ABSTENTION and r.get("ci")):
        if r["ci"][0] > params.registry.null_margin:
            outcome = "fail"
            lines.append(f"part {r['part']}: stated values not given (null, left out or unparsed) {r['b']:.3f} -> "
                         f"{r['a']:.3f}, {describe(r)}: abstention shown up by more than "
                         f"{params.registry.null_margin:g}")
    outcome = "inconclusive" if outcome == "uninformative" else outcome
    return Gate("task", outcome == "pass", "; ".join(lines), outcome, "base" if champion is None else reference)


def export_gate(mv) -> Gate:
    verified = {k: v for k, v in mv.tags.items() if k.startswith("export.") and k.endswith(".verified")}
    if not verified:
        return Gate("exports", True, "no exports registered for this candidate")
    bad = sorted(k.split(".")[1] for k, v in verified.items() if v != "true")
    return Gate("exports", not bad, f"failed verification: {', '.join(bad)}" if bad else
                f"verified: {', '.join(sorted(k.split('.')[1] for k in verified))}")


def promote(params, dry_run: bool = False, report: Path | None = REPORT) -> dict:
    """Gate `challenger` against `champion`; move `champion` when every gate passes (not on a dry run).

    The decision is one intent (the PENDING tag: every tag, the alias, the champion history and the report it will
    write), then the writes, then the intent removed: a promotion killed between writes is completed by the next
    registry command (finish_pending), never left half made."""
    cfg, name = params.tracking, params.registry.name
    c = client(cfg)
    with registry_lock(cfg):
        finish_pending(c, name)
        challenger = alias_version(c, name, CHALLENGER)
        if challenger is None:
            raise RegistryError(f"registered model '{name}' has no '{CHALLENGER}' version: run the pipeline "
                                f"(it registers every trained candidate) first")
        if missing := missing_tags(name, challenger.tags):
            raise RegistryError(f"'{name}' challenger version {challenger.version} has no {', '.join(missing)} tag "
                                f"(its registration was interrupted): re-run the registry step")
        champion = alias_version(c, name, CHAMPION)
        gates = [_tag_gate(challenger, "gate.rubric", "rubric"), general_gate(c, challenger, champion, params),
                 task_gate(c, challenger, champion, params),
                 export_gate(challenger)]
        passed = all(g.passed for g in gates)
        version, before = str(challenger.version), champion and str(champion.version)
        decision = {"model": name, "challenger": version, "champion_before": before,
                    "passed": passed, "promoted": passed and before != version and not dry_run, "dry_run": dry_run,
                    "gates": [asdict(g) for g in gates]}
        decision["champion_after"] = version if decision["promoted"] else before
        if dry_run:
            if report is not None:
                write_text(report, promotion_markdown(decision))
            return decision
        tags = {f"promotion.gate.{g.name}": f"{g.outcome}: {g.detail[:4000]}" for g in gates}
        tags["promotion.decision"] = "champion" if passed else "rejected: " + ", ".join(
            f"{g.name} {g.outcome}" for g in gates if not g.passed)
        history = _history(c, name)
        if passed and (not history or history[-1] != version):
            history.append(version)  # also when it already was champion but the history missed it
        _apply(c, name, {"op": "promote", "version": version, "tags": {version: tags},
                         "alias": version if passed else None, "history": history if passed else None,
                         "report": str(report) if report is not None else None, "decision": decision})
    return decision


def _history(c, name: str) -> list[str]:
    return json.loads(c.get_registered_model(name).tags.get(HISTORY, "[]"))


def pending(c, name: str) -> dict | None:
    """The unfinished registration, promotion or rollback of a registered model (its recorded intent), or None."""
    from mlflow.exceptions import MlflowException

    try:
        raw = c.get_registered_model(name).tags.get(PENDING)
    except MlflowException as err:
        if err.error_code == "RESOURCE_DOES_NOT_EXIST":  # no registered model yet: nothing pending
            return None
        raise
    return json.loads(raw) if raw else None


def _apply(c, name: str, intent: dict) -> None:
    """Record the intent, make its writes (each a set: repeating one is harmless), mark it done."""
    c.set_registered_model_tag(name, PENDING, json.dumps(intent))
    for version, tags in intent["tags"].items():
        for k, v in tags.items():
            c.set_model_version_tag(name, version, k, v)
    if intent.get("alias"):
        move_alias(c, name, CHAMPION, intent["alias"])
    if intent.get("history") is not None:
        c.set_registered_model_tag(name, HISTORY, json.dumps(intent["history"]))
    if intent.get("report"):
        write_text(intent["report"], promotion_markdown(intent["decision"]))
    c.delete_registered_model_tag(name, PENDING)


def describe(intent: dict) -> str:
    """What an intent does, in words: 'promotion of version 2', 'registration of grpo (rubricrl-extractor)'."""
    if intent["op"] == "promote":
        return f"promotion of version {intent['version']}"
    if intent["op"] == "rollback":
        return f"rollback of champion {intent['from']} -> {intent['to']}"
    what = f"the {intent['stage']} exports" if intent.get("exports") else intent["stage"]
    return f"registration of {what} ({', '.join(e['model'] + '@' + e['alias'] for e in intent['entries'])})"


def half_made(intent: dict | None, model: str, mv) -> bool:
    """Whether an unfinished registration is writing this version (created, or its tags being set)."""
    return bool(intent) and intent["op"] == "register" and any(
        e["model"] == model and mv.tags.get(e["hash_tag"]) == e["tags"][e["hash_tag"]] for e in intent["entries"])


def finish_pending(c, name: str) -> dict | None:
    """Complete an unfinished registration, promotion or rollback (a kill between its writes) before anything else,
    then delete the versions that registrations before the journal left without a hash (remove_orphans); returns
    the intent, or None when there was none. Call under registry_lock."""
    intent = pending(c, name)
    if intent is not None:
        if intent["op"] == "register":
            _register_all(c, name, intent)
        else:
            _apply(c, name, intent)
        print(f"registry: completed the unfinished {describe(intent)} of '{name}' (interrupted before it marked "
              f"itself done)", file=sys.stderr)
    remove_orphans(c, name)
    return intent


def remove_orphans(c, name: str) -> list[str]:
    """Versions a registration made and left without its weights' hash (MLflow's log_model created the version
    first, then the tags were set one at a time, and the process was killed in between: before registrations were
    journaled). Nothing can find them again, so the rerun registered the weights anew: each is deleted, with one
    line on stderr. Only versions whose run is a registering run (`register-<stage>`) and that no alias names.
    Returns their versions."""
    from mlflow.exceptions import MlflowException

    unhashed = [mv for mv in c.search_model_versions(f"name = '{name}'") if MODEL_HASH not in mv.tags and mv.run_id]
    aliased = {str(v) for v in c.get_registered_model(name).aliases.values()} if unhashed else set()
    gone = []
    for mv in unhashed:
        if str(mv.version) in aliased:
            continue
        try:
            stage = c.get_run(mv.run_id).data.tags.get("rubricrl.stage", "")
        except MlflowException:  # its run was deleted: not ours to judge
            continue
        if stage.startswith("register-"):
            c.delete_model_version(name, mv.version)
            gone.append(str(mv.version))
            print(f"registry: deleted '{name}' version {mv.version}: an interrupted registration left it without "
                  f"its {MODEL_HASH} tag (run {mv.run_id})", file=sys.stderr)
    return gone


def rollback(params) -> tuple[str, str]:
    """Move `champion` back to the previous champion; returns (from version, to version). One intent, as promote."""
    cfg, name = params.tracking, params.registry.name
    c = client(cfg)
    with registry_lock(cfg):
        finish_pending(c, name)
        champion = alias_version(c, name, CHAMPION)
        if champion is None:
            raise RegistryError(f"registered model '{name}' has no '{CHAMPION}' to roll back")
        current, history = str(champion.version), _history(c, name)
        while history and history[-1] == current:
            history.pop()
        if not history:
            raise RegistryError(f"'{name}': version {current} is the first champion; nothing to roll back to")
        previous = history[-1]
        _apply(c, name, {"op": "rollback", "from": current, "to": previous, "alias": previous, "history": history,
                         "tags": {current: {"promotion.decision": f"rolled back to version {previous}"},
                                  previous: {"promotion.decision": f"champion (restored by rollback from version "
                                                                   f"{current})"}}})
    return current, previous


def _outcome(g: dict) -> str:
    return g.get("outcome") or ("pass" if g["passed"] else "fail")  # decisions written before outcomes existed


def promotion_markdown(d: dict) -> str:
    if d.get("registered") is False:
        return "\n".join([f"# {d['model']}: the {d.get('stage')} was not registered", "",
                          f"Its own gate: **{d['gates'][0]['outcome']}**: {d['gates'][0]['detail']}. Champion stays "
                          f"{d['champion_after'] or 'none'}."]) + "\n"
    verdict = ("promoted to champion" if d["promoted"] else "already champion" if d["passed"] and
               d["champion_before"] == d["challenger"] else "would be promoted (dry run)" if d["passed"]
               else "stays challenger")
    lines = [f"# Promotion: {d['model']} version {d['challenger']}", "",
             f"Champion before: {d['champion_before'] or 'none'}; after: {d['champion_after'] or 'none'}. "
             f"Decision: **{verdict}**.", "",
             table(["gate", "against", "outcome", "numbers"],
                   [[g["name"], g.get("against") or "-", _outcome(g) if g["passed"] else f"**{_outcome(g)}**",
                     g["detail"]] for g in d["gates"]])]
    return "\n".join(lines) + "\n"


def versions(params, name: str | None = None) -> list[dict]:
    """Every version of a registered model (default: registry.name), newest first, with its aliases and tags;
    `missing`: the tags it lacks to be complete (missing_tags), `unfinished`: an interrupted registration is
    writing it (the next registry command completes it)."""
    c = client(params.tracking)
    name = name or params.registry.name
    if not c.search_registered_models(f"name = '{name}'"):
        return []
    intent = pending(c, params.registry.name)
    aliases: dict[str, list[str]] = {}
    for alias, v in c.get_registered_model(name).aliases.items():
        aliases.setdefault(str(v), []).append(alias)
    out = []
    for mv in sorted(c.search_model_versions(f"name = '{name}'"), key=lambda v: -int(v.version)):
        out.append({"version": str(mv.version), "aliases": sorted(aliases.get(str(mv.version), [])), "tags": dict(mv.tags),
                    "created": mv.creation_timestamp, "run_id": mv.run_id, "missing": missing_tags(name, mv.tags),
                    "unfinished": half_made(intent, name, mv)})
    return out


def resolve(params, ref: str):
    """'NAME', 'NAME@ALIAS' or 'NAME/VERSION' (or a models:/ URI) -> the ModelVersion. 'NAME' alone: the newest
    complete version (its hash and gate tags, no registration still writing it)."""
    c = client(params.tracking)
    ref = ref.removeprefix("models:/")
    if "@" in ref:
        name, alias = ref.split("@", 1)
        mv = alias_version(c, name, alias)
        if mv is None:
            raise RegistryError(f"models:/{ref}: '{name}' has no alias '{alias}'")
        return mv
    name, _, version = ref.partition("/")
    if not version:
        found = c.search_model_versions(f"name = '{name}'")
        if not found:
            raise RegistryError(f"models:/{ref}: no registered model '{name}'")
        intent = pending(c, params.registry.name)
        complete = [v for v in found if not missing_tags(name, v.tags) and not half_made(intent, name, v)]
        if not complete:
            raise RegistryError(f"models:/{ref}: '{name}' has no complete version (each lacks its hash or gate tags, "
                                f"or an interrupted registration is writing it): re-run the registry step")
        return max(complete, key=lambda v: int(v.version))
    return c.get_model_version(name, version)


def local_model_dir(params, uri: str, cache: str | Path = ".cache/registry") -> Path:
    """An HF folder (model + tokenizer) of a registry model (models:/NAME@ALIAS), made once per version via MLflow's
    transformers flavour, so every loader in the project (eval, GGUF export) takes registry models too."""
    import mlflow

    mv = resolve(params, uri)
    out = Path(cache) / mv.name / str(mv.version)
    if (out / "config.json").exists():
        return out
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    parts = mlflow.transformers.load_model(f"models:/{mv.name}/{mv.version}", return_type="components")
    tmp = out.with_name(out.name + ".tmp")
    parts["model"].save_pretrained(tmp)
    parts["tokenizer"].save_pretrained(tmp)
    tmp.replace(out)
    return out
