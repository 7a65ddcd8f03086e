"""The eval_task stage's report section: models side by side per test part, and their paired differences."""

from __future__ import annotations

from rubricrl.core.tables import ci, table
from rubricrl.metrics.paired import describe
from rubricrl.metrics.true_metric import free_text_columns

PAIRED_COLUMNS = (("reward", "reward"), ("field_accuracy", "strict field accuracy"),
                  ("null_for_present_rate", "null for present"), ("invented_rate", "invented"),
                  ("exact_object_rate", "exact objects"))


def comparison_markdown(summary: dict[str, dict[str, dict]], paired: list[dict],
                        max_total: float | dict[str, float] | None = None,
                        figures: bool = False, kinds: set[str] = frozenset({"extraction"})) -> str:
    """`summary[model][part]` is a headline dict (task eval group: reward, strict metrics, rates); models in
    training order (base, sft, grpo). `paired` is paired_comparisons' output. `figures`: reference models.png and
    paired.png beside the report. `kinds`: the task kinds evaluated (free text reads the strict columns as its
    checklist's). `max_total`: the rubric's highest total, or per task kind (a mixed rubric's differ)."""
    if isinstance(max_total, dict):
        out_of = " of " + " or ".join(f"{v:g} ({k.replace('_', '-')} tasks)" for k, v in max_total.items()) \
            if len(max_total) > 1 else (f" of {next(iter(max_total.values())):g}" if max_total else "")
    else:
        out_of = f" of {max_total:g}" if max_total else ""
    free_text = " " + free_text_columns(kinds) if free_text_columns(kinds) else ""
    parts = list(next(iter(summary.values())))
    rows = []
    for part in parts:
        for model, groups in summary.items():
            g = groups.get(part)
            if not g:
                continue
            st = g.get("strict") or {}
            rows.append([model, part, g["n"], ci(g["reward_mean"], g["reward_ci"], 2),
                         ci(st.get("field_accuracy"), st.get("field_accuracy_ci"), 3), st.get("exact_object_rate"),
                         st.get("null_for_present_rate"), st.get("invented_rate"), f"{g['json_valid_rate']:.2f}",
                         f"{g['extra_text_rate']:.2f}"])
    lines = ["# Task evaluation: models compared", "",
             f"Greedy decoding on the test split. Reward is the rubric total{out_of}. The strict metrics come from "
             "`rubricrl.metrics.strict`, which shares no code with the reward: a field is right only when it equals "
             "the gold value after Unicode/case/space normalisation; a null for a stated value is wrong. Per-model "
             f"intervals are bootstrap 95% over tasks.{free_text}", "",
             table(["model", "part", "n", "reward", "strict field accuracy", "exact objects", "null for present",
                    "invented", "valid JSON", "extra text"], rows)]
    if figures:
        lines += ["", "![Models side by side, with 95% intervals](models.png)"]
    keyed = {(r["model"], r["vs"], r["part"], r["metric"]): r for r in paired}
    combos = list(dict.fromkeys((r["model"], r["vs"], r["part"]) for r in paired))
    lines += ["", "## Paired differences", "",
              "Model minus the earlier model on the same tasks: difference, 95% score interval of the per-task "
              "differences, and the two-sided sign-flip permutation p. Rates are micro (fields of all tasks).", "",
              table(["comparison", "part"] + [h for _, h in PAIRED_COLUMNS],
                    [[f"{model} - {vs}", part] + [describe(keyed[(model, vs, part, m)])
                                                  if (model, vs, part, m) in keyed else "-" for m, _ in PAIRED_COLUMNS]
                     for model, vs, part in combos])]
    if figures:
        lines += ["", "![Paired differences on the same tasks, with 95% intervals](paired.png)"]
    lines += ["", "## What these sizes can show", "",
              "Strict field accuracy: n paired tasks, the width of the 95% interval of the difference, and the "
              "minimum detectable difference (MDE: 80% power, two-sided 95%): a smaller true difference is likely "
              "to read as inconclusive.", "",
              table(["comparison", "part", "n", "interval width", "MDE"],
                    [[f"{model} - {vs}", part, r["n"], f"{r['ci'][1] - r['ci'][0]:.3f}" if r.get("ci") else "-",
                      f"{r['mde']:.3f}" if r.get("mde") is not None else "-"]
                     for model, vs, part in combos if (r := keyed.get((model, vs, part, "field_accuracy")))])]
    return "\n".join(lines) + "\n"
