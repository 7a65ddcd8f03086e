"""The GRPO stage's figures: the reward per criterion, KL with the rollbacks, and the hack monitor."""

from __future__ import annotations

from pathlib import Path

from rubricrl.core.figures import FigureResult, figure, finite, save, xy



def _mark_rollbacks(ax, rollbacks: list[dict], label: bool = True) -> list[int]:
    """A dashed vertical line at each rollback step (red: KL spike or reward collapse; orange: reward hacking;
    purple: non-finite updates)."""
    labelled = set()
    styles = {"reward_hacking": ("rollback: reward hacking", "tab:orange"),
              "nonfinite": ("rollback: non-finite updates", "tab:purple")}
    for r in rollbacks:
        text, color = styles.get(r.get("kind"), ("rollback: KL / reward", "tab:red"))
        ax.axvline(r["step"], color=color, linestyle="--", linewidth=1,
                   label=text if label and text not in labelled else None)
        labelled.add(text)
    return [r["step"] for r in rollbacks]


def plot_reward(history: list[dict], criteria: dict[str, list[tuple[int, float]]], kinds: dict[str, str],
                rollbacks: list[dict], out_dir: Path) -> FigureResult:
    """The total reward (mean and +-std band) and each criterion's mean per step, penalties apart."""
    penalties = sorted(c for c in criteria if kinds.get(c) == "penalty")
    scored = sorted(c for c in criteria if c not in penalties)
    panels = [("total reward", [])] + ([("criteria (unweighted mean score)", scored)] if scored else []) \
        + ([("penalties (amount taken off)", penalties)] if penalties else [])
    fig, axes = figure(len(panels), 1, size=(8.0, 2.6 * len(panels) + 0.6), sharex=True)
    x, y = xy(history, "reward")
    ax = axes[0][0]
    ax.plot(x, y, marker="o", color="tab:blue", label="reward (mean)")
    sx, sd = xy(history, "reward_std")
    if sx and sx == x:
        ax.fill_between(x, [a - b for a, b in zip(y, sd)], [a + b for a, b in zip(y, sd)], alpha=0.2,
                        color="tab:blue", label="+- std over completions")
    for (title, names), row in zip(panels, axes):
        a = row[0]
        for name in names:
            a.plot([s for s, _ in criteria[name]], [v for _, v in criteria[name]], marker=".", label=name)
        a.set_title(title, fontsize=10)
        _mark_rollbacks(a, rollbacks, label=a is ax)
        a.grid(alpha=0.3)
        a.legend(fontsize=7, loc="best")
    axes[-1][0].set_xlabel("step")
    fig.suptitle("GRPO: reward per step, total and per criterion")
    return save(fig, out_dir, "reward", "Reward per criterion over steps",
                 {"criteria": sorted(criteria), "penalties": penalties, "rollback_steps": [r["step"] for r in rollbacks]})


def plot_kl(history: list[dict], rollbacks: list[dict], out_dir: Path) -> FigureResult:
    """KL to the reference per step, beta on a second axis, and a marker at every rollback (the spike's KL)."""
    fig, axes = figure(size=(8.0, 3.8))
    ax = axes[0][0]
    x, y = xy(history, "kl")
    ax.plot(x, y, marker="o", color="tab:blue", label="KL")
    markers = []
    for r in rollbacks:
        hack = r.get("kind") == "reward_hacking"
        if finite(r.get("kl")):
            ax.plot([r["step"]], [r["kl"]], marker="X", markersize=10, linestyle="none",
                    color="tab:orange" if hack else "tab:red")
        ax.annotate(f"restored step {r.get('restored_step', '?')}", (r["step"], 0.03),
                    xycoords=("data", "axes fraction"), rotation=90, va="bottom", ha="right", fontsize=7)
        markers.append({"step": r["step"], "kind": r.get("kind", "kl"), "kl": r.get("kl")})
    _mark_rollbacks(ax, rollbacks)
    bx, by = xy(history, "beta")
    if bx:
        ax2 = ax.twinx()
        ax2.step(bx, by, where="post", color="tab:green", alpha=0.7, label="beta")
        ax2.set_ylabel("beta", color="tab:green")
        ax2.legend(fontsize=7, loc="upper right")
    ax.set_xlabel("step")
    ax.set_ylabel("KL")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    ax.set_title("GRPO: KL to the reference policy, with rollbacks")
    return save(fig, out_dir, "kl", "KL with rollback markers",
                 {"rollback_steps": [m["step"] for m in markers], "markers": markers, "steps": x})


MONITOR_SERIES = (("field_accuracy", "strict field accuracy"), ("exact_object_rate", "exact objects"),
                  ("null_for_present_rate", "null for present"), ("invented_rate", "invented"))


def plot_monitor(monitor: list[dict], rollbacks: list[dict], out_dir: Path) -> FigureResult:
    """The hack monitor: its rubric reward against the strict metrics (a rising reward with a falling
    accuracy is what it stops)."""
    fig, axes = figure(2, 1, size=(8.0, 5.4), sharex=True)
    top, bottom = axes[0][0], axes[1][0]
    x, y = xy(monitor, "reward")
    top.plot(x, y, marker="o", color="tab:purple", label="monitor reward (rubric)")
    top.set_title("rubric reward on the monitor's fixed validation slice (greedy)", fontsize=10)
    for key, label in MONITOR_SERIES:
        mx, my = xy(monitor, key)
        if mx:
            bottom.plot(mx, my, marker="o", label=label)
    bottom.set_title("strict true metric (shares no code with the reward)", fontsize=10)
    bottom.set_ylim(-0.02, 1.02)
    hacks = [r for r in rollbacks if r.get("kind") == "reward_hacking"]
    for a in (top, bottom):
        _mark_rollbacks(a, hacks, label=a is top)
        a.grid(alpha=0.3)
        a.legend(fontsize=7, loc="best")
    bottom.set_xlabel("step")
    fig.suptitle("GRPO reward-hacking monitor")
    return save(fig, out_dir, "monitor", "Reward-hacking monitor",
                 {"steps": x, "hack_steps": [r["step"] for r in hacks]})


