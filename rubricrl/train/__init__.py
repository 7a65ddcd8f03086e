"""Training: the SFT baseline and GRPO on the rubric reward (TRL), with checkpoints, KL-spike rollback and the
reward-hacking monitor. Entry points: `rubricrl.train.sft.train_sft`, `rubricrl.train.grpo.train_grpo`; their
settings are `rubricrl.config.SFTSettings` / `GRPOSettings`. Importing this package imports nothing heavy."""
