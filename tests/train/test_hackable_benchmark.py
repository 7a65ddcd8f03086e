"""benchmarks/hackable_rubric.py runs end to end (--smoke: a tiny random model, 2 steps, the monitor every step):
the hackable rubric variant, the training entry, the timeline and the summary files."""

from __future__ import annotations

import json

import yaml

from tests.train_helpers import load_benchmark


def test_smoke_run_writes_the_summary(tmp_path):
    bench = load_benchmark("hackable_rubric")
    assert bench.main(["--smoke", "--out", str(tmp_path)]) == 0

    rubric = yaml.safe_load((tmp_path / "hackable_rubric.yaml").read_text())
    assert [p["id"] for p in rubric["penalties"]] == ["extra_text", "invented_values"]  # missed_values left out
    s = json.loads((tmp_path / "summary.json").read_text())
    assert (s["steps"], s["global_step"], s["every"], s["error"]) == (2, 2, 1, None)
    monitored = [r["step"] for r in s["timeline"] if r["field_accuracy"] is not None]
    assert monitored == [0, 1, 2] and [r["step"] for r in s["timeline"] if r["reward"] is not None] == [1, 2]
    assert {n["name"]: n["armed"] for n in s["nets"]}["hack_monitor"]
    md = (tmp_path / "summary.md").read_text()
    assert "## Over time" in md and "strict field accuracy" in md and "## Safety nets" in md
    assert "## Safety nets" in (tmp_path / "report.md").read_text()
