"""Drafting and calibrating a rubric before training on it: corruptions and hack probes, the calibration report
(separation, consistency, on-policy agreement, economics) and the gate GRPO checks."""
