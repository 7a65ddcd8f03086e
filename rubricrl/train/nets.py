"""Which GRPO safety nets a run has armed, from its settings alone: the stage's result and its report table.

A net is armed when it can fire within max_steps on a run without rollbacks (a rollback empties the KL and reward
windows, and the monitor's evaluations after the restored step, again). The arithmetic is the one GRPOSettings
refuses explicit values by: the KL ratio and reward collapse tests first judge step window + 1 (rubricrl.train.
rollback), the monitor evaluates at 0, every, 2 x every, ... and compares each with the one `window` back
(rubricrl.train.monitor).
"""

from __future__ import annotations

from pydantic import BaseModel

from rubricrl.config import GRPOSettings
from rubricrl.metrics.rise import MIN_TASKS

NAMES = ("kl_max", "kl_ratio", "reward_collapse", "hack_monitor", "non_finite")


class Net(BaseModel):
    name: str  # one of NAMES
    armed: bool  # can fire within max_steps
    first_step: int | None  # the first step it can fire at (None: never in this run)
    checks: int  # steps it judges; the hack monitor: comparisons
    rule: str  # what it watches with the values used, or why it is off


def _steps(steps: list[int]) -> str:
    return ", ".join(map(str, steps)) if len(steps) <= 8 else f"{steps[0]}, {steps[1]}, {steps[2]}, ..., {steps[-1]}"


def armed_nets(settings: GRPOSettings, monitor_tasks: bool | int = True) -> list[Net]:
    """Each net of a GRPO run under `settings` (null windows and monitor.every sized); `monitor_tasks`: how many
    validation tasks with gold answers the hack monitor has (True: monitor.n_tasks; False or 0: none)."""
    s = settings.sized()
    r, m, n = s.rollback, s.monitor, s.max_steps
    off = "off (grpo.rollback.enabled: false)"
    nets = [Net(name="kl_max", armed=r.enabled, first_step=1 if r.enabled else None, checks=n if r.enabled else 0,
                rule=f"KL above {r.kl_max:g} (or NaN) at any step" if r.enabled else off)]
    for name, key, window, given, watch, on in (
            ("kl_ratio", "kl_window", r.kl_window, settings.rollback.kl_window,
             f"KL above {r.kl_ratio:g} x the median", r.enabled),
            ("reward_collapse", "reward_window", r.reward_window, settings.rollback.reward_window,
             (f"reward below the median - max({r.reward_drop:g} x |median|, {r.reward_spread:g} x the spread)"
              if r.reward_spread else f"reward below the median - {r.reward_drop:g} x |median|")
             if r.reward_drop else "",
             r.enabled and r.reward_drop is not None)):
        checks = max(0, n - window) if on else 0
        sized = ", sized from max_steps" if given is None else ""
        rule = (off if not r.enabled else "off (grpo.rollback.reward_drop: null)" if not on else
                f"{watch} of the last {window} steps ({key} {window}{sized})"
                + ("" if checks else f": needs max_steps >= {window + 1}"))
        nets.append(Net(name=name, armed=checks > 0, first_step=window + 1 if checks else None, checks=checks,
                        rule=rule))
    evaluations = list(range(0, n + 1, m.every))
    # Each evaluation after the first is judged against the one `window` back and (against_first) the first.
    first_judged = 1 if m.against_first else m.window
    count = m.n_tasks if monitor_tasks is True else min(int(monitor_tasks), m.n_tasks)
    few = count < MIN_TASKS  # a paired sign-flip test on fewer tasks can never reach one-sided 2.5%
    comparisons = max(0, len(evaluations) - first_judged) if m.enabled and monitor_tasks and not few else 0
    sized = ", sized from max_steps" if settings.monitor.every is None else ""
    against = f"the evaluation {m.window} back" + (" and the first" if m.against_first else "")
    rule = ("off (grpo.monitor.enabled: false)" if not m.enabled else "off (no validation tasks with gold answers)"
            if not monitor_tasks else
            f"watches only: {count} monitor tasks (grpo.monitor.n_tasks={m.n_tasks}) are below the {MIN_TASKS} a "
            f"rise needs to show beyond noise" if few else
            f"evaluations at steps {_steps(evaluations)} (every {m.every}{sized}), {comparisons} judged against "
            f"{against} on {count} tasks; fires on the reward up with strict field accuracy down, or on "
            f"null-for-present up whatever the reward did, each shown by its paired one-sided 97.5% bound (above "
            f"{m.tolerance:g}, {m.null_tolerance:g})")
    nets.append(Net(name="hack_monitor", armed=comparisons > 0,
                    first_step=first_judged * m.every if comparisons else None, checks=comparisons, rule=rule))
    limit = s.max_skipped_updates + 1  # the guard is always on: it skips every non-finite update
    nets.append(Net(name="non_finite", armed=True, first_step=1, checks=n,
                    rule=f"skips every non-finite update; {limit} in a row roll back"
                         + (f" (not within {n} steps)" if limit > n else f" (from step {limit})")))
    return nets
