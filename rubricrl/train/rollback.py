"""KL-spike and reward-collapse rollback.

A `SpikeDetector` judges each logged step; `RollbackMonitor` (a TrainerCallback) stops training on
the first bad step without saving it. The driver (`rubricrl.train.grpo`) then restores the last good
checkpoint with `resume_from_checkpoint` (weights, optimizer, scheduler, RNG), raises beta and goes on.

Timing: the KL and reward TRL logs at step s are measured on the weights after step s-1 (the
completions and the KL of step s are computed before its optimizer update). A bad value at step s
therefore condemns checkpoint s-1 as well, so the last good checkpoint is the newest one at or
before step s-2 (none: the initial model).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field

from transformers import TrainerCallback

from rubricrl.core.errors import TrainingError  # noqa: F401  (re-exported: training code raises it from here)
from rubricrl.config import RollbackSettings


@dataclass
class Spike:
    step: int
    kl: float | None
    reward: float | None
    reason: str
    restore_step: int | None = None  # None: the last good step for a KL/reward spike (last_good_step)
    kind: str = "kl"  # kl (KL spike or reward collapse) or reward_hacking (rubricrl.train.monitor)
    examples: list = field(default_factory=list)  # reward hacking: the worst examples


@dataclass
class Rollback:
    step: int  # the step whose KL or reward was bad
    kl: float | None
    reward: float | None
    reason: str
    old_beta: float
    new_beta: float
    checkpoint: str | None  # the restored checkpoint folder; None = restarted from the initial model
    restored_step: int
    kind: str = "kl"
    examples: list = field(default_factory=list)
    stopped: bool = False  # the run ended on the restored state (monitor.after_trip: stop) instead of training on

    def to_dict(self) -> dict:
        return asdict(self)


def last_good_step(spike_step: int) -> int:
    """The newest step whose weights are known good when step `spike_step` logged a bad value."""
    return max(0, spike_step - 2)


class SpikeDetector:
    """Remembers (step, kl, reward) of the good steps and judges new ones against them."""

    def __init__(self, settings: RollbackSettings):
        if settings.kl_window is None or settings.reward_window is None:
            raise ValueError("the rollback windows are not sized: pass GRPOSettings.sized().rollback")
        self.s = settings
        self.history: list[tuple[int, float | None, float | None]] = []

    @property
    def last_ok_step(self) -> int:
        return self.history[-1][0] if self.history else 0

    def judge(self, kl: float | None, reward: float | None) -> str | None:
        """Why this step is bad, or None when it is fine."""
        s = self.s
        if kl is not None:
            if math.isnan(kl) or kl > s.kl_max:
                return f"KL {kl:.4g} above the bound {s.kl_max:g}"
            kls = [k for _, k, _ in self.history[-s.kl_window:] if k is not None]
            if len(kls) >= s.kl_window:
                median = max(statistics.median(kls), s.kl_median_floor)
                if kl > s.kl_ratio * median:
                    return f"KL {kl:.4g} above {s.kl_ratio:g} x the recent median {median:.4g}"
        if reward is not None and s.reward_drop is not None:
            if math.isnan(reward):
                return "reward is NaN"
            rewards = [r for _, _, r in self.history[-s.reward_window:] if r is not None]
            if len(rewards) >= s.reward_window:
                median = statistics.median(rewards)
                spread = statistics.stdev(rewards)  # the window holds 2 or more (reward_window >= 2)
                noise = s.reward_spread * spread if s.reward_spread is not None else 0.0
                if reward < median - max(s.reward_drop * abs(median), noise):
                    within = f" (beyond {s.reward_spread:g} x its spread {spread:.3g})" if noise else ""
                    return f"reward {reward:.4g} collapsed below the recent median {median:.4g}{within}"
        return None

    def record(self, step: int, kl: float | None, reward: float | None) -> None:
        self.history.append((step, kl, reward))

    def forget_after(self, step: int) -> None:
        self.history = [h for h in self.history if h[0] <= step]

    def seed(self, log_history: list[dict]) -> None:
        """Refill the windows from a checkpoint's trainer_state.json log history (after a crash)."""
        self.history = [(e["step"], e.get("kl"), e.get("reward")) for e in log_history
                        if "step" in e and ("kl" in e or "reward" in e)]


class RollbackMonitor(TrainerCallback):
    """Stops training on the first bad step and keeps that step from being saved as a checkpoint.

    Callbacks passed before it to the trainer see (and may change) the logs first.
    """

    def __init__(self, detector: SpikeDetector, enabled: bool = True):
        self.detector = detector
        self.enabled = enabled
        self.spike: Spike | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        self.spike = None

    def trip(self, spike: Spike) -> None:
        """Another watcher (the hack monitor) found this step bad; it stops training itself."""
        self.spike = spike

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or ("kl" not in logs and "reward" not in logs):
            return  # the end-of-training summary and other non-step logs
        if self.spike is not None:
            return  # already condemned (the hack monitor); this step is forgotten on rollback
        kl, reward = logs.get("kl"), logs.get("reward")
        reason = self.detector.judge(kl, reward) if self.enabled else None
        if reason is None:
            self.detector.record(state.global_step, kl, reward)
            return
        self.spike = Spike(state.global_step, kl, reward, reason)
        control.should_training_stop = True
        control.should_save = False  # the weights of a bad step must never become a checkpoint
