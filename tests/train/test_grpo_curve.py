"""benchmarks/grpo_curve.py runs end to end (--smoke: a tiny random model, 2 settings of 2 steps, evaluated at
the end): the paired comparison with SFT per step and part, the step profile and the criterion means."""

from __future__ import annotations

import json

from tests.train_helpers import load_benchmark


def test_smoke_curve_writes_every_setting_and_step(tmp_path):
    bench = load_benchmark("grpo_curve")
    assert bench.main(["--smoke", "--out", str(tmp_path)]) == 0
    curve = json.loads((tmp_path / "curve.json").read_text())
    assert list(curve["settings"]) == ["default", "lr2e-5"] and curve["tasks"] == sum(curve["parts"].values()) > 0
    for s in curve["settings"].values():
        assert list(s["points"]) == ["2"] and len(s["step_seconds"]) == 2 and s["global_step"] == 2
        p = s["points"]["2"]
        assert set(curve["parts"]) | {"all"} <= set(p) and p["all"]["n"] == curve["tasks"]
        assert "format" in p["criteria"] and "faithfulness" in p["criteria"]
    assert curve["sft"]["all"]["diff"] == 0.0  # SFT against itself
    md = (tmp_path / "curve.md").read_text()
    assert "## GRPO - SFT by step" in md and "| lr2e-5 | 2 |" in md and "generation share" in md
    assert curve["metric"] == "strict field accuracy" and "| setting | step | strict field accuracy (all) |" in md
    assert not any((tmp_path / "run" / name).exists() for name in curve["settings"])  # the checkpoints went
