"""Evaluation of a policy on extraction tasks: greedy generation, rubric and strict gold metrics, reports.

Submodules are imported where used: `rubricrl.evals.strict` (the independent true metric) is a leaf
that the rubric calibration imports without pulling in generation or scoring.
"""
