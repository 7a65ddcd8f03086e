"""Draft -> calibrate -> write: what the rubric stage and the `rubricrl rubric` commands share."""

from __future__ import annotations

import sys
from pathlib import Path

from rubricrl.core.atomic import output_set, write_json, write_text
from rubricrl.config import Params
from rubricrl.core.errors import ConfigError
from rubricrl.calibrate.calibrate import Calibration, calibrate, calibration_set
from rubricrl.calibrate.draft import add_proposals, combine, derive_rubric, free_text_draft, propose_criteria
from rubricrl.calibrate.gate import gate_failures
from rubricrl.calibrate.reference import HELDOUT_DIR, load_reference, measure
from rubricrl.calibrate.section import markdown, plots, true_metric
from rubricrl.reward.scoring import RubricScorer
from rubricrl.reward.spec import Rubric
from rubricrl.core.slices import stratified
from rubricrl.core.taskfile import FREE_TEXT, Task, load_responses

OUTPUT_FILES = ("draft.yaml", "rubric.yaml", "report.json", "report.md", "separation.png", "reward_vs_accuracy.png")


def generate_draft(tasks: list[Task], params: Params, llm: bool | None = None) -> tuple[Rubric, list[str]]:
    """The draft for the kinds of task in the data: for extraction the schema-derived criteria, plus LLM-proposed
    ones when asked; for free text the shipped free_text rubric (each task's own items, their items graded by
    scoring.openai_judge when scoring.judge is openai); both for mixed data. Problems of skipped proposals."""
    extraction = [t for t in tasks if t.schema is not None]
    free = [t for t in tasks if t.schema is None]
    draft, problems = None, []
    use_llm = params.rubric.llm_proposals if llm is None else llm
    if extraction:
        draft = derive_rubric(extraction)
        if use_llm:
            judge = params.scoring.openai_judge
            if judge is None:
                raise ConfigError("scoring.openai_judge: LLM proposals need a judge endpoint (set it, or "
                                  "rubric.llm_proposals: false)")
            criteria, problems = propose_criteria(judge, extraction, params.rubric.n_answers,
                                                  policy_model=params.policy.model)
            for p in problems:
                print(f"warning: rubric proposal {p}", file=sys.stderr)
            draft = add_proposals(draft, criteria, judge)
    if free:
        items = free_text_draft(params.scoring.judge_config())
        draft = items if draft is None else combine(draft, items)
    if draft is None:
        raise ConfigError("rubric: the training split holds no task to draft a rubric from")
    return draft, problems


def policy_samples(model_dir: str | Path, tasks: list[Task], params: Params):
    """rubric.policy_samples completions per task of rubric.policy_tasks tasks (stratified), drawn from the
    model GRPO starts from, at GRPO's temperature and completion length (what the reward will see); with the
    sampling's GenerationStats."""
    from rubricrl.inference.generate import sample_responses

    cfg, g = params.rubric, params.grpo
    chosen = stratified(tasks, cfg.policy_tasks)
    samples, stats = sample_responses(model_dir, chosen, cfg.policy_samples, g.temperature, g.max_completion_length,
                                      top_p=g.top_p, seed=cfg.seed, engine=cfg.sample_engine,
                                      prompts_per_batch=cfg.sample_batch)
    print(f"rubric: sampled {stats.n} policy answers from {model_dir} in {stats.seconds:.0f} s "
          f"({stats.tokens_per_s:.1f} tokens/s, {stats.truncated} truncated)", file=sys.stderr)
    return [(t, r) for t, rs in zip(chosen, samples) for r in rs], stats


def run_calibration(rubric: Rubric, val: list[Task], params: Params, policy_responses: str | None = None,
                    policy_model: str | Path | None = None) -> Calibration:
    """Calibrate on gold + corruptions of the validation tasks, and on policy answers: read from
    `policy_responses` (or rubric.policy_responses), else sampled from `policy_model` when
    rubric.policy_samples > 0."""
    cfg = params.rubric
    tasks = stratified([t for t in val if t.reference is not None], cfg.n_calibration)
    if len(tasks) < 5:
        raise ConfigError(f"rubric.n_calibration: only {len(tasks)} validation tasks with a reference; need at least 5")
    policy, generation = [], None
    path = policy_responses or cfg.policy_responses
    if path:
        by_id = {t.id: t for t in tasks}
        policy = [(by_id[r["id"]], r["response"]) for r in load_responses(path, set(by_id))]
    elif policy_model is not None and cfg.policy_samples > 0:
        policy, generation = policy_samples(policy_model, tasks, params)
    scorer = RubricScorer(rubric, judge_override=params.scoring.judge_config(), policy_model=params.policy.model)
    cal = calibrate(rubric, scorer, calibration_set(tasks, cfg.seed, policy), cfg.min_auc, cfg.keep_weak,
                    cfg.min_margin)
    if generation is not None:
        cal.report["policy_generation"] = generation.to_dict()
    if cfg.reference and FREE_TEXT in rubric.kinds:
        reference_scorer = RubricScorer(cal.rubric, judge_override=params.scoring.judge_config(),
                                        policy_model=params.policy.model)
        cal.report["reference"] = measure(load_reference(), reference_scorer, cfg.min_margin)
        cal.report["reference_heldout"] = measure(load_reference(HELDOUT_DIR), reference_scorer, cfg.min_margin)
    for cid in cal.report["weak_kept"]:
        print(f"warning: kept weak component '{cid}': {cal.report['components'][cid]['verdict']}", file=sys.stderr)
    return cal


def write_outputs(out_dir: Path, draft: Rubric, cal: Calibration, params: Params, proposal_problems: list[str]) -> dict:
    """Every output of the stage; returns the headline metrics."""
    gate = gate_failures(cal.report, params.rubric)
    report = {**cal.report, "gate_on": params.rubric.gate_on, "gate_failures": gate,
              "proposal_problems": proposal_problems}
    with output_set(out_dir, f"{out_dir}: another run is writing here; waiting for it") as stage:
        write_text(stage / "draft.yaml", draft.to_yaml())
        write_text(stage / "rubric.yaml", cal.rubric.to_yaml())
        write_json(stage / "report.json", report)
        write_text(stage / "report.md", markdown(report, gate))
        plots(cal.points, stage, true_metric(report))
    r, pol = report["reward"], report.get("on_policy") or {}
    probes = report["probes"].values()
    free = report.get("label_free") or {}
    free_probes, free_pol = (free.get("probes") or {}).values(), free.get("on_policy") or {}
    return {"pairwise_accuracy": r["pairwise_accuracy"], "kendall_tau": r["kendall_tau"],
            "spearman_accuracy": r["spearman_accuracy"], "reward_mean": r["scale"]["mean"], "reward_std": r["scale"]["std"],
            "n_dropped": len(report["dropped"]), "probes_failed": sum(not p["pass"] for p in probes),
            "worst_probe_margin": min((p["worst_margin"] for p in probes), default=None),
            "policy_spearman_accuracy": pol.get("spearman_accuracy"), "policy_pairwise_accuracy": pol.get("pairwise_accuracy"),
            "policy_samples": pol.get("n_samples", 0),
            "policy_tokens_per_s": (report.get("policy_generation") or {}).get("tokens_per_s"),
            "judge_calls_per_response": report["judge_calls_per_response"], "gate_passed": int(not gate),
            # The hand-written reference set (free text only).
            "reference_reward_pair_accuracy": (report.get("reference") or {}).get("reward_pair_accuracy"),
            "reference_checklist_pair_accuracy": (report.get("reference") or {}).get("checklist_pair_accuracy"),
            "heldout_reward_pair_accuracy": (report.get("reference_heldout") or {}).get("reward_pair_accuracy"),
            "heldout_checklist_pair_accuracy": (report.get("reference_heldout") or {}).get("checklist_pair_accuracy"),
            # The same figures with every reference hidden from the reward (the report's label_free block).
            "label_free_pairwise_accuracy": (free.get("reward") or {}).get("pairwise_accuracy"),
            "label_free_spearman_accuracy": (free.get("reward") or {}).get("spearman_accuracy"),
            "label_free_probes_failed": sum(not p["pass"] for p in free_probes) if free else None,
            "label_free_worst_probe_margin": min((p["worst_margin"] for p in free_probes), default=None),
            "label_free_policy_spearman_accuracy": free_pol.get("spearman_accuracy"),
            "label_free_policy_pairwise_accuracy": free_pol.get("pairwise_accuracy"),
            "label_free_seconds": free.get("seconds")}
