"""Task evaluation of a model: greedy answers, the rubric reward and the strict true metric per test part, with
bootstrap intervals (the eval_task stage, distillation and export verification use it)."""
