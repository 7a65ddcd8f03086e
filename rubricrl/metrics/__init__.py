"""The independent true metric (strict field accuracy and its rates), bootstrap intervals and paired comparisons.
Shares no code with the reward: imports core only (tests/metrics/test_strict_metric.py and tests/test_layers.py)."""
