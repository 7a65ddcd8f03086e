"""The reward functions GRPO gets: the rubric's per-criterion functions; general rows checked or held medium.

Each component function keeps its criterion's name, so TRL still logs `rewards/<criterion>/mean` and
the weighted sum is still the total. Rows whose task_id starts with "general:" are not scored by the
rubric:
- a row with a verifiable constraint (`check`, rubricrl.train.general) gets every criterion at the top of
  its range when IFEval's checker passes the completion and at the bottom when it fails (penalties 0),
  so its group is ranked by whether each completion followed the instruction;
- the others get every criterion's midpoint (total 7.5 of 15 for json_extraction). A whole group gets
  the same value, so its group-relative advantage is 0: such prompts shape the policy only through the
  KL term, which is what keeps general skills close to the reference.
The logged criterion means include these values; `rubric/task_reward` (TRL logs it next to them) is the
mean total over real tasks only, and `rubric/general_if_pass` the pass rate of the checked general rows.
"""

from __future__ import annotations

import json
from typing import Callable

from rubricrl.reward.functions import RubricReward, completion_text
from rubricrl.train.general import GENERAL_PREFIX


class TrainingReward:
    def __init__(self, reward: RubricReward):
        self.reward = reward
        rubric = reward.scorer.rubric
        medium = {c.id: (c.range[0] + c.range[1]) / 2 for c in rubric.criteria}
        medium.update({p.id: 0.0 for p in rubric.penalties})
        # (when the check fails, when it passes) per component
        checked = {c.id: (c.range[0], c.range[1]) for c in rubric.criteria}
        checked.update({p.id: (0.0, 0.0) for p in rubric.penalties})
        funcs, self.weights = reward.component_funcs()
        self.funcs: list[Callable] = [self._wrap(f, medium[f.__name__], checked[f.__name__], first=i == 0)
                                      for i, f in enumerate(funcs)]
        self._last_ids: list[str] = []
        self._last_texts: list[str] = []

    def _wrap(self, func: Callable, medium: float, checked: tuple[float, float], first: bool) -> Callable:
        def component(prompts=None, completions=None, **columns) -> list[float]:
            ids = [str(t) for t in columns["task_id"]]
            n = len(ids)
            keep = [i for i, t in enumerate(ids) if not t.startswith(GENERAL_PREFIX)]
            out = [medium] * n
            checks = columns.get("check") or [""] * n
            passes = {i: if_passed(checks[i], completion_text(completions[i])) for i in range(n)
                      if i not in keep and checks[i]}
            for i, ok in passes.items():
                out[i] = checked[ok]
            if first and passes and "log_metric" in columns:
                columns["log_metric"]("rubric/general_if_pass", sum(passes.values()) / len(passes))
            if keep:
                # Per-row columns are cut down to the task rows; TRL's extras (trainer_state, log_metric) pass as is.
                sub = {k: [v[i] for i in keep] if isinstance(v, list) and len(v) == n else v
                       for k, v in columns.items()}
                kept = [completions[i] for i in keep]
                scores = func(prompts=[prompts[i] for i in keep], completions=kept, **sub)
                for i, score in zip(keep, scores, strict=True):
                    out[i] = score
                self._last_ids, self._last_texts = sub["task_id"], [completion_text(c) for c in kept]
                if first and "log_metric" in columns:
                    totals = [r.total for r in self.reward.last_results]
                    columns["log_metric"]("rubric/task_reward", sum(totals) / len(totals))
            return out

        component.__name__ = func.__name__
        return component

    def sample_rows(self, limit: int) -> list[dict]:
        """Up to `limit` of the last scored task completions with every criterion's score and reason."""
        results = self.reward.last_results
        if len(results) != len(self._last_ids):
            return []  # the scorer was last used outside training: its results are not these completions
        rows = []
        for task_id, text, result in list(zip(self._last_ids, self._last_texts, results, strict=True))[:limit]:
            row = {"task_id": task_id, "completion": text, "total": result.total}
            for c in result.components:
                row[f"{c.id}.score"] = c.score
                row[f"{c.id}.reason"] = c.reason
            rows.append(row)
        return rows


def if_passed(check: str, response: str) -> bool:
    """IFEval's strict verdict (if-verifiable) on a general row's constraint (`check`: JSON from general_rows)."""
    from rubricrl.general import ifeval

    spec = json.loads(check)
    item = {"id": "general", "prompt": "", "instruction_id_list": spec["instruction_id_list"], "kwargs": spec["kwargs"]}
    return ifeval.score(item, response)["score"] == 1.0
