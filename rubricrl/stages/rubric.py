"""DVC stage `rubric`: draft a rubric from the task data, calibrate it on validation tasks (gold, corruptions and
samples of the model GRPO starts from), as given and with every reference hidden from the reward (label-free),
report; the calibration report is the stage's report section."""

from __future__ import annotations

from pathlib import Path

from rubricrl import tracking
from rubricrl.calibrate.workflow import generate_draft, run_calibration, write_outputs
from rubricrl.config import Params, load_params
from rubricrl.core.entry import stage_main
from rubricrl.core.taskfile import load_tasks
from rubricrl.stages.base import Result
from rubricrl.stages.paths import DATA, POLICIES
from rubricrl.stages.paths import RUBRIC as PATHS


class RubricResult(Result):
    """metrics/rubric.json: the calibration's headline numbers (the full report is outputs/rubric/report.json)."""

    pairwise_accuracy: float
    kendall_tau: float | None
    spearman_accuracy: float | None
    reward_mean: float
    reward_std: float
    n_dropped: int
    probes_failed: int
    worst_probe_margin: float | None
    policy_spearman_accuracy: float | None
    policy_pairwise_accuracy: float | None
    policy_samples: int
    policy_tokens_per_s: float | None = None  # the policy sampling's speed (None: samples read from a file)
    judge_calls_per_response: float
    gate_passed: int
    # The same figures with every reference hidden from the reward (outputs/rubric/report.json: label_free).
    label_free_pairwise_accuracy: float | None = None
    label_free_spearman_accuracy: float | None = None
    label_free_probes_failed: int | None = None
    label_free_worst_probe_margin: float | None = None
    label_free_policy_spearman_accuracy: float | None = None
    label_free_policy_pairwise_accuracy: float | None = None
    label_free_seconds: float | None = None
    # the hand-written free-text reference set (None without free text)
    reference_reward_pair_accuracy: float | None = None
    reference_checklist_pair_accuracy: float | None = None
    # ... and on its held-out scenarios (rubricrl/data/reference/free_text_heldout: reported, never gated)
    heldout_reward_pair_accuracy: float | None = None
    heldout_checklist_pair_accuracy: float | None = None


def run(params: Params) -> RubricResult:
    with tracking.stage_run(params.tracking, "rubric", {"rubric": params.rubric.model_dump(),
                                                        "scoring.judge": params.scoring.judge},
                            inputs=[DATA.train, DATA.val]) as run:
        draft, problems = generate_draft(load_tasks(DATA.train), params)
        cal = run_calibration(draft, load_tasks(DATA.val), params, policy_model=POLICIES[params.grpo.start_from])
        out = Path(PATHS.rubric).parent
        result = RubricResult(**write_outputs(out, draft, cal, params, problems))  # report.md: the section
        result.write(PATHS.result)
        run.log_metrics(result.model_dump())
        run.log_artifacts(out, "rubric")
        run.log_outputs([PATHS.rubric])
    return result


def main() -> None:
    """The stage: tasks/rubric.py (dvc.yaml's command) and `python -m` run it under stage_main."""
    run(load_params())


if __name__ == "__main__":
    stage_main(main)
