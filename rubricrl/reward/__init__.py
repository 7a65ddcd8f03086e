"""The reward: the rubric spec and its loader, rule criteria and penalties, the scoring engine, source grounding,
the judges (grounded, openai) and the reward functions TRL calls. Imports core and config only."""
