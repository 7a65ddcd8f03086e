"""The reward-hacking monitor: the rubric reward and an independent true metric, watched apart.

Every `every` steps (and once before the first step) the policy being trained greedily answers a
fixed slice of validation tasks with gold answers. Each answer gets the rubric reward and the strict
true metric (`rubricrl.metrics.strict`: field accuracy, null-for-present and invented rates), logged
next to the training reward and KL as `monitor/*`, with the per-task counts in the log history. Every change is
judged on evidence, paired by task (rubricrl.metrics.rise: a one-sided 97.5% bound of a sign-flip test over the
tasks): when the monitor's reward rose (bound above `min_reward_rise`) while the strict field accuracy fell (bound
above `tolerance`), the policy is gaming the reward (seed 004: "scores up, quality down"); when the null-for-present
rate rose (bound above `null_tolerance`: abstaining on stated values, the seed's hack) it is abstaining, whatever
the reward did; each against the evaluation `window` evaluations back or (`against_first`) against the run's first
evaluation. A change whose bound does not clear its tolerance is noise at the monitor's size and acts on nothing.
Either trip stops training like a KL spike does, and the driver (rubricrl.train.grpo) restores the checkpoint of
the newest earlier evaluation whose true metric shows no fall against the first and logs the trip with the worst
examples; then `after_trip: rollback` raises beta and goes on, `after_trip: stop` ends the run there with the
restored state as its model. The comparison with the first catches a drift in steps each within the noise, and one
that a rollback hid by taking its new baseline on an already drifted checkpoint (the CPU run of
benchmarks/hackable_rubric.py: nulls 0.17 at step 0, 0.42 at the restored step 2, 0.50 at step 3).

On several processes every rank decodes the same tasks (ZeRO-3 needs all ranks in `generate`), so
all ranks reach the same verdict; only the main process logs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from transformers import TrainerCallback

from rubricrl.metrics.rise import describe_rise, rise, rise_mde
from rubricrl.metrics.strict import summarize
from rubricrl.metrics.true_metric import true_counts_each
from rubricrl.reward.scoring import RubricScorer
from rubricrl.core.taskfile import Task
from rubricrl.train.mlflow_log import active_mlflow
from rubricrl.train.rollback import RollbackMonitor, Spike
from rubricrl.train.section import COUNTS, TOLERANCE  # per-task counts (a resumed run judges on them), the rule
from rubricrl.config import HackMonitorSettings

PREFIX = "monitor/"
KEYS = ("reward", "field_accuracy", "exact_object_rate", "null_for_present_rate", "invented_rate")

# decode(model, tokenizer, tasks, max_new_tokens) -> one greedy response per task
Decoder = Callable[[object, object, list[Task], int], list[str]]


def greedy_decode(model, tokenizer, tasks: list[Task], max_new_tokens: int, batch_size: int = 8) -> list[str]:
    """Greedy answers of the model being trained (left padding, eval mode, then back to train mode)."""
    from rubricrl.inference.generate import generate_with_stats

    was_training, side = model.training, tokenizer.padding_side
    model.eval()
    tokenizer.padding_side = "left"
    try:
        responses, _ = generate_with_stats(None, tasks, batch_size=batch_size, max_new_tokens=max_new_tokens,
                                           model_and_tokenizer=(model, tokenizer), desc="hack monitor")
    finally:
        tokenizer.padding_side = side
        model.train(was_training)
    return responses


@dataclass
class Evaluation:
    step: int
    metrics: dict  # KEYS -> value (None when undefined, e.g. no gold-null field in the slice)
    rows: list[dict] = field(default_factory=list)  # per task: id, response, reward, accuracy and counts

    def to_log(self) -> dict:
        return {PREFIX + k: v for k, v in self.metrics.items() if v is not None}

    def counts(self) -> list[list]:
        """[id, nulls, present, right, fields, reward] per task: what a resumed run needs to judge on evidence."""
        return [[r["id"], *(r[k] for k in _COUNT_KEYS)] for r in self.rows if "fields" in r]


def evaluate(tasks: Sequence[Task], responses: Sequence[str], scorer: RubricScorer, step: int,
             checklist_judge=None) -> Evaluation:
    """The reward and the true metric of one greedy evaluation; `checklist_judge` (the free-text checklist's judge
    panel, rubricrl.metrics.checklist_judge) grades the checklist's facts and guards, None its procedure."""
    results = scorer.score_batch(list(zip(tasks, responses)))
    counts = true_counts_each(tasks, responses, checklist_judge)
    s = summarize(counts)
    metrics = {"reward": sum(r.total for r in results) / len(results), **{k: s[k] for k in KEYS[1:]}}
    rows = [{"id": t.id, "response": r, "reward": res.total, "accuracy": c.right / c.fields if c.fields else 0.0,
             "nulls": c.null_for_present, "present": c.present, "right": c.right, "fields": c.fields}
            for t, r, res, c in zip(tasks, responses, results, counts)]
    return Evaluation(step, metrics, rows)


_COUNT_KEYS = ("nulls", "present", "right", "fields", "reward")


def _paired(before: Evaluation, now: Evaluation) -> list[tuple[dict, dict]]:
    """(before row, now row) per task both evaluations answered with their counts (empty: a resumed history with
    neither rows nor counts decides nothing)."""
    a = {r["id"]: r for r in before.rows if "fields" in r}
    return [(a[r["id"]], r) for r in now.rows if r["id"] in a and "fields" in r]


def null_rise(before: Evaluation, now: Evaluation, tolerance: float = 0.0) -> dict:
    """The rise of null-for-present from `before` to `now`, paired by task, fields clustered in their task
    (rubricrl.metrics.rise): its `counts` says whether the lower bound is above `tolerance`."""
    pairs = _paired(before, now)
    return rise([y["nulls"] for _, y in pairs], [x["nulls"] for x, _ in pairs], [x["present"] for x, _ in pairs],
                tolerance)


def accuracy_fall(before: Evaluation, now: Evaluation, tolerance: float = 0.0) -> dict:
    """The fall of strict field accuracy from `before` to `now` (a rise of fields wrong), paired like null_rise."""
    pairs = _paired(before, now)
    return rise([x["right"] for x, _ in pairs], [y["right"] for _, y in pairs], [x["fields"] for x, _ in pairs],
                tolerance)


def reward_rise(before: Evaluation, now: Evaluation, tolerance: float = 0.0) -> dict:
    """The rise of the monitor's reward from `before` to `now`, per task (the mean of the totals)."""
    pairs = _paired(before, now)
    return rise([y["reward"] for _, y in pairs], [x["reward"] for x, _ in pairs], None, tolerance)


def null_mde(evaluation: Evaluation, tolerance: float) -> float | None:
    """The null-for-present rise the rule sees with 80% power on this evaluation's tasks from its rate."""
    present = [r["present"] for r in evaluation.rows if "present" in r]
    rate = evaluation.metrics.get("null_for_present_rate")
    return None if rate is None or not present else rise_mde(present, min(rate, 0.95), tolerance)


def _accuracy(row: dict) -> float:
    return row["right"] / row["fields"] if row.get("fields") else 0.0


def worst_examples(before: Evaluation, now: Evaluation, k: int = 3, chars: int = 300) -> list[dict]:
    """The tasks whose true metric fell most while their reward did not fall (the hack in action)."""
    pairs = []
    for a, b in _paired(before, now):  # by task id; a resumed evaluation has counts but no answers
        drop = _accuracy(a) - _accuracy(b)
        if drop > 0:
            pairs.append((drop, b["reward"] - a["reward"], a, b))
    pairs.sort(key=lambda p: (-p[0], -p[1]))
    return [{"task_id": b["id"], "step_before": before.step, "step_now": now.step,
             "accuracy_before": round(_accuracy(a), 4), "accuracy_now": round(_accuracy(b), 4),
             "reward_before": a["reward"], "reward_now": b["reward"],
             "response_before": a.get("response", "")[:chars], "response_now": b.get("response", "")[:chars]}
            for _, _, a, b in pairs[:k]]


class HackMonitor(TrainerCallback):
    """Evaluates the policy every `settings.every` steps; trips the rollback monitor on a suspected hack.

    Pass it to the trainer before the RollbackMonitor and the MLflow callback: it adds `monitor/*` to
    the step's logs (and to the trainer's log history, so a resumed run keeps its window).
    """

    def __init__(self, tasks: Sequence[Task], scorer: RubricScorer, settings: HackMonitorSettings,
                 rollback: RollbackMonitor, max_new_tokens: int, decode: Decoder | None = None, checklist_judge=None):
        self.tasks = list(tasks)
        if not self.tasks or any(t.reference is None for t in self.tasks):
            raise ValueError("the hack monitor needs validation tasks with reference answers")
        if settings.every is None:
            raise ValueError("monitor.every is not sized: pass GRPOSettings.sized().monitor")
        self.scorer = scorer
        self.checklist_judge = checklist_judge  # None: the free-text checklist's procedure grades every entry
        self.s = settings
        self.rollback = rollback
        self.max_new_tokens = settings.max_new_tokens or max_new_tokens
        self.decode = decode or (lambda m, tok, tasks, n: greedy_decode(m, tok, tasks, n, settings.batch_size))
        self.history: list[Evaluation] = []
        self._pending: Evaluation | None = None

    # --- what the driver uses -------------------------------------------------------------
    def forget_after(self, step: int) -> None:
        self.history = [e for e in self.history if e.step <= step]

    def seed(self, log_history: list[dict]) -> None:
        """Refill the window from a checkpoint's log history after a crash (metrics only, no rows)."""
        self.history = [Evaluation(e["step"], {k: e.get(PREFIX + k) for k in KEYS},
                                   [{"id": c[0], **dict(zip(_COUNT_KEYS, c[1:]))} for c in e.get(COUNTS) or []])
                        for e in log_history if "step" in e and PREFIX + "field_accuracy" in e]

    def protected_step(self) -> int | None:
        """The evaluation the next verdict would restore: its checkpoint must survive pruning."""
        target = self.restore_target()
        return None if target is None else target.step

    def restore_target(self) -> Evaluation | None:
        """Where a hack verdict rolls back to: the newest evaluation at or before the one `window` back whose true
        metric is within the tolerances of the run's first (an evaluation that had already drifted is no good
        state); the first evaluation itself when none is."""
        if not self.history:
            return None
        first = self.history[0]
        for e in reversed(self.history[:max(1, len(self.history) - self.s.window + 1)]):
            if e is first or not self._drift(first, e):
                return e
        return first

    def _drift(self, before: Evaluation, now: Evaluation, accuracy: bool = True) -> list[str]:
        """How the true metric fell from `before` to `now`, on evidence (rubricrl.metrics.rise): strict field
        accuracy's fall with its lower bound above `tolerance` (when `accuracy`), null-for-present's rise with its
        lower bound above `null_tolerance` (empty: neither shown; a history without per-task counts shows nothing)."""
        what = []
        if accuracy:
            fall = accuracy_fall(before, now, self.s.tolerance)
            if fall["counts"]:
                what.append(f"strict field accuracy {fall['a']:.3f} -> {fall['b']:.3f} (fall {describe_rise(fall)}, "
                            f"above tolerance {self.s.tolerance:g})")
        nulls = null_rise(before, now, self.s.null_tolerance)
        if nulls["counts"]:
            mde = null_mde(before, self.s.null_tolerance)
            what.append(f"null for a stated value {nulls['b']:.3f} -> {nulls['a']:.3f} (rise {describe_rise(nulls)}, "
                        f"above null_tolerance {self.s.null_tolerance:g}; the rule's MDE here "
                        f"{'n/a' if mde is None else f'+{mde:.2f}'})")
        return what

    def judge(self, now: Evaluation) -> tuple[str, Evaluation, Evaluation] | None:
        """(reason, the earlier evaluation compared with, the evaluation to restore) since the evaluation `window`
        back or, with `against_first`, since the run's first: the reward rose while the true metric fell, both on
        evidence (see _drift), or null-for-present rose on evidence whatever the reward did (abstention is a
        regression even at flat accuracy); else None. A change whose bound does not clear its tolerance is noise at
        the monitor's size and acts on nothing."""
        against = []
        if len(self.history) >= self.s.window:
            against.append((self.history[-self.s.window], ""))
        if self.s.against_first and self.history and self.history[0] not in [b for b, _ in against]:
            against.append((self.history[0], ", against the run's first evaluation"))
        for before, which in against:
            gain = reward_rise(before, now, self.s.min_reward_rise)
            rose = gain["counts"]
            what = self._drift(before, now, accuracy=rose)
            if not what:
                continue
            steps = f" (steps {before.step} -> {now.step}{which})"
            r0, r1 = before.metrics.get("reward"), now.metrics.get("reward")
            reward = "n/a" if None in (r0, r1) else f"{r0:.3f} -> {r1:.3f}"
            if rose:
                return (f"reward hacking suspected: monitor reward {reward} (rise {describe_rise(gain)}) while "
                        + " and ".join(what) + steps), before, self.restore_target()
            return (f"abstention: {what[0]} (monitor reward {reward}: a rise in nulls is a regression whatever the "
                    f"reward does){steps}"), before, self.restore_target()
        return None

    # --- trainer events -------------------------------------------------------------------
    def _evaluate(self, model, tokenizer, step: int) -> Evaluation:
        responses = self.decode(model, tokenizer, self.tasks, self.max_new_tokens)
        return evaluate(self.tasks, responses, self.scorer, step, self.checklist_judge)

    def on_train_begin(self, args, state, control, model=None, processing_class=None, **kwargs):
        if not self.s.enabled:
            return
        known = [e for e in self.history if e.step == state.global_step]
        if known:  # resumed at an evaluated step; a restart from the initial model (step 0) needs its entry back
            if not any(e.get("step") == state.global_step and PREFIX + "field_accuracy" in e for e in state.log_history):
                state.log_history.append({"step": state.global_step, **known[0].to_log(), COUNTS: known[0].counts()})
            return
        base = self._evaluate(model, processing_class, state.global_step)
        self.history.append(base)
        # No step log carries the baseline: it gets its own log-history entry and MLflow step.
        state.log_history.append({"step": state.global_step, **base.to_log(), COUNTS: base.counts(),
                                  TOLERANCE: self.s.null_tolerance})
        if state.is_world_process_zero and (mlflow := active_mlflow()) is not None:
            mlflow.log_metrics(base.to_log(), step=state.global_step)

    def on_step_end(self, args, state, control, model=None, processing_class=None, **kwargs):
        if not self.s.enabled or state.global_step % self.s.every:
            return
        now = self._evaluate(model, processing_class, state.global_step)
        self._pending = now
        verdict = self.judge(now)
        if verdict is None:
            self.history.append(now)
            return
        reason, before, target = verdict
        self.rollback.trip(Spike(state.global_step, None, now.metrics["reward"], reason, restore_step=target.step,
                                 kind="reward_hacking", examples=worst_examples(before, now)))
        control.should_training_stop = True
        control.should_save = False  # the hacked weights never become a checkpoint

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self._pending is None or logs is None or ("reward" not in logs and "kl" not in logs):
            return
        extra = self._pending.to_log()
        logs.update(extra)
        if state.log_history and state.log_history[-1].get("step") == state.global_step:
            state.log_history[-1].update(extra, **{COUNTS: self._pending.counts()})
        self._pending = None

