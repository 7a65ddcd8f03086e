"""Training: SFT baseline and GRPO on the rubric reward.

Entry points (import them from their modules; this package stays light so that reading settings
does not import torch):
    rubricrl.train.sft.train_sft(model_dir, train_tasks, out_dir, settings) -> out_dir
    rubricrl.train.grpo.train_grpo(model_dir, train_tasks, out_dir, settings, reward, callbacks=(), resume=True) -> dict
    tasks/grpo.py, the grpo stage: `python tasks/grpo.py` or `accelerate launch ... tasks/grpo.py`
"""

from rubricrl.train.settings import GRPOSettings, LoRASettings, RollbackSettings, SFTSettings

__all__ = ["GRPOSettings", "LoRASettings", "RollbackSettings", "SFTSettings"]
