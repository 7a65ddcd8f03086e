"""Rubric spec, rule criteria and the scoring engine."""
