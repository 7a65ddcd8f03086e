"""A GRPO run on the tiny model, slowed per step so a test can kill it mid-run.

    python -m tests.grpo_slow_run MODEL_DIR OUT_DIR MAX_STEPS SLEEP_S   (prints `RESULT <json>` at the end)
"""

import json
import sys
import time

from transformers import TrainerCallback

from rubricrl.train.grpo import train_grpo
from tests.train_helpers import rubric_reward, tiny_settings, tiny_tasks


class SlowSteps(TrainerCallback):
    def __init__(self, seconds: float):
        self.seconds = seconds

    def on_step_end(self, args, state, control, **kwargs):
        time.sleep(self.seconds)


if __name__ == "__main__":
    model_dir, out_dir, max_steps, sleep_s = sys.argv[1:]
    settings = tiny_settings(max_steps=int(max_steps), save_steps=2, save_total_limit=2)
    result = train_grpo(model_dir, tiny_tasks(), out_dir, settings, rubric_reward(),
                        callbacks=[SlowSteps(float(sleep_s))])
    print("RESULT " + json.dumps({k: v for k, v in result.items() if k != "log_history"}), flush=True)
