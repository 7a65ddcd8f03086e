"""Distil the GRPO policy (teacher) into a smaller student with TRL's GKD (generalized knowledge distillation).

Student: production takes Qwen2.5-3B-Instruct for the 7B teacher (same tokenizer family; TRL's GKD refuses
unequal vocab sizes, and the two Qwen2.5 checkpoints differ in padded vocab rows, so `align_vocab` resizes the
student's embeddings to the teacher's size: the extra rows are never produced by the tokenizer). The CPU
default builds the student from the teacher itself: `build_student` keeps `student_layers` of its decoder
layers, each initialised with the teacher's weights, plus the embeddings, final norm and head, so it starts
close to the teacher and distillation repairs the gaps. Which layers: by measured importance
(`layer_importance`: how much each layer changes the hidden state on the teacher's own answers; the least
important go first, the first and the last layer always stay), or evenly spaced.

Hard prompts: the student is worst exactly where its next-token distribution is furthest from the teacher's,
so `hardness` scores each candidate prompt by the mean KL(teacher || student) over the tokens of the
teacher's own greedy answer (two forward passes, no generation), and the stage keeps the hardest
`distill.n_prompts` of `distill.pool` training prompts. The teacher's answers are generated once and kept as a
DVC output (outputs/distill/teacher.jsonl).

Method: TRL's GKDTrainer on the teacher's answers: the generalized Jensen-Shannon divergence (`beta`) between
the full next-token distributions of teacher and student over the answer tokens, with a fraction `lmbda` of
batches replaced by the student's own samples (on-policy). The CPU default uses lmbda 0 (student generation
is the costliest part on 2 cores), which makes it token-level distillation on the teacher's sequences.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np


def select_layers(n_teacher: int, n_student: int, importance: list[float] | None = None) -> list[int]:
    """`n_student` layer indices of `n_teacher`, the first and the last always kept: the most important of the
    others by `importance` (one value per teacher layer), or evenly spaced without it."""
    if not 1 <= n_student <= n_teacher:
        raise ValueError(f"student_layers must be between 1 and the teacher's {n_teacher} layers, got {n_student}")
    if importance is None:
        return sorted({int(round(x)) for x in np.linspace(0, n_teacher - 1, n_student)})
    if len(importance) != n_teacher:
        raise ValueError(f"importance has {len(importance)} values for {n_teacher} layers")
    ends = [0, n_teacher - 1][:n_student]
    rest = sorted((i for i in range(n_teacher) if i not in ends), key=lambda i: -importance[i])
    return sorted(ends + rest[:n_student - len(ends)])


def layer_importance(model, tokenizer, conversations: list[list[dict]]) -> list[float]:
    """Per decoder layer: its block influence (ShortGPT, Men et al. 2024), 1 - the mean cosine similarity of the
    layer's input and output hidden states over the tokens of the teacher's answers. One forward pass per
    conversation gives every layer's value (skipping each layer in turn costs a pass per layer: 30x here)."""
    import torch

    device = next(model.parameters()).device
    n_layers = model.config.get_text_config().num_hidden_layers
    total = torch.zeros(n_layers, dtype=torch.float64)
    with torch.inference_mode():
        for messages in conversations:
            prompt = tokenizer.apply_chat_template(messages[:-1], tokenize=True, add_generation_prompt=True,
                                                   return_dict=True)["input_ids"]
            full = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True)["input_ids"]
            states = model(input_ids=torch.tensor([full], device=device), output_hidden_states=True,
                           use_cache=False).hidden_states  # embeddings, then each layer's output
            answer = slice(len(prompt), len(full))
            for i in range(n_layers):
                a, b = states[i][0, answer].float(), states[i + 1][0, answer].float()
                total[i] += 1 - torch.nn.functional.cosine_similarity(a, b, dim=-1).mean().item()
    return [float(x) / max(len(conversations), 1) for x in total]


def param_count(model) -> int:
    """Parameters, tied weights counted once."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


def folder_param_count(model_dir: str | Path) -> int:
    """param_count of a saved model, built from its config on the meta device: no weight is read (a 7B teacher
    would be 30 GB of RAM only to be counted)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    with torch.device("meta"):
        return param_count(AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(str(model_dir))))


def named_student(student: str, teacher_dir: str | Path, out_dir: str | Path) -> dict:
    """A student by hub id or folder (production: Qwen2.5-3B-Instruct) saved to out_dir with its own tokenizer, in
    its own dtype; returns {"teacher_params", "student_params", "ratio"}. Its vocabulary may differ from the
    teacher's (Qwen2.5-3B: 151,936 logit rows, 7B: 152,064): `load_pair` and `gkd_train` align it."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    AutoModelForCausalLM.from_pretrained(student).save_pretrained(str(out_dir))
    AutoTokenizer.from_pretrained(student).save_pretrained(str(out_dir))
    t, s = folder_param_count(teacher_dir), folder_param_count(out_dir)
    return {"teacher_params": t, "student_params": s, "ratio": round(s / t, 4)}


def build_student(teacher_dir: str | Path, out_dir: str | Path, n_layers: int,
                  importance: list[float] | None = None) -> dict:
    """Save a student with `n_layers` of the teacher's decoder layers (weights copied; chosen by `importance`, or
    evenly spaced) and the teacher's tokenizer to out_dir; returns {"layers", "teacher_params", "student_params",
    "ratio"}."""
    import copy

    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    teacher = AutoModelForCausalLM.from_pretrained(str(teacher_dir))
    n_teacher = teacher.config.num_hidden_layers
    layers = select_layers(n_teacher, n_layers, importance)
    config = copy.deepcopy(AutoConfig.from_pretrained(str(teacher_dir)))
    config.num_hidden_layers = len(layers)
    if getattr(config, "layer_types", None):
        config.layer_types = [config.layer_types[i] for i in layers]
    student = AutoModelForCausalLM.from_config(config)
    state = teacher.state_dict()
    renamed = {}
    for key, value in state.items():
        if ".layers." in key:
            prefix, rest = key.split(".layers.", 1)
            index, tail = rest.split(".", 1)
            if int(index) not in layers:
                continue
            key = f"{prefix}.layers.{layers.index(int(index))}.{tail}"
        renamed[key] = value
    missing, unexpected = student.load_state_dict(renamed, strict=False)
    missing = [k for k in missing if not (k == "lm_head.weight" and config.tie_word_embeddings)]
    if missing or unexpected:
        raise ValueError(f"student weights do not line up with the teacher's: missing {missing[:5]}, "
                         f"unexpected {unexpected[:5]}")
    student.generation_config = teacher.generation_config
    student.save_pretrained(str(out_dir))
    AutoTokenizer.from_pretrained(str(teacher_dir)).save_pretrained(str(out_dir))
    t, s = param_count(teacher), param_count(student)
    return {"layers": layers, "teacher_layers": n_teacher, "teacher_params": t, "student_params": s,
            "ratio": round(s / t, 4)}


def align_vocab(student, vocab_size: int) -> bool:
    """Resize the student's embeddings (and head) to the teacher's vocab size; True when it changed."""
    if student.config.get_text_config().vocab_size == vocab_size:
        return False
    student.resize_token_embeddings(vocab_size)
    return True


def hardness(teacher, student, tokenizer, conversations: list[list[dict]]) -> list[float]:
    """Mean KL(teacher || student) per conversation (prompt + the teacher's answer), over the answer's tokens.

    Both models must have the same vocabulary size (`align_vocab` the student first: Qwen2.5-7B has 152,064 logit
    rows, 3B 151,936) and sit on the same device; the inputs go to the teacher's device."""
    import torch

    vt, vs = teacher.config.get_text_config().vocab_size, student.config.get_text_config().vocab_size
    if vt != vs:
        raise ValueError(f"teacher and student vocabularies differ ({vt} vs {vs} logit rows): align_vocab first")
    device = next(teacher.parameters()).device
    out = []
    with torch.inference_mode():
        for messages in conversations:
            prompt = tokenizer.apply_chat_template(messages[:-1], tokenize=True, add_generation_prompt=True,
                                                   return_dict=True)["input_ids"]
            full = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True)["input_ids"]
            ids = torch.tensor([full], device=device)
            start = len(prompt) - 1  # logits at position i predict token i + 1: the answer's first token
            t = torch.log_softmax(teacher(input_ids=ids).logits[0, start:-1].float(), -1)
            s = torch.log_softmax(student(input_ids=ids).logits[0, start:-1].float(), -1)
            kl = (t.exp() * (t - s)).sum(-1)
            out.append(float(kl.mean()) if kl.numel() else 0.0)
    return out


def load_pair(teacher_dir: str | Path, student_dir: str | Path, device: str = "cpu", precision: str = "fp32"):
    """Teacher and student on the profile's device and dtype, the student's vocabulary aligned to the teacher's."""
    from transformers import AutoModelForCausalLM

    from rubricrl.inference.hf import placement

    dev, dtype = placement(device, precision)
    teacher = AutoModelForCausalLM.from_pretrained(str(teacher_dir), dtype=dtype).to(dev)
    student = AutoModelForCausalLM.from_pretrained(str(student_dir), dtype=dtype).to(dev)
    align_vocab(student, teacher.config.get_text_config().vocab_size)
    return teacher.eval(), student.eval()


def gkd_config(cfg, output_dir: str, seed: int = 0, save: bool = False):
    """TRL's GKDConfig from the distill settings (DistillParams); save: a checkpoint every cfg.save_steps steps."""
    import os

    import torch

    from rubricrl.inference.hf import resolve_precision

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from trl.experimental.gkd import GKDConfig

    return GKDConfig(output_dir=output_dir,
                     max_steps=cfg.steps, per_device_train_batch_size=cfg.batch_size,
                     gradient_accumulation_steps=cfg.grad_accum, gradient_checkpointing=cfg.gradient_checkpointing,
                     learning_rate=cfg.learning_rate,
                     lmbda=cfg.lmbda, beta=cfg.beta, temperature=cfg.temperature,
                     max_new_tokens=cfg.max_new_tokens, max_length=cfg.max_length, seed=seed,
                     use_cpu=cfg.device == "cpu" or not torch.cuda.is_available(),
                     bf16=resolve_precision(cfg.device, cfg.precision) == "bf16",
                     fp16=False, logging_steps=1,
                     save_strategy="steps" if save else "no", save_steps=cfg.save_steps, save_total_limit=None,
                     report_to=[], lr_scheduler_type="constant", warmup_steps=0)


def gkd_train(student_dir: str | Path, teacher_dir: str | Path, conversations: list[list[dict]], out_dir: str | Path,
              cfg, seed: int = 0, callbacks=(), checkpoints: str | Path | None = None) -> dict:
    """GKD of the student on the teacher's conversations; saves the student to out_dir (written beside it, then
    renamed). cfg: DistillParams. A non-finite update is skipped (rubricrl.train.nonfinite); `callbacks` run after
    that guard. `checkpoints`: a folder for a checkpoint every cfg.save_steps steps (weights, optimizer, RNG, data
    position); training resumes from the newest complete one there, as SFT does (rubricrl.train.sft)."""
    import shutil
    import tempfile

    from rubricrl.train.data import rows_dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerState

    from rubricrl.inference.hf import placement
    from rubricrl.train.checkpoints import (CheckpointCallback, is_final, latest_complete, marker,
                                           publish_checkpoint_model, publish_dir, remove_incomplete, temp_dir_for)
    from rubricrl.train.nonfinite import NonFiniteGuard

    tokenizer = AutoTokenizer.from_pretrained(str(student_dir))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token

    # The student trains with fp32 master weights (bf16 mixed precision when cfg.precision is bf16); the teacher
    # only runs forward, so it is loaded in the profile's dtype (bf16 on a GPU: a 7B teacher in 15 GB, not 30).
    student = AutoModelForCausalLM.from_pretrained(str(student_dir))
    teacher = AutoModelForCausalLM.from_pretrained(str(teacher_dir), dtype=placement(cfg.device, cfg.precision)[1])
    align_vocab(student, teacher.config.get_text_config().vocab_size)
    guard = NonFiniteGuard("distill", cfg.max_skipped_updates)
    # the trainer's scratch folder outside the stage's outputs, or the checkpoints' folder
    work = str(checkpoints) if checkpoints is not None else tempfile.mkdtemp(prefix="rubricrl-gkd-")
    args = gkd_config(cfg, work, seed, save=checkpoints is not None)
    start = None
    if checkpoints is not None:
        remove_incomplete(work)  # a save cut off by a kill
        start = latest_complete(work)
    out = Path(out_dir)
    if start is not None:  # the steps skipped before the kill, as the uninterrupted run lists them
        guard.skipped = list(marker(start).get("skipped", []))
        print(f"distill: resuming GKD from {start.path} (step {start.step}, saved before an interruption)",
              file=sys.stderr)

    def summary(state, seconds: float) -> dict:
        losses = [h["loss"] for h in state.log_history if "loss" in h]
        return {"steps": state.global_step, "train_seconds": round(seconds, 1),
                "first_loss": losses[0] if losses else None, "last_loss": losses[-1] if losses else None,
                "losses": [round(x, 5) for x in losses],
                "skipped_updates": list(guard.skipped), "precision": "bf16" if args.bf16 else "fp32"}

    if start is not None and is_final(start):  # trained to the end, killed before the student was published
        publish_checkpoint_model(start.path, out, Path(student_dir))
        return summary(TrainerState.load_from_json(str(start.path / "trainer_state.json")), 0.0)
    from trl.experimental.gkd import GKDTrainer

    saves = [CheckpointCallback(keep=1, protected_step=lambda: None, extra=lambda: {"skipped": guard.skipped})
             ] if checkpoints is not None else []
    trainer = GKDTrainer(model=student, teacher_model=teacher, args=args,
                         train_dataset=rows_dataset([{"messages": m} for m in conversations]),
                         processing_class=tokenizer, callbacks=[guard, *callbacks, *saves])
    try:
        result = trainer.train(resume_from_checkpoint=str(start.path) if start else None)
    finally:
        if checkpoints is None:
            shutil.rmtree(work, ignore_errors=True)
    tmp = temp_dir_for(out)
    trainer.save_model(str(tmp))
    tokenizer.save_pretrained(str(tmp))
    publish_dir(tmp, out)
    return summary(trainer.state, result.metrics.get("train_runtime", 0))
