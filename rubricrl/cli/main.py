"""The `rubricrl` command: everything a user does by hand."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rubricrl.cli.options import setting, settings
from rubricrl.core.entry import stage_main
from rubricrl.stages.paths import EVAL_TASK, RUBRIC

PARAMS_HELP = ("params file (default: ./params.yaml if present, else the built-in defaults, which are the CPU default; "
               "RUBRICRL_PARAMS_OVERLAY adds overlays)")


def cmd_data_validate(args) -> None:
    from rubricrl.core.taskfile import load_tasks

    for path in args.files:
        tasks = load_tasks(path)
        with_ref = sum(t.reference is not None for t in tasks)
        print(f"{path}: OK, {len(tasks)} tasks ({with_ref} with a reference answer)")


def cmd_data_generate(args) -> None:
    from rubricrl.core.atomic import output_set, write_json, write_jsonl
    from rubricrl.data.prepare import prepare_splits, split_stats

    data = settings(args, _params(args.params)).data.model_copy(update={"source": "generate"})
    splits = prepare_splits(data)
    out = Path(args.out_dir)
    with output_set(out, f"{out}: another run is writing here; waiting for it") as stage:
        for name, tasks in splits.items():  # the splits and their stats appear together or not at all
            write_jsonl(stage / f"{name}.jsonl", (t.to_dict() for t in tasks))
        write_json(stage / "stats.json", split_stats(splits))
    for name, tasks in splits.items():
        print(f"wrote {out / f'{name}.jsonl'} ({len(tasks)} tasks)")


def cmd_score(args) -> None:
    from rubricrl.core.atomic import write_jsonl
    from rubricrl.reward.scoring import build_scorer
    from rubricrl.core.taskfile import load_responses, load_tasks

    scoring = settings(args, _params(args.params)).scoring  # --judge re-checked: openai needs its settings
    tasks = {t.id: t for t in load_tasks(args.tasks)}
    rows = load_responses(args.responses, set(tasks))
    scorer = build_scorer(scoring, rubric_path=args.rubric)
    results = scorer.score_batch([(tasks[r["id"]], r["response"]) for r in rows])
    out_rows = [{**row, **res.to_dict()} for row, res in zip(rows, results)]
    if args.out:
        write_jsonl(args.out, out_rows)
    else:
        for row in out_rows:
            print(json.dumps(row, ensure_ascii=False))
    print(summary_table(results, scorer.rubric), file=sys.stderr)


def _cell(cap: float | None) -> str:
    return "-" if cap is None else f"{cap:.2f}"  # an uncapped penalty has no max


def summary_table(results, rubric) -> str:
    """Mean score per component over the responses it scored (a mixed batch: extraction and free-text tasks each
    have their own components); the total's max is the highest any response could reach."""
    n = len(results)
    lines = [f"{'component':<20}{'mean':>8}{'max':>8}{'weight':>8}{'n':>6}", "-" * 50]
    first = {}
    for r in results:
        for c in r.components:
            first.setdefault(c.id, c)
    for cid, comp in first.items():
        scores = [c.score for r in results for c in r.components if c.id == cid]
        lines.append(f"{cid:<20}{sum(scores) / len(scores):>8.3f}{_cell(comp.max):>8}{comp.weight:>8.2f}{len(scores):>6}")
    lines.append("-" * 50)
    mean_total = sum(r.total for r in results) / max(n, 1)
    calls = sum(r.judge_calls for r in results)
    top = max((r.max_total for r in results), default=rubric.max_total)
    lines.append(f"{'total':<20}{mean_total:>8.3f}{top:>8.2f}{'':>8}{n:>6}")
    lines.append(f"{n} responses scored; judge calls per response: {calls / max(n, 1):.2f}")
    return "\n".join(lines)


def cmd_rubric_generate(args) -> None:
    from rubricrl.core.atomic import write_text
    from rubricrl.calibrate.workflow import generate_draft
    from rubricrl.core.taskfile import load_tasks

    draft, problems = generate_draft(load_tasks(args.tasks), _params(args.params), llm=args.llm or None)
    write_text(args.out, draft.to_yaml())
    kinds = ", ".join(f"{c.id} ({c.source})" for c in draft.criteria + draft.penalties)
    print(f"wrote {args.out}: {kinds}; {len(problems)} proposal(s) skipped")


def cmd_rubric_items(args) -> None:
    from rubricrl.calibrate.items_draft import fill_items
    from rubricrl.core.atomic import write_jsonl
    from rubricrl.core.errors import ConfigError
    from rubricrl.core.taskfile import load_tasks

    tasks = load_tasks(args.tasks)  # every problem named before anything is asked or written
    propose, judge = None, None
    if args.llm:
        from rubricrl.calibrate.items_propose import propose_with
        from rubricrl.reward.judges.openai_judge import OpenAIJudge

        params = _params(args.params)
        if params.scoring.openai_judge is None:
            raise ConfigError("scoring.openai_judge: --llm needs a judge endpoint in the params file")
        judge = OpenAIJudge(params.scoring.openai_judge, policy_model=params.policy.model)
        propose = lambda task, taken: propose_with(judge, task, taken)  # noqa: E731
    try:
        filled, done = fill_items(tasks, propose)
    finally:
        if judge is not None:
            judge.close()
    for problem in done["problems"]:
        print(f"warning: item proposal {problem}", file=sys.stderr)
    write_jsonl(args.out, (t.to_dict() for t in filled))
    print(f"wrote {args.out}: items drafted for {done['drafted']} of {len(tasks)} task(s) "
          f"({done['proposed']} proposed by the judge endpoint, {len(done['problems'])} skipped)")


def cmd_rubric_calibrate(args) -> None:
    from rubricrl.reward.load import load_rubric
    from rubricrl.calibrate.workflow import run_calibration, write_outputs
    from rubricrl.core.taskfile import load_tasks

    params = _params(args.params)
    rubric = load_rubric(args.rubric)
    cal = run_calibration(rubric, load_tasks(args.tasks), params, policy_responses=args.policy_responses,
                          policy_model=args.policy_model)
    metrics = write_outputs(Path(args.out_dir), rubric, cal, params, [])
    print(json.dumps(metrics, indent=2))
    print(f"report: {Path(args.out_dir) / 'report.md'}; calibrated rubric: {Path(args.out_dir) / 'rubric.yaml'}")


def cmd_rubric_gate(args) -> None:
    from rubricrl.calibrate.gate import check_gate

    params = _params(args.params)
    report = read_json(args.report, "calibration report")
    check_gate(report, params.rubric, params.rubric.allow_gate_failures)
    print(f"{args.report}: gate passed")


def _params(path: str | None):
    """The named params file (it must exist); without --params, ./params.yaml, else the typed defaults (the CPU
    default, which params.yaml spells out). Overlays named by RUBRICRL_PARAMS_OVERLAY apply to a params file."""
    from rubricrl.config import DEFAULT_PARAMS, Params, load_params

    if path is not None:
        return load_params(path)
    if Path(DEFAULT_PARAMS).exists():
        return load_params(DEFAULT_PARAMS)
    print(f"note: no {DEFAULT_PARAMS} in {Path.cwd()}: using the built-in defaults (the CPU default, as params.yaml writes it)", file=sys.stderr)
    return Params()


def read_json(path: str, what: str):
    from rubricrl.core.errors import ConfigError

    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: {what} not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a folder, not a {what} file") from None
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise ConfigError(f"{path}: not a JSON {what}: {err}") from None


def _model_dir(model: str) -> str:
    from rubricrl.core.errors import ConfigError

    path = Path(model)
    if not path.is_dir() or not (path / "config.json").is_file():
        raise ConfigError(f"--model {model}: not a model folder (a folder with config.json, e.g. outputs/models/sft)")
    return model


def cmd_eval(args) -> None:
    from contextlib import nullcontext

    from rubricrl.evaluate.task import evaluate_model
    from rubricrl.metrics.checklist_judge import checklist_panel
    from rubricrl.reward.scoring import build_scorer
    from rubricrl.core.taskfile import load_tasks

    params = settings(args, _params(args.params))
    model = args.model
    if model.startswith("models:/"):  # a registry version: an HF folder made from it once (.cache/registry)
        from rubricrl.release.registry import local_model_dir

        model = str(local_model_dir(params, model))
        print(f"{args.model} -> {model}", file=sys.stderr)
    _model_dir(model)
    scorer = build_scorer(params.scoring, rubric_path=args.rubric, policy_model=model)
    name = args.model.removeprefix("models:/").replace("@", "_").replace("/", "_") if model != args.model \
        else Path(model).name
    out = Path(args.out or Path(EVAL_TASK.out) / name)
    cfg = params.eval
    # The free-text checklist graded by the judge panel (scoring.checklist_judge) when set, as the eval stage does.
    with checklist_panel(params.scoring.checklist_judge, model) or nullcontext() as checklist_judge:
        metrics = evaluate_model(model, load_tasks(args.tasks), scorer, out, batch_size=cfg.batch_size,
                                 max_new_tokens=cfg.max_new_tokens, n_boot=cfg.n_boot, engine=cfg.engine,
                                 checklist_judge=checklist_judge)
    print(f"{'part':<18}{'n':>5}{'reward':>9}{'95% CI':>18}{'acc':>7}{'null':>7}{'invent':>7}{'valid':>7}{'extra':>7}")
    nan = float("nan")
    for part, g in {"all": metrics["all"], **metrics["parts"]}.items():
        st = g.get("strict") or {}
        acc, null, inv = (nan if st.get(k) is None else st[k]
                          for k in ("field_accuracy", "null_for_present_rate", "invented_rate"))
        ci = f"[{g['reward_ci'][0]:.2f}, {g['reward_ci'][1]:.2f}]" if g.get("reward_ci") else "-"
        print(f"{part:<18}{g['n']:>5}{g['reward_mean']:>9.3f}{ci:>18}{acc:>7.3f}{null:>7.3f}{inv:>7.3f}"
              f"{g['json_valid_rate']:>7.2f}{g['extra_text_rate']:>7.2f}")
    print(f"wrote {out}/metrics.json, responses.jsonl, samples.md")


def cmd_config_validate(args) -> None:
    from rubricrl.config import load_params

    from rubricrl.release.plan import summary

    for path in args.files:
        params = load_params(path, args.overlay or [])
        print(f"{path}" + "".join(f" + {o}" for o in args.overlay or []) + ": OK")
        print("\n".join(f"  {line}" for line in summary(params, Path(path).parent / "metrics").splitlines()))


def cmd_config_apply(args) -> None:
    from rubricrl.config import apply_overlay

    changes = apply_overlay(args.overlay, args.params)
    for key, old, new in changes:
        print(f"{key}: {old} -> {new}")
    print(f"{args.params}: {len(changes)} key(s) set from {args.overlay}")


def _in_project() -> None:
    """The flow runs the stage graph of the project in the working folder (its dvc.yaml)."""
    from rubricrl.core.errors import ConfigError

    root = Path.cwd()
    if not (root / "dvc.yaml").exists():
        raise ConfigError(f"{root}: not a RubricRL project (no dvc.yaml); run from its root")


def cmd_pipeline_run(args) -> None:
    _in_project()
    from rubricrl.flow.pipeline import run_pipeline

    order = run_pipeline(stages=args.stage or None, force=args.force)
    print(f"pipeline finished: {', '.join(order)}")


def cmd_pipeline_serve(args) -> None:
    _in_project()
    from rubricrl.flow.serve import serve_pipeline

    serve_pipeline(cron=args.cron)


def cmd_pipeline_status(args) -> None:
    _in_project()
    from rubricrl.flow.serve import pipeline_status

    status = pipeline_status(args.n, args.scheduled)
    print(status["source"])

    def duration(s):
        return "" if s is None else f"{s:.1f}s" if s < 60 else f"{int(s // 60)}m{int(s % 60):02d}s" if s < 3600 \
            else f"{int(s // 3600)}h{int(s % 3600 // 60):02d}m"

    def when(t):
        return t.astimezone().strftime("%Y-%m-%d %H:%M:%S")

    def columns(table):
        widths = [max(len(row[i]) for row in table) for i in range(len(table[0]) - 1)]
        for row in table:
            print(("  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[-1]).rstrip())

    runs, queued, waiting = status["runs"], status["scheduled"], status["waiting"]
    if not runs and not waiting:
        print("no pipeline runs recorded there")
        return
    if runs:
        columns([("RUN", "STATE", "BY", "START", "DURATION", "STAGE", "ERROR")] + [
            (r["name"], r["state"], r["by"], when(r["start"]) + ("" if r["started"] else " (expected)"),
             duration(r["seconds"]), r["stage"], r["error"][:100]) for r in runs])
    else:
        print("no pipeline run has started yet")
    if waiting:
        print(f"\nscheduled: {waiting}" + (f", the next {len(queued)}:" if queued else
                                           " (--scheduled M lists the next M)"))
    if queued:
        import datetime as dt

        now = dt.datetime.now(dt.timezone.utc)
        columns([("RUN", "STATE", "BY", "AT")] + [
            (r["name"], r["state"], r["by"], when(r["start"]) + (
                f" (in {duration((r['start'] - now).total_seconds())})" if r["start"] > now
                else f" ({duration((now - r['start']).total_seconds())} ago)")) for r in queued])


def cmd_pipeline_unlock(args) -> None:
    _in_project()
    from rubricrl.flow.serve import unlock

    taken = unlock()
    print(f"freed {taken} pipeline concurrency slot(s)" if taken else "the pipeline concurrency slot was free")


def _version_table(name: str, rows: list[dict], columns: list[tuple[str, str, str]]) -> None:
    """One registered model's versions; columns: (header, format spec, tag), after VERSION and ALIASES."""
    print(f"{name}:")
    print(f"{'VERSION':<8}{'ALIASES':<22}" + " ".join(f"{h:{spec}}" for h, spec, _ in columns))
    for r in rows:
        note = (f"  INCOMPLETE (no {', '.join(r['missing'])}): never resolved or aliased" if r.get("missing") else "") \
            + ("  UNFINISHED (a registration is writing it)" if r.get("unfinished") else "")
        print(f"{r['version']:<8}{','.join(r['aliases']) or '-':<22}"
              + " ".join(f"{r['tags'].get(tag, '-'):{spec}}" for _, spec, tag in columns) + note)


def cmd_registry_list(args) -> None:
    from rubricrl.release import registry

    params = _params(args.params)
    rows = registry.versions(params)
    unfinished = registry.pending(registry.client(params.tracking), params.registry.name)
    if not rows and not unfinished:
        print(f"no versions of '{params.registry.name}' yet (the pipeline registers every trained candidate)")
        return
    _version_table(params.registry.name, rows, [("STAGE", "<7", "stage"), ("FIELD ACC", ">9", "eval.all.field_accuracy"),
                                                ("REWARD", ">8", "eval.all.reward"), (" DECISION", "", "promotion.decision")])
    if unfinished:  # list only reads: the next promote, rollback or registration completes it
        print(f"UNFINISHED: a {registry.describe(unfinished)} was interrupted before it marked itself done; the "
              f"aliases and tags above may be half written. The next `rubricrl registry promote` or `rollback` (or "
              f"the pipeline's registry step) completes it first.")
    for fmt in sorted(set(registry.EXPORT_FORMATS.values())):  # the verified exports (register_exports)
        name = f"{params.registry.name}-{fmt}"
        exports = registry.versions(params, name)
        if exports:
            print()
            _version_table(name, exports, [("FROM", "<25", "source_model"), ("SIZE MB", ">8", "size_mb"),
                                           ("RETENTION", ">9", "retention.field_accuracy"),
                                           ("TOK/S", ">6", "tokens_per_s")])


def cmd_registry_show(args) -> None:
    from rubricrl.release import registry

    params = _params(args.params)
    mv = registry.resolve(params, args.ref or f"{params.registry.name}@{registry.CHAMPION}")
    print(f"{mv.name} version {mv.version} (run {mv.run_id}, source {mv.source})")
    for k, v in sorted(mv.tags.items()):
        print(f"  {k}: {v}")


def cmd_registry_promote(args) -> None:
    from rubricrl.release import registry

    d = registry.promote(_params(args.params), dry_run=args.dry_run)
    print(registry.promotion_markdown(d), end="")
    print(f"wrote {registry.REPORT}")


def cmd_registry_rollback(args) -> None:
    from rubricrl.release import registry

    params = _params(args.params)
    old, new = registry.rollback(params)
    print(f"{params.registry.name}: champion {old} -> {new}")


def _int_at_least(text: str, low: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
    return value


def positive_int(text: str) -> int:
    return _int_at_least(text, 1)


def non_negative_int(text: str) -> int:
    return _int_at_least(text, 0)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rubricrl", description="Post-train LLMs with rubric rewards.")
    p.add_argument("--debug", action="store_true", help="show the traceback of a failure")
    sub = p.add_subparsers(dest="command", required=True)

    data = sub.add_parser("data", help="task files: validate, generate").add_subparsers(dest="data_cmd", required=True)
    v = data.add_parser("validate", help="check task files; report every problem as file:line: key")
    v.add_argument("files", nargs="+")
    v.set_defaults(fn=cmd_data_validate)
    g = data.add_parser("generate", help="build the embedded default data set (train.jsonl, test.jsonl)")
    setting(g, "--seed", "data", "seed", "the generator's seed")
    setting(g, "--n-train", "data", "n_train", "training tasks (val is carved out of them: --n-val)")
    setting(g, "--n-val", "data", "n_val", "validation tasks taken out of the training pool")
    setting(g, "--n-test", "data", "n_test", "test tasks")
    setting(g, "--heldout-domains", "data", "heldout_domains", "comma-separated domains kept out of training")
    g.add_argument("--out-dir", default="data")
    g.add_argument("--params", help=PARAMS_HELP)
    g.set_defaults(fn=cmd_data_generate)

    s = sub.add_parser("score", help="score responses with a rubric")
    s.add_argument("--tasks", required=True, help="task file (JSONL)")
    s.add_argument("--responses", required=True, help="JSONL lines with id and response (other fields kept)")
    s.add_argument("--rubric", help="rubric YAML (default: params.yaml scoring.rubric)")
    s.add_argument("--out", help="output JSONL (default: stdout)")
    setting(s, "--judge", "scoring", "judge", "the judge of every judge criterion")
    s.add_argument("--params", help=PARAMS_HELP)
    s.set_defaults(fn=cmd_score)

    ev = sub.add_parser("eval", help="greedy generations of a model on a task file, scored with the rubric")
    ev.add_argument("--model", required=True, help="HF model folder, or a registry model: models:/NAME@ALIAS or models:/NAME/VERSION")
    ev.add_argument("--tasks", required=True, help="task file (JSONL) with reference answers for the gold metrics")
    ev.add_argument("--rubric", help="rubric YAML (default: params.yaml scoring.rubric)")
    ev.add_argument("--out", help="output folder (default: outputs/eval/<model folder name>)")
    setting(ev, "--batch-size", "eval", "batch_size", "prompts generated together")
    setting(ev, "--max-new-tokens", "eval", "max_new_tokens", "tokens per answer")
    setting(ev, "--engine", "eval", "engine", "greedy decoding engine")
    ev.add_argument("--params", help=PARAMS_HELP)
    ev.set_defaults(fn=cmd_eval)

    rb = sub.add_parser("rubric", help="draft, calibrate and gate rubrics").add_subparsers(dest="rubric_cmd", required=True)
    rg = rb.add_parser("generate", help="draft a rubric from task data (schema, constraints, optional LLM proposals)")
    rg.add_argument("--tasks", required=True)
    rg.add_argument("--out", default="rubric.draft.yaml")
    rg.add_argument("--llm", action="store_true", help="also ask scoring.openai_judge for semantic criteria")
    rg.add_argument("--params", help=PARAMS_HELP)
    rg.set_defaults(fn=cmd_rubric_generate)
    ri = rb.add_parser("items", help="rubric items for free-text tasks written with items: [] (a deterministic "
                       "draft; --llm adds the judge endpoint's proposals), written to a new task file to review")
    ri.add_argument("--tasks", required=True)
    ri.add_argument("--out", required=True)
    ri.add_argument("--llm", action="store_true", help="also ask scoring.openai_judge for each task's items")
    ri.add_argument("--params", help=PARAMS_HELP)
    ri.set_defaults(fn=cmd_rubric_items)
    rc = rb.add_parser("calibrate", help="measure a rubric on validation tasks; drop components that do not discriminate")
    rc.add_argument("--rubric", required=True)
    rc.add_argument("--tasks", required=True, help="validation tasks with reference answers")
    rc.add_argument("--policy-responses", help="JSONL (id, response) of policy samples to add")
    rc.add_argument("--policy-model", help="sample rubric.policy_samples answers per task from this model folder")
    rc.add_argument("--out-dir", default="outputs/rubric")
    rc.add_argument("--params", help=PARAMS_HELP)
    rc.set_defaults(fn=cmd_rubric_calibrate)
    rt = rb.add_parser("gate", help="exit non-zero, naming the failures, if a calibration report fails the gate")
    rt.add_argument("--report", default=RUBRIC.report)
    rt.add_argument("--params", help=PARAMS_HELP)
    rt.set_defaults(fn=cmd_rubric_gate)

    c = sub.add_parser("config", help="params files").add_subparsers(dest="config_cmd", required=True)
    cv = c.add_parser("validate", help="validate params files (with overlays laid over them) against the typed sections")
    cv.add_argument("files", nargs="*", default=["params.yaml"])
    cv.add_argument("--overlay", action="append", help="a profile overlay laid over each file (repeatable), e.g. "
                    "configs/production.yaml")
    cv.set_defaults(fn=cmd_config_validate)
    ca = c.add_parser("apply", help="write a profile overlay's keys into params.yaml (comments kept); e.g. "
                                    "`rubricrl config apply configs/production.yaml`")
    ca.add_argument("overlay")
    ca.add_argument("--params", default="params.yaml")
    ca.set_defaults(fn=cmd_config_apply)

    rg_ = sub.add_parser("registry", help="the MLflow model registry: versions, promotion through the gates, rollback"
                         ).add_subparsers(dest="registry_cmd", required=True)
    for name, fn, text in (("list", cmd_registry_list, "every version with its aliases, numbers and promotion decision"),
                           ("show", cmd_registry_show, "one version's tags (lineage, eval numbers, gates)"),
                           ("promote", cmd_registry_promote, "gate challenger against champion; move champion if all pass"),
                           ("rollback", cmd_registry_rollback, "move champion back to the previous champion")):
        q = rg_.add_parser(name, help=text)
        if name == "show":
            q.add_argument("ref", nargs="?", help="NAME, NAME@ALIAS or NAME/VERSION (default: registry.name@champion)")
        if name == "promote":
            q.add_argument("--dry-run", action="store_true", help="decide and report, move nothing")
        q.add_argument("--params", help=PARAMS_HELP)
        q.set_defaults(fn=fn)

    pl = sub.add_parser("pipeline", help="run the stage graph as a Prefect flow").add_subparsers(dest="pipe_cmd", required=True)
    r = pl.add_parser("run", help="run every stage of dvc.yaml in order (up-to-date stages are skipped)")
    r.add_argument("--stage", action="append", help="run only this stage (repeatable)")
    r.add_argument("--force", action="store_true", help="re-run stages even when up to date")
    r.set_defaults(fn=cmd_pipeline_run)
    sv = pl.add_parser("serve", help="serve the flow: params.yaml pipeline.cron, and a rerun when a watched task "
                                      "file changes (runs until stopped)")
    sv.add_argument("--cron", help="override pipeline.cron (fires only under `prefect server start` + PREFECT_API_URL)")
    sv.set_defaults(fn=cmd_pipeline_serve)
    st = pl.add_parser("status", help="the last pipeline runs (state, start, duration, failed stage and error), "
                                       "then the next scheduled ones")
    st.add_argument("-n", type=positive_int, default=10, help="how many started runs, newest first (default 10)")
    st.add_argument("--scheduled", type=non_negative_int, default=3, metavar="M",
                    help="how many scheduled runs, soonest first (default 3; 0: only their count)")
    st.set_defaults(fn=cmd_pipeline_status)
    ul = pl.add_parser("unlock", help="free the one-run-at-a-time slot a killed run left taken")
    ul.set_defaults(fn=cmd_pipeline_unlock)
    return p


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    stage_main(lambda: args.fn(args), debug=args.debug)


if __name__ == "__main__":
    main()
