"""The run report: one Markdown and one self-contained HTML page per pipeline run, with PNG plots.

Read from what the stages wrote (the `report` stage in dvc.yaml, `tasks/report.py`):
- outputs/grpo/history.csv: reward, KL and beta per step; per-criterion means when it has
  `rewards/<criterion>/mean` columns. Rollbacks: the `rollbacks` input, else `rollbacks.json` beside
  history.csv. Until the grpo stage writes those columns and that file as declared outputs, the
  per-criterion series and the rollbacks are read from `train_result.json` beside history.csv, which
  train_grpo writes (not a declared DVC output, so not a dep of the report stage).
- outputs/grpo/monitor.csv: the reward-hacking monitor (rubric reward next to the strict metric).
- outputs/rubric/report.json: calibration (probe margins, per-component AUC, Spearman, on-policy).
- outputs/eval/summary.csv and metrics/eval.json: models side by side with 95% CIs, paired differences.
- metrics/*.json: the headline numbers of each stage.
- the export stage's metrics file (model export retention: size, accuracy, retention, speed per artifact)
  while there is no such file.

A missing input gives a short "Not produced yet" note in its section, never an error; an input that
cannot be read gives a note with the reason. Figures use matplotlib's object API (no pyplot, no
global backend state) and are written as PNG; the HTML embeds them as base64, so it is one file.
Nothing here is slow: the whole report takes a few seconds.
"""

from __future__ import annotations

import base64
import csv
import html
import json
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from rubricrl.atomic import write_text

NOT_PRODUCED = "Not produced yet"
CRITERION_KEY = re.compile(r"^rewards/(?P<name>[^/]+)/mean$")  # TRL's per-criterion log key
GRPO_RESULT = "train_result.json"  # stopgap source, beside history.csv (see the module docstring)
GRPO_ROLLBACKS = "rollbacks.json"  # the declared grpo output this report reads first, beside history.csv
DPI = 100


# --- inputs ---------------------------------------------------------------------------------------

@dataclass
class ReportInputs:
    """Where each input lives. None or a missing file: that section says 'Not produced yet'."""

    history: str | Path | None = None  # outputs/grpo/history.csv
    monitor: str | Path | None = None  # outputs/grpo/monitor.csv
    rollbacks: str | Path | None = None  # outputs/grpo/rollbacks.json once grpo declares it; None: looked up beside history
    rubric: str | Path | None = None  # outputs/rubric/report.json
    eval_summary: str | Path | None = None  # outputs/eval/summary.csv
    eval_metrics: str | Path | None = None  # metrics/eval.json
    metrics: dict[str, str | Path] = field(default_factory=dict)  # stage -> metrics/<stage>.json (not eval's)
    export: str | Path | None = None  # the export stage's metrics file (metrics/export.json)


def _path(p: str | Path | None) -> Path | None:
    return None if p is None else Path(p)


def _exists(p: str | Path | None) -> bool:
    return p is not None and Path(p).is_file()


def _cell(v: str | None):
    """A CSV cell as a number when it is one; '' (write_csv's NaN/None) as None."""
    if v is None or v == "":
        return None
    try:
        x = float(v)
    except ValueError:
        return v
    return int(x) if x.is_integer() and re.fullmatch(r"[+-]?\d+", v.strip()) else x


def read_csv(path: str | Path) -> list[dict]:
    with open(path, encoding="utf-8", newline="") as f:
        return [{k: _cell(v) for k, v in row.items()} for row in csv.DictReader(f)]


def read_json(path: str | Path):
    return json.loads(Path(path).read_text(encoding="utf-8"))


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def grpo_criteria(history: list[dict], history_path: Path | None) -> tuple[dict[str, list[tuple[int, float]]], str]:
    """Per-criterion mean reward per step: {criterion: [(step, value)]}, and where it came from."""
    cols = {c: m.group("name") for c in (history[0] if history else {}) if (m := CRITERION_KEY.match(c))}
    rows, source = history, "history.csv"
    if not cols and history_path is not None and (history_path.parent / GRPO_RESULT).is_file():
        log = read_json(history_path.parent / GRPO_RESULT).get("log_history", [])
        rows = [e for e in log if "step" in e and "reward" in e]
        cols = {k: m.group("name") for e in rows for k in e if (m := CRITERION_KEY.match(k))}
        source = GRPO_RESULT
    series = {name: [(r["step"], r[col]) for r in rows if _finite(r.get(col))] for col, name in sorted(cols.items())}
    return {k: v for k, v in series.items() if v}, source


def grpo_rollbacks(history_path: Path | None, rollbacks_path: Path | None = None) -> tuple[list[dict] | None, str | None]:
    """The rollbacks (step, kind, kl, reward, old_beta, new_beta, restored_step, reason) and their source file:
    `rollbacks_path`, else rollbacks.json or train_result.json beside history.csv; None when no file records them."""
    candidates = [rollbacks_path] if rollbacks_path is not None else []
    if history_path is not None:
        candidates += [history_path.parent / GRPO_ROLLBACKS, history_path.parent / GRPO_RESULT]
    for p in candidates:
        if p.is_file():
            data = read_json(p)
            rollbacks = data.get("rollbacks") if isinstance(data, dict) else data
            if isinstance(rollbacks, list):
                return rollbacks, str(p)
    return None, None


# --- figures --------------------------------------------------------------------------------------

@dataclass
class FigureResult:
    """A written PNG and the data a test (or a reader) may check, e.g. the rollback marker steps."""

    name: str
    path: Path
    title: str
    data: dict = field(default_factory=dict)


def _figure(nrows: int = 1, ncols: int = 1, size=(8.0, 4.0), **kw):
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, **kw)
    return fig, axes


def _save(fig, out_dir: Path, name: str, title: str, data: dict | None = None) -> FigureResult:
    from matplotlib.ticker import MaxNLocator

    for ax in fig.axes:
        if ax.get_xlabel() == "step":  # steps are whole numbers
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    path = Path(out_dir) / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI)
    return FigureResult(name, path, title, data or {})


def _xy(rows: list[dict], key: str) -> tuple[list, list]:
    pts = [(r["step"], r[key]) for r in rows if _finite(r.get("step")) and _finite(r.get(key))]
    return [p[0] for p in pts], [p[1] for p in pts]


def _mark_rollbacks(ax, rollbacks: list[dict], label: bool = True) -> list[int]:
    """A dashed vertical line at each rollback step (red: KL spike or reward collapse; orange: reward hacking)."""
    labelled = set()
    for r in rollbacks:
        hack = r.get("kind") == "reward_hacking"
        text = "rollback: reward hacking" if hack else "rollback: KL / reward"
        ax.axvline(r["step"], color="tab:orange" if hack else "tab:red", linestyle="--", linewidth=1,
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
    fig, axes = _figure(len(panels), 1, size=(8.0, 2.6 * len(panels) + 0.6), sharex=True)
    x, y = _xy(history, "reward")
    ax = axes[0][0]
    ax.plot(x, y, marker="o", color="tab:blue", label="reward (mean)")
    sx, sd = _xy(history, "reward_std")
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
    return _save(fig, out_dir, "reward_criteria", "Reward per criterion over steps",
                 {"criteria": sorted(criteria), "penalties": penalties, "rollback_steps": [r["step"] for r in rollbacks]})


def plot_kl(history: list[dict], rollbacks: list[dict], out_dir: Path) -> FigureResult:
    """KL to the reference per step, beta on a second axis, and a marker at every rollback (the spike's KL)."""
    fig, axes = _figure(size=(8.0, 3.8))
    ax = axes[0][0]
    x, y = _xy(history, "kl")
    ax.plot(x, y, marker="o", color="tab:blue", label="KL")
    markers = []
    for r in rollbacks:
        hack = r.get("kind") == "reward_hacking"
        if _finite(r.get("kl")):
            ax.plot([r["step"]], [r["kl"]], marker="X", markersize=10, linestyle="none",
                    color="tab:orange" if hack else "tab:red")
        ax.annotate(f"restored step {r.get('restored_step', '?')}", (r["step"], 0.03),
                    xycoords=("data", "axes fraction"), rotation=90, va="bottom", ha="right", fontsize=7)
        markers.append({"step": r["step"], "kind": r.get("kind", "kl"), "kl": r.get("kl")})
    _mark_rollbacks(ax, rollbacks)
    bx, by = _xy(history, "beta")
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
    return _save(fig, out_dir, "kl", "KL with rollback markers",
                 {"rollback_steps": [m["step"] for m in markers], "markers": markers, "steps": x})


MONITOR_SERIES = (("field_accuracy", "strict field accuracy"), ("exact_object_rate", "exact objects"),
                  ("null_for_present_rate", "null for present"), ("invented_rate", "invented"))


def plot_monitor(monitor: list[dict], rollbacks: list[dict], out_dir: Path) -> FigureResult:
    """The hack monitor: its rubric reward against the strict metrics (a rising reward with a falling
    accuracy is what it stops)."""
    fig, axes = _figure(2, 1, size=(8.0, 5.4), sharex=True)
    top, bottom = axes[0][0], axes[1][0]
    x, y = _xy(monitor, "reward")
    top.plot(x, y, marker="o", color="tab:purple", label="monitor reward (rubric)")
    top.set_title("rubric reward on the monitor's fixed validation slice (greedy)", fontsize=10)
    for key, label in MONITOR_SERIES:
        mx, my = _xy(monitor, key)
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
    return _save(fig, out_dir, "hack_monitor", "Reward-hacking monitor",
                 {"steps": x, "hack_steps": [r["step"] for r in hacks]})


def plot_calibration(report: dict, out_dir: Path) -> FigureResult:
    """Probe margins below gold (mean and worst, against rubric.min_margin) and each component's ROC AUC."""
    probes = report.get("probes") or {}
    comps = report.get("components") or {}
    fig, axes = _figure(1, 2, size=(10.0, max(3.5, 0.28 * max(len(probes), len(comps), 1) + 1.5)))
    left, right = axes[0]
    names = sorted(probes, key=lambda k: probes[k].get("mean_margin") or 0)
    colors = ["tab:blue" if probes[n].get("pass", True) else "tab:red" for n in names]
    left.barh(names, [probes[n].get("mean_margin") or 0 for n in names], color=colors, alpha=0.7, label="mean margin")
    worst = [probes[n]["worst_margin"] if _finite(probes[n].get("worst_margin")) else math.nan for n in names]
    left.plot(worst, names, "k|", markersize=10, label="worst margin")
    if _finite(report.get("min_margin")):
        left.axvline(report["min_margin"], color="tab:red", linestyle="--", linewidth=1, label="min_margin (gate)")
    left.set_title("probes: reward below gold", fontsize=10)
    left.tick_params(axis="y", labelsize=7)
    left.legend(fontsize=7, loc="lower right")
    cnames = list(comps)
    aucs = [comps[c].get("auc") if _finite(comps[c].get("auc")) else 0 for c in cnames]
    ccolors = ["tab:green" if comps[c].get("keep", True) else "tab:gray" for c in cnames]
    right.barh(cnames, aucs, color=ccolors, alpha=0.8)
    right.axvline(0.5, color="k", linestyle=":", linewidth=1)
    right.set_xlim(0, 1.05)
    right.set_title("component ROC AUC: gold vs targeted (grey: dropped)", fontsize=10)
    right.tick_params(axis="y", labelsize=8)
    fig.suptitle("Rubric calibration")
    failed = [n for n in names if not probes[n].get("pass", True)]
    return _save(fig, out_dir, "calibration", "Rubric calibration",
                 {"probes": names, "failed": failed, "components": cnames})


def _errbar(ax, labels: list[str], mean: list, lo: list, hi: list, color: str) -> None:
    ys = list(range(len(labels)))
    xerr = [[(m - l) if _finite(l) and _finite(m) else 0 for m, l in zip(mean, lo)],
            [(h - m) if _finite(h) and _finite(m) else 0 for m, h in zip(mean, hi)]]
    ax.errorbar([m if _finite(m) else math.nan for m in mean], ys, xerr=xerr, fmt="o", color=color, capsize=3)
    ax.set_yticks(ys, labels, fontsize=8)
    if not ax.yaxis_inverted():  # the first row on top (axes with sharey are inverted once for all)
        ax.invert_yaxis()
    ax.grid(alpha=0.3, axis="x")


def plot_models(summary: list[dict], out_dir: Path) -> FigureResult:
    """Rubric reward and strict field accuracy per model and test part, with their bootstrap 95% CIs."""
    parts = list(dict.fromkeys(str(r.get("part")) for r in summary))
    rows = sorted(summary, key=lambda r: (str(r.get("part")) != "all", parts.index(str(r.get("part")))))  # stable
    labels = [str(r.get("label") or f"{r.get('model')}/{r.get('part')}") for r in rows]
    fig, axes = _figure(1, 2, size=(10.0, 0.35 * len(rows) + 1.8), sharey=True)
    _errbar(axes[0][0], labels, [r.get("reward_mean") for r in rows], [r.get("reward_ci_low") for r in rows],
            [r.get("reward_ci_high") for r in rows], "tab:blue")
    axes[0][0].set_title("rubric reward (95% CI)", fontsize=10)
    _errbar(axes[0][1], labels, [r.get("field_accuracy") for r in rows], [r.get("field_accuracy_ci_low") for r in rows],
            [r.get("field_accuracy_ci_high") for r in rows], "tab:green")
    axes[0][1].set_title("strict field accuracy (95% CI)", fontsize=10)
    fig.suptitle("Evaluation on the test split: models side by side")
    return _save(fig, out_dir, "models", "Models compared", {"labels": labels})


PAIRED_PLOTTED = (("reward", "rubric reward"), ("field_accuracy", "strict field accuracy"))


def plot_paired(paired: list[dict], out_dir: Path) -> FigureResult:
    """Paired differences (model minus the earlier model, same tasks) with bootstrap 95% CIs."""
    combos = list(dict.fromkeys((r["model"], r["vs"], r["part"]) for r in paired))
    labels = [f"{m} - {v} ({p})" for m, v, p in combos]
    keyed = {(r["model"], r["vs"], r["part"], r["metric"]): r for r in paired}
    fig, axes = _figure(1, len(PAIRED_PLOTTED), size=(10.0, 0.35 * len(combos) + 1.8), sharey=True)
    for (metric, title), ax in zip(PAIRED_PLOTTED, axes[0]):
        got = [keyed.get((*c, metric)) or {} for c in combos]
        _errbar(ax, labels, [g.get("diff") for g in got], [(g.get("ci") or [None, None])[0] for g in got],
                [(g.get("ci") or [None, None])[1] for g in got], "tab:blue" if metric == "reward" else "tab:green")
        ax.axvline(0, color="k", linewidth=1)
        ax.set_title(f"{title}: paired difference (95% CI)", fontsize=10)
    fig.suptitle("Paired differences on the same test tasks")
    return _save(fig, out_dir, "paired", "Paired model differences", {"comparisons": labels})


# --- the document: blocks rendered as Markdown and as HTML ----------------------------------------

@dataclass
class Block:
    kind: str  # h1, h2, p, note, list, table, img
    content: object


def _fmt(v, digits: int = 3) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if not math.isfinite(v):
            return "-"
        if v != 0 and abs(v) < 10 ** -digits:
            return f"{v:.2g}"
        text = f"{v:.{digits}f}"
        return text.rstrip("0").rstrip(".") if "." in text else text
    return str(v)


def _ci(mean, lo, hi, digits: int = 3) -> str:
    if not _finite(mean):
        return "-"
    if not (_finite(lo) and _finite(hi)):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def _diff(r: dict | None, digits: int = 3) -> str:
    if not r or not _finite(r.get("diff")):
        return "-"
    ci = r.get("ci") or [None, None]
    text = f"{r['diff']:+.{digits}f}"
    if _finite(ci[0]) and _finite(ci[1]):
        text += f" [{ci[0]:+.{digits}f}, {ci[1]:+.{digits}f}]"
    p = r.get("p")
    if _finite(p):
        text += ", p<0.001" if 0 < p < 0.001 else f", p={p:.3f}"
    return text


def _md_cell(v) -> str:
    return str(v).replace("|", "\\|").replace("\n", " ")


def to_markdown(blocks: list[Block]) -> str:
    out = []
    for b in blocks:
        if b.kind == "h1":
            out += [f"# {b.content}", ""]
        elif b.kind == "h2":
            out += [f"## {b.content}", ""]
        elif b.kind == "p":
            out += [str(b.content), ""]
        elif b.kind == "note":
            out += [f"> {b.content}", ""]
        elif b.kind == "list":
            out += [f"- {item}" for item in b.content] + [""]
        elif b.kind == "table":
            headers, rows = b.content
            out.append("| " + " | ".join(_md_cell(h) for h in headers) + " |")
            out.append("|" + "---|" * len(headers))
            out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
            out.append("")
        elif b.kind == "img":
            fig: FigureResult = b.content
            out += [f"![{fig.title}]({fig.path.name})", ""]
    return "\n".join(out).rstrip() + "\n"


def _inline(text: str) -> str:
    """HTML of one line of the report's Markdown: escaped, with `code` and **bold**."""
    parts = re.split(r"(`[^`]*`)", str(text))
    out = []
    for part in parts:
        if part.startswith("`") and part.endswith("`") and len(part) >= 2:
            out.append(f"<code>{html.escape(part[1:-1])}</code>")
        else:
            out.append(re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", html.escape(part)))
    return "".join(out)


CSS = """body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1050px;margin:2em auto;padding:0 1em;
color:#222;line-height:1.45}h1{border-bottom:2px solid #ccc}h2{margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:0.8em 0;font-size:0.9em}th,td{border:1px solid #ccc;padding:3px 8px;text-align:left}
th{background:#f3f3f3}tr:nth-child(even) td{background:#fafafa}img{max-width:100%;border:1px solid #eee}
code{background:#f3f3f3;padding:0 3px}.note{border-left:4px solid #e0a800;background:#fff8e1;padding:0.4em 0.8em}"""


def to_html(blocks: list[Block], title: str) -> str:
    """One self-contained page: every image inline as a base64 data URI."""
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>"]
    for b in blocks:
        if b.kind in ("h1", "h2"):
            out.append(f"<{b.kind}>{_inline(b.content)}</{b.kind}>")
        elif b.kind == "p":
            out.append(f"<p>{_inline(b.content)}</p>")
        elif b.kind == "note":
            out.append(f'<p class="note">{_inline(b.content)}</p>')
        elif b.kind == "list":
            out.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in b.content) + "</ul>")
        elif b.kind == "table":
            headers, rows = b.content
            out.append("<table><thead><tr>" + "".join(f"<th>{_inline(h)}</th>" for h in headers) + "</tr></thead><tbody>")
            out += ["<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in row) + "</tr>" for row in rows]
            out.append("</tbody></table>")
        elif b.kind == "img":
            fig: FigureResult = b.content
            data = base64.b64encode(fig.path.read_bytes()).decode("ascii")
            out.append(f'<figure><img alt="{html.escape(fig.title)}" src="data:image/png;base64,{data}">'
                       f"<figcaption>{html.escape(fig.title)}</figcaption></figure>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


# --- sections -------------------------------------------------------------------------------------

def _missing(what: str, path, producer: str) -> Block:
    where = f"`{path}`" if path is not None else "no file configured"
    return Block("note", f"**{NOT_PRODUCED}:** {what} ({where}; written by the `{producer}` stage).")


class _Ctx:
    """What the sections share: the inputs, the figure folder, and what was read already."""

    def __init__(self, inputs: ReportInputs, out_dir: Path):
        self.inputs, self.out_dir = inputs, Path(out_dir)
        self.figures: dict[str, FigureResult] = {}
        self.metrics: dict[str, dict] = {}
        for stage, p in inputs.metrics.items():
            if _exists(p):
                try:
                    self.metrics[stage] = read_json(p)
                except (OSError, ValueError) as err:
                    print(f"report: warning: cannot read {p}: {err}", file=sys.stderr)
        self.eval: dict | None = None  # metrics/eval.json: {"models": ..., "paired": [...]}
        if _exists(inputs.eval_metrics):
            try:
                self.eval = read_json(inputs.eval_metrics)
            except (OSError, ValueError) as err:
                print(f"report: warning: cannot read {inputs.eval_metrics}: {err}", file=sys.stderr)
        self.history: list[dict] | None = None
        self.rollbacks: list[dict] | None = None
        self.rollback_source: str | None = None
        self.kinds: dict[str, str] = {}  # criterion -> rule/judge/penalty, from the calibration report
        if _exists(inputs.rubric):
            try:
                comps = read_json(inputs.rubric).get("components") or {}
                self.kinds = {k: v.get("kind") for k, v in comps.items() if isinstance(v, dict)}
            except (OSError, ValueError, AttributeError):
                pass

    def add(self, fig: FigureResult) -> Block:
        self.figures[fig.name] = fig
        return Block("img", fig)


def _rollback_table(rollbacks: list[dict]) -> Block:
    rows = [[r.get("step"), r.get("kind", "kl"), _fmt(r.get("kl")), _fmt(r.get("reward")),
             f"{_fmt(r.get('old_beta'))} -> {_fmt(r.get('new_beta'))}", r.get("restored_step"),
             str(r.get("reason", ""))[:200]] for r in rollbacks]
    return Block("table", (["step", "kind", "KL", "reward", "beta", "restored step", "reason"], rows))


def section_training(ctx: _Ctx) -> list[Block]:
    inp, blocks = ctx.inputs, []
    if not _exists(inp.history):
        return [_missing("the per-step training history", inp.history, "grpo")]
    hist_path = _path(inp.history)
    ctx.history = read_csv(hist_path)
    ctx.rollbacks, ctx.rollback_source = grpo_rollbacks(hist_path, _path(inp.rollbacks))
    criteria, source = grpo_criteria(ctx.history, hist_path)
    if not ctx.history:
        return [Block("note", f"**{NOT_PRODUCED}:** `{hist_path}` has no steps.")]
    steps = [r["step"] for r in ctx.history if _finite(r.get("step"))]
    rewards = [r["reward"] for r in ctx.history if _finite(r.get("reward"))]
    text = f"{len(steps)} logged steps"
    if rewards:
        text += f"; training reward {rewards[0]:.3f} at the first step, {rewards[-1]:.3f} at the last"
    blocks.append(Block("p", text + ". A step's reward and KL are measured before its update (TRL). "
                        "Criterion means are unweighted; a penalty's value is the amount taken off."))
    blocks.append(ctx.add(plot_reward(ctx.history, criteria, ctx.kinds, ctx.rollbacks or [], ctx.out_dir)))
    if not criteria:
        blocks.append(Block("note", f"**{NOT_PRODUCED}:** per-criterion series: `{hist_path}` has no "
                            f"`rewards/<criterion>/mean` columns and there is no `{GRPO_RESULT}` beside it."))
    elif source != "history.csv":
        blocks.append(Block("p", f"Per-criterion series read from `{hist_path.parent / source}` "
                            "(history.csv has no per-criterion columns)."))
    if criteria:
        rows = [[c, ctx.kinds.get(c, "-"), _fmt(s[0][1]), _fmt(s[-1][1])] for c, s in criteria.items()]
        blocks.append(Block("table", (["criterion", "kind", "first step", "last step"], rows)))
    return blocks


def section_kl(ctx: _Ctx) -> list[Block]:
    inp, blocks = ctx.inputs, []
    if ctx.history is None:
        if _exists(inp.history):
            return [Block("note", f"`{inp.history}` could not be read (see the section above).")]
        return [_missing("the per-step KL", inp.history, "grpo")]
    if not ctx.history:
        return [Block("note", f"**{NOT_PRODUCED}:** no steps were logged.")]
    rollbacks = ctx.rollbacks or []
    blocks.append(ctx.add(plot_kl(ctx.history, rollbacks, ctx.out_dir)))
    if ctx.rollbacks is None:
        n = (ctx.metrics.get("grpo") or {}).get("rollbacks")
        if n == 0:
            blocks.append(Block("p", f"Rollbacks: none (`{ctx.inputs.metrics.get('grpo')}`)."))
        else:
            blocks.append(Block("note", f"**{NOT_PRODUCED}:** the rollback details (no `{inp.rollbacks or GRPO_ROLLBACKS}`"
                                f", nor `{GRPO_RESULT}` beside `{inp.history}`); rollbacks counted in the grpo metrics: "
                                f"{_fmt(n)}."))
    elif rollbacks:
        blocks.append(Block("p", f"{len(rollbacks)} rollback(s), marked on the plot (red: KL spike or reward collapse; "
                            f"orange: reward hacking suspected). Source: `{ctx.rollback_source}`."))
        blocks.append(_rollback_table(rollbacks))
    else:
        blocks.append(Block("p", "Rollbacks: none; KL and reward stayed within the rollback bounds."))
    return blocks


def section_monitor(ctx: _Ctx) -> list[Block]:
    inp, blocks = ctx.inputs, []
    if not _exists(inp.monitor):
        return [_missing("the hack monitor's evaluations", inp.monitor, "grpo")]
    rows = read_csv(inp.monitor)
    if not rows:
        return [Block("note", f"**{NOT_PRODUCED}:** the monitor made no evaluation "
                               "(grpo.monitor.enabled: false, or no validation tasks).")]
    blocks.append(Block("p", "Greedy answers to a fixed slice of validation tasks: the rubric reward next to the strict "
                        "true metric. A rising reward with a falling accuracy is reward hacking; the monitor rolls back."))
    blocks.append(ctx.add(plot_monitor(rows, ctx.rollbacks or [], ctx.out_dir)))
    keys = ["reward"] + [k for k, _ in MONITOR_SERIES]
    blocks.append(Block("table", (["step", "monitor reward"] + [h for _, h in MONITOR_SERIES],
                                  [[r.get("step")] + [_fmt(r.get(k)) for k in keys] for r in rows])))
    return blocks


def section_calibration(ctx: _Ctx) -> list[Block]:
    inp, blocks = ctx.inputs, []
    if not _exists(inp.rubric):
        return [_missing("the calibration report", inp.rubric, "rubric")]
    report = read_json(inp.rubric)
    rew = report.get("reward") or {}
    pol = report.get("on_policy") or {}
    fails = report.get("gate_failures") or []
    blocks.append(Block("p", f"Rubric `{report.get('rubric', '?')}`: {report.get('n_items', '?')} answers on "
                        f"{report.get('n_tasks', '?')} validation tasks (gold and corruptions), and samples of the "
                        f"policy GRPO starts from. Gate: **{'failed' if fails else 'passed'}**."))
    rows = [["corruption set", _fmt(rew.get("spearman_accuracy")), _fmt(rew.get("kendall_tau")),
             _fmt(rew.get("pairwise_accuracy")), _fmt(rew.get("n_pairs"))]]
    if pol:
        rows.append(["policy samples", _fmt(pol.get("spearman_accuracy")), "-", _fmt(pol.get("pairwise_accuracy")),
                     _fmt(pol.get("n_pairs"))])
    blocks.append(Block("table", (["set", "Spearman (reward vs strict accuracy)", "Kendall tau",
                                   "pairwise accuracy", "pairs"], rows)))
    if report.get("probes") or report.get("components"):
        blocks.append(ctx.add(plot_calibration(report, ctx.out_dir)))
    if fails:
        blocks.append(Block("list", [f"gate failure: {f}" for f in fails]))
    if report.get("dropped"):
        blocks.append(Block("p", "Dropped components: " + ", ".join(f"`{d}`" for d in report["dropped"])))
    return blocks


def section_models(ctx: _Ctx) -> list[Block]:
    inp, blocks = ctx.inputs, []
    if not _exists(inp.eval_summary):
        blocks.append(_missing("the per-model evaluation summary", inp.eval_summary, "eval_task"))
    else:
        rows = read_csv(inp.eval_summary)
        if rows:
            blocks.append(Block("p", "Greedy decoding on the test split; bootstrap 95% intervals over tasks. Per-model "
                                "intervals do not compare models: the paired differences below do."))
            blocks.append(ctx.add(plot_models(rows, ctx.out_dir)))
            blocks.append(Block("table", (["model", "part", "n", "reward [95% CI]", "strict field accuracy [95% CI]",
                                           "valid JSON"],
                                          [[r.get("model"), r.get("part"), r.get("n"),
                                            _ci(r.get("reward_mean"), r.get("reward_ci_low"), r.get("reward_ci_high"), 2),
                                            _ci(r.get("field_accuracy"), r.get("field_accuracy_ci_low"),
                                                r.get("field_accuracy_ci_high")),
                                            _fmt(r.get("json_valid_rate"))] for r in rows])))
        else:
            blocks.append(Block("note", f"**{NOT_PRODUCED}:** `{inp.eval_summary}` has no rows."))
    return blocks


def section_paired(ctx: _Ctx) -> list[Block]:
    inp, blocks = ctx.inputs, []
    if ctx.eval is None:
        return [_missing("the paired differences", inp.eval_metrics, "eval_task")]
    paired = (ctx.eval if isinstance(ctx.eval, dict) else {}).get("paired") or []
    if not paired:
        return [Block("note", f"**{NOT_PRODUCED}:** `{inp.eval_metrics}` has no paired differences.")]
    blocks.append(Block("p", "Model minus the earlier model on the same test tasks: difference, bootstrap 95% CI of the "
                        "per-task differences, and the two-sided sign-flip permutation p."))
    blocks.append(ctx.add(plot_paired(paired, ctx.out_dir)))
    keyed = {(r["model"], r["vs"], r["part"], r["metric"]): r for r in paired}
    combos = list(dict.fromkeys((r["model"], r["vs"], r["part"]) for r in paired))
    metrics = ("reward", "field_accuracy", "null_for_present_rate", "invented_rate")
    blocks.append(Block("table", (["comparison", "part", "reward", "strict field accuracy", "null for present", "invented"],
                                  [[f"{m} - {v}", p] + [_diff(keyed.get((m, v, p, k))) for k in metrics]
                                   for m, v, p in combos])))
    return blocks


EXPORT_TITLE = "Export retention"


def section_export(ctx: _Ctx) -> list[Block]:
    """The export stage's metrics file: per source model and artifact, size, strict field accuracy, retention
    (artifact / source), reward, tokens/s against HF fp32, and whether it verified."""
    p = ctx.inputs.export
    if not _exists(p):
        return [Block("note", f"**{NOT_PRODUCED}:** export retention (how much of the trained model's "
                               "quality an exported model keeps) comes from the export stage's metrics file"
                               + (f" `{p}`" if p is not None else ", and no file is configured") + ".")]
    data = read_json(p)
    sources = {k: v for k, v in data.items() if isinstance(v, dict) and isinstance(v.get("artifacts"), dict)} \
        if isinstance(data, dict) else {}
    if not sources:  # another shape: its scalars as dotted keys
        flat = _flatten(data) if isinstance(data, dict) else {}
        return [Block("table", (["metric", "value"], [[k, _fmt(v)] for k, v in flat.items()]))]
    rows = []
    for name, r in sources.items():
        src, hf = r.get("source") or {}, r.get("hf_tokens_per_s")
        rows.append([name, "HF fp32 (source)", _fmt(r.get("source_size_mb")), _fmt(src.get("field_accuracy")), "1",
                     _fmt(src.get("reward")), _fmt(hf), "1.00x", ""])
        for kind, a in r["artifacts"].items():
            if "error" in a:
                rows.append([name, kind, "", "", "", "", "", "", f"verification failed: {str(a['error'])[:160]}"])
                continue
            speed = a.get("tokens_per_s")
            rows.append([name, kind, _fmt(a.get("size_mb")), _fmt(a.get("field_accuracy")),
                         _fmt((a.get("retention") or {}).get("field_accuracy")), _fmt(a.get("reward")), _fmt(speed),
                         f"{speed / hf:.2f}x" if speed and hf else "-",
                         ("verified" if a.get("verified") else "not verified")
                         + ("" if a.get("meets_goal", True) else ", retention goal missed")])
    return [Block("table", (["source", "artifact", "size MB", "field acc", "retention", "reward", "tokens/s",
                             "vs HF fp32", "status"], rows))]


def _flatten(d: dict, prefix: str = "", depth: int = 8) -> dict:
    """Scalars of a nested dict as dotted keys, at most `depth` levels down."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            if depth > 1:
                out.update(_flatten(v, f"{prefix}{k}.", depth - 1))
        elif isinstance(v, (int, float, str, bool)) or v is None:
            out[f"{prefix}{k}"] = v
    return out


def section_glance(ctx: _Ctx) -> list[Block]:
    """The headline numbers of each stage, from metrics/*.json."""
    m = ctx.metrics
    items = []
    if "data" in m:
        items.append("data: " + ", ".join(f"{split} {v.get('n')}" for split, v in m["data"].items() if isinstance(v, dict)))
    if "sft" in m:
        items.append(f"SFT: {_fmt(m['sft'].get('train_tasks'))} train tasks, {_fmt(m['sft'].get('wall_seconds'))} s")
    if "rubric" in m:
        r = m["rubric"]
        items.append(f"rubric gate: {'passed' if r.get('gate_passed') else 'FAILED'}; Spearman vs strict accuracy "
                     f"{_fmt(r.get('spearman_accuracy'))} (corruptions), {_fmt(r.get('policy_spearman_accuracy'))} "
                     f"(policy samples); worst probe margin {_fmt(r.get('worst_probe_margin'))}")
    if "grpo" in m:
        g = m["grpo"]
        items.append(f"GRPO: {_fmt(g.get('steps'))} steps, reward {_fmt(g.get('reward_first'))} -> "
                     f"{_fmt(g.get('reward_last'))}, {_fmt(g.get('rollbacks'))} rollback(s) "
                     f"({_fmt(g.get('hack_rollbacks'))} for reward hacking), final beta {_fmt(g.get('final_beta'))}, "
                     f"{_fmt(g.get('wall_seconds'))} s")
    paired = (ctx.eval if isinstance(ctx.eval, dict) else {}).get("paired") or []
    for r in paired:
        if r.get("part") == "all" and r.get("metric") in ("reward", "field_accuracy"):
            items.append(f"eval: {r['model']} - {r['vs']}, {r['metric'].replace('_', ' ')}: {_diff(r)}")
    blocks = []
    missing = [f"`{p}`" for s, p in ctx.inputs.metrics.items() if s not in m]
    if ctx.eval is None:
        missing.append(f"`{ctx.inputs.eval_metrics}`")
    if items:
        blocks.append(Block("list", items))
    if missing:
        blocks.append(Block("note", f"**{NOT_PRODUCED}:** " + ", ".join(missing)))
    return blocks


def section_metrics(ctx: _Ctx) -> list[Block]:
    """Every scalar of the stages' metrics files (eval's are in the sections above)."""
    rows = [[stage, k, _fmt(v)] for stage, data in ctx.metrics.items() if isinstance(data, dict)
            for k, v in _flatten(data, depth=2).items()]  # not data.json's counts per domain and language
    if not rows:
        return [Block("note", f"**{NOT_PRODUCED}:** no stage metrics file.")]
    return [Block("table", (["stage", "metric", "value"], rows))]


SECTIONS: tuple[tuple[str, Callable[[_Ctx], list[Block]]], ...] = (  # (heading, body), in this order
    ("At a glance", section_glance),
    ("GRPO training: reward per criterion", section_training),
    ("KL and rollbacks", section_kl),
    ("Reward-hacking monitor", section_monitor),
    ("Rubric calibration", section_calibration),
    ("Models compared", section_models),
    ("Paired differences", section_paired),
    (EXPORT_TITLE, section_export),
    ("All stage metrics", section_metrics),
)


@dataclass
class Report:
    markdown: str
    html: str
    figures: dict[str, FigureResult]
    files: list[Path]


def build_report(inputs: ReportInputs, out_dir: str | Path, meta: dict | None = None,
                 title: str = "RubricRL run report") -> Report:
    """Write report.md, report.html and the PNGs into out_dir; returns what was written."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    ctx = _Ctx(inputs, out_dir)
    blocks = [Block("h1", title)]
    if meta:
        blocks.append(Block("p", "; ".join(f"{k}: `{v}`" for k, v in meta.items())))
    for heading, section in SECTIONS:
        blocks.append(Block("h2", heading))
        try:
            blocks += section(ctx)
        except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError) as err:
            # An input in an unexpected shape: say so in the report instead of failing the pipeline run.
            print(f"report: warning: section '{heading}': {type(err).__name__}: {err}", file=sys.stderr)
            blocks.append(Block("note", f"This section could not be built from its input: {type(err).__name__}: {err}"))
    md, page = to_markdown(blocks), to_html(blocks, title)
    write_text(out_dir / "report.md", md)
    write_text(out_dir / "report.html", page)
    files = [out_dir / "report.md", out_dir / "report.html"] + [f.path for f in ctx.figures.values()]
    return Report(md, page, ctx.figures, files)
