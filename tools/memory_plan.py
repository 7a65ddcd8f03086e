"""The memory each production stage needs per GPU, estimated from the models' parameter counts, the optimizer, the
precision and the ZeRO stage in configs/ (README, "Memory": its table is this module's output, checked by
tests/flow/test_memory_plan.py).

    python -m tools.memory_plan          # the README table

Parameter counts come from the real architectures (tools.miniature.PRODUCTION_MODELS, built on the meta
device: 7.62B, 3.09B, 72.7B). Bytes per parameter of a full fine-tune in bf16 mixed precision with AdamW: 2
(bf16 weights) + 2 (bf16 gradients) + 4 (fp32 master weights) + 8 (Adam's two fp32 moments) = 16; ZeRO-3
partitions all of it over the processes. A frozen model (GRPO's reference, the distillation teacher, the judge)
costs 2 bytes a parameter in bf16. Activations: rubricrl.train.memory's `step_bytes` in bf16 (what autograd keeps a
layer, counted with saved-tensor hooks: with gradient checkpointing each layer's input, plus one layer's full set
while backward runs), and for SFT and GRPO TRL's fused LM head (tiles of at most 4,096 positions, no full logits);
distillation's loss holds the student's logits x 3 (logits, log-softmax, gradient) and the teacher's, micro-batch x
tokens x vocab x 4 bytes each. vLLM's colocated engine takes its
share of the GPU (TRL's vllm_gpu_memory_utilization, 0.3). The estimate is an upper-end sizing, not a
measurement: no production stage has run on GPUs here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
GB = 1e9
FULL_FT = 16  # bytes a parameter: bf16 weights + bf16 grads + fp32 master + fp32 Adam m and v
FROZEN = 2  # bf16
VLLM_SHARE = 0.3  # TRL's default vllm_gpu_memory_utilization (colocate)
GPU_GB = 80  # the GPU the plan is sized for: an 80 GB H100 / A100 (an H200 has 141 GB)


def param_count(name: str) -> int:
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    from tools.miniature import PRODUCTION_MODELS

    shape = {k: v for k, v in PRODUCTION_MODELS[name].items() if k != "model_type"}
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(Qwen2Config(**shape))
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


@dataclass(frozen=True)
class Row:
    stage: str
    what: str
    gpus: int
    per_gpu_gb: float  # weights, gradients, optimizer, frozen models, vLLM, activations

    @property
    def fits(self) -> bool:
        return self.per_gpu_gb <= GPU_GB


def _activations(shape: dict, micro_batch: int, tokens: int, checkpointing: bool, scored: int) -> float:
    """A bf16 micro-step's activations and TRL's fused LM head over `scored` positions a sequence
    (rubricrl.train.memory, the estimate the one-GPU profile sizes its GRPO micro-batch with)."""
    from transformers import Qwen2Config

    from rubricrl.train.memory import step_bytes

    config = Qwen2Config(**{k: v for k, v in shape.items() if k != "model_type"})
    return step_bytes(config, micro_batch, tokens, scored, checkpointing, dtype_bytes=2) / GB


def plan(root: Path = ROOT) -> list[Row]:
    from rubricrl.config import load_params
    from tools.miniature import PRODUCTION_MODELS

    params = load_params(root / "params.yaml", [root / "configs/production.yaml"])
    accel = yaml.safe_load((root / params.grpo.accelerate_config).read_text())
    zero = json.loads((root / params.grpo.deepspeed).read_text())["zero_optimization"]["stage"]
    n = int(accel["num_processes"])
    policy, student, judge = params.policy.model, params.distill.student, params.scoring.openai_judge.model
    P, S, J = param_count(policy), param_count(student), param_count(judge)
    shape, sshape = PRODUCTION_MODELS[policy], PRODUCTION_MODELS[student]
    share = n if zero == 3 else 1
    sft, grpo, d = params.sft, params.grpo, params.distill
    if grpo.per_device_batch_size == "auto":
        raise SystemExit("memory_plan: configs/production.yaml's grpo.per_device_batch_size is auto (sized on the card "
                         "at run time); the plan sizes a given micro-batch: set a number")
    rows = [
        Row("sft", f"{policy.split('/')[-1]} full fine-tune, ZeRO-{zero} over {n}", n,
            P * FULL_FT / share / GB + _activations(shape, sft.per_device_batch_size, sft.max_length,
                                                    sft.gradient_checkpointing, sft.max_length)),
        Row("sft", f"{policy.split('/')[-1]} full fine-tune, one GPU", 1,
            P * FULL_FT / GB + _activations(shape, sft.per_device_batch_size, sft.max_length,
                                            sft.gradient_checkpointing, sft.max_length)),
        Row("grpo", f"policy + bf16 reference, ZeRO-{zero} over {n}, vLLM colocated", n,
            (P * FULL_FT + (P * FROZEN if grpo.beta > 0 else 0)) / share / GB + VLLM_SHARE * GPU_GB
            + _activations(shape, grpo.per_device_batch_size, grpo.max_prompt_length + grpo.max_completion_length,
                           grpo.gradient_checkpointing, grpo.max_completion_length)),
        Row("distill", f"{student.split('/')[-1]} full fine-tune + bf16 {policy.split('/')[-1]} teacher", 1,
            (S * FULL_FT + P * FROZEN) / GB
            + _activations(sshape, d.batch_size, d.max_length, d.gradient_checkpointing, 0)
            + d.batch_size * d.max_length * shape["vocab_size"] * 4 * 4 / GB),  # student's (x3) and teacher's logits
        Row("judge", f"{judge.split('/')[-1]} bf16, vLLM tensor-parallel 4 (+ KV cache)", 4, J * FROZEN / 4 / GB),
        Row("eval", f"{policy.split('/')[-1]} bf16 greedy generation", 1, P * FROZEN / GB),
    ]
    return rows


def table(rows: list[Row]) -> str:
    lines = ["| stage | what | GPUs | per GPU (GB) | fits 80 GB |", "|---|---|---|---|---|"]
    lines += [f"| {r.stage} | {r.what} | {r.gpus} | {r.per_gpu_gb:.0f} | {'yes' if r.fits else '**no**'} |"
              for r in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    print(table(plan()))
