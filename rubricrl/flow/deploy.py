"""The pull steps of the GPU deployment (prefect.yaml, rubricrl-gpu), run in the flow run's container before the
flow, and the checks of a production profile they and the dev tool tools/production_check.py share.

- `secret_to_env`: the judge's key from a Prefect Secret block into the flow run's environment, never written
  into the deployment nor logged.
- `preflight`: refuse, in seconds rather than after SFT, a run this machine cannot do: the checkout's params
  (with any RUBRICRL_PARAMS_OVERLAY) are no GPU profile that passes `profile_problems`, a GPU package is missing,
  fewer GPUs than accelerate starts processes, or the judge's key is not set.
Heavy imports stay inside the functions.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import urlparse

PROFILE, ACCELERATE = "configs/production.yaml", "configs/accelerate_zero3.yaml"
SECRET_STEP, PREFLIGHT_STEP = "rubricrl.flow.deploy.secret_to_env", "rubricrl.flow.deploy.preflight"
LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def _value(enum_or_str) -> str:
    return str(getattr(enum_or_str, "value", enum_or_str))


def accelerate_config(path: Path):
    """The accelerate config as `accelerate launch --config_file` reads it (unknown keys are an error there too)."""
    from accelerate.commands.config.config_args import load_config_from_file

    try:
        return load_config_from_file(str(path)), []
    except Exception as err:  # noqa: BLE001 - whatever accelerate rejects, say so
        return None, [f"{path}: accelerate cannot read it: {type(err).__name__}: {err}"]


def profile_problems(params, accel) -> list[str]:
    """The production profile: an openai judge that is not the policy, with its key in a variable; SFT and GRPO
    relaunched under accelerate's config on the GPUs with the ZeRO-3 JSON that accelerate uses too, in the same
    precision; vLLM rollouts colocated;
    GRPO's generation batch in whole groups on accelerate's number of processes."""
    problems = []
    judge = params.scoring.judge_config()
    if judge is None:
        problems.append("scoring.judge: production judges with the openai judge (vLLM), not the grounded one")
    else:
        if judge.model == params.policy.model:
            problems.append(f"scoring.openai_judge.model: {judge.model} is the policy; the judge must be another model")
        if not judge.api_key_env:
            problems.append("scoring.openai_judge.api_key_env: name the variable holding the judge's key")
    ds_file = accel.deepspeed_config.get("deepspeed_config_file") if accel and accel.deepspeed_config else None
    mixed = {"bf16": "bf16", "fp32": "no", "auto": "bf16"}  # auto: bf16 on the production GPUs (all have it)
    for name, s in (("sft", params.sft), ("grpo", params.grpo)):
        if s.device == "cpu":
            problems.append(f"{name}.device: cpu leaves the GPUs idle; production uses auto")
        if s.accelerate_config != ACCELERATE:
            problems.append(f"{name}.accelerate_config: {s.accelerate_config}, but production relaunches the stage "
                            f"under {ACCELERATE} (a full fine-tune of the policy does not fit one GPU)")
        if not s.deepspeed:
            problems.append(f"{name}.deepspeed: production trains with ZeRO-3 ({ds_file})")
        elif s.deepspeed != ds_file:
            problems.append(f"{name}.deepspeed: {s.deepspeed} is not the JSON of {ACCELERATE} ({ds_file})")
        if accel and mixed[s.precision] != _value(accel.mixed_precision):
            problems.append(f"{name}.precision: {s.precision}, but {ACCELERATE} has mixed_precision "
                            f"{accel.mixed_precision}")
    g = params.grpo
    if not g.use_vllm:
        problems.append("grpo.use_vllm: production generates the rollouts with vLLM")
    elif g.vllm_mode == "server" and judge and urlparse(judge.base_url or "").hostname in LOOPBACK \
            and urlparse(judge.base_url or "").port == 8000:
        problems.append("grpo.vllm_mode: server makes TRL look for `trl vllm-serve` on port 8000 (the settings "
                        "have no other address), where scoring.openai_judge.base_url has the judge")
    step = g.step_completions or g.per_device_batch_size * g.grad_accum  # completions a step on each process
    if accel and (step * accel.num_processes) % g.num_generations:
        problems.append(f"grpo: the generation batch step_completions (per_device_batch_size x grad_accum) x "
                        f"{accel.num_processes} processes = {step * accel.num_processes} is no "
                        f"multiple of num_generations {g.num_generations}")
    return problems


def accelerate_problems(accel, root: Path) -> list[str]:
    """accelerate launches DeepSpeed on the GPUs, with a ZeRO stage 3 JSON that exists."""
    if accel is None:
        return []
    problems = []
    if _value(accel.distributed_type) != "DEEPSPEED":
        problems.append(f"{ACCELERATE}: distributed_type {accel.distributed_type}, not DEEPSPEED")
    if accel.use_cpu:
        problems.append(f"{ACCELERATE}: use_cpu is true")
    if not accel.num_processes or accel.num_processes < 1:
        problems.append(f"{ACCELERATE}: num_processes {accel.num_processes}")
    ds_file = (accel.deepspeed_config or {}).get("deepspeed_config_file")
    if not ds_file or not (root / ds_file).is_file():
        return problems + [f"{ACCELERATE}: deepspeed_config.deepspeed_config_file {ds_file!r} does not exist"]
    try:
        stage = json.loads((root / ds_file).read_text(encoding="utf-8"))["zero_optimization"]["stage"]
    except (ValueError, KeyError, TypeError) as err:
        return problems + [f"{ds_file}: no zero_optimization.stage ({type(err).__name__}: {err})"]
    if stage != 3:
        problems.append(f"{ds_file}: zero_optimization.stage {stage}, not 3 (ZeRO-3)")
    return problems


def secret_to_env(block: str, env: str) -> dict[str, str]:
    """Put the value of the Prefect Secret block `block` into the variable `env` of this flow run, and so of every
    stage it starts. Nothing is written into the deployment, and the value is never returned or logged. A variable
    already set (given to the container some other way) is kept."""
    if os.environ.get(env):
        return {"env": env, "source": "environment"}
    from prefect.blocks.system import Secret

    try:
        secret = Secret.load(block)
    except ValueError:  # Prefect's "Unable to find block document named ..."
        raise RuntimeError(f"no Prefect Secret block {block!r} for {env}; create it (README, Production on a GPU "
                           f"work pool)") from None
    value = secret.value.get_secret_value()
    if not isinstance(value, str) or not value:
        raise RuntimeError(f"Prefect Secret block {block!r} holds no text for {env}")
    os.environ[env] = value
    return {"env": env, "source": f"secret block {block}"}


def preflight_problems(root: Path, gpus: int, installed, environ) -> list[str]:
    """Why this machine cannot run the pipeline on the checkout at root: its params.yaml is no GPU profile that
    passes the profile checks, a GPU package is missing, fewer GPUs than accelerate's processes, no judge key."""
    from rubricrl.config import load_params
    from rubricrl.core.errors import ConfigError

    try:
        params = load_params(root / "params.yaml")
    except ConfigError as err:
        return [str(err)]
    accel, problems = accelerate_config(root / ACCELERATE)
    problems += accelerate_problems(accel, root) + profile_problems(params, accel)
    needed = (["vllm"] if params.grpo.use_vllm else []) + (
        ["deepspeed"] if params.grpo.deepspeed or params.sft.deepspeed else [])
    problems += [f"{p} is not installed (the gpu extra)" for p in needed if not installed(p)]
    if accel and gpus < accel.num_processes:
        problems.append(f"{gpus} GPU(s) visible, {ACCELERATE} starts {accel.num_processes} processes")
    judge = params.scoring.judge_config()
    if judge and judge.api_key_env and not environ.get(judge.api_key_env):
        problems.append(f"{judge.api_key_env} is not set (the judge's key; {SECRET_STEP} sets it)")
    panel = params.scoring.checklist_judge
    if panel and panel.api_key_env and not environ.get(panel.api_key_env) and not (
            judge and judge.api_key_env == panel.api_key_env):
        problems.append(f"{panel.api_key_env} is not set (scoring.checklist_judge.api_key_env, the checklist judge's key)")
    return problems


def preflight(project: str = ".") -> dict[str, int]:
    """Refuse, in seconds rather than after SFT, a run this machine cannot do (preflight_problems)."""
    import importlib.util

    import torch  # noqa: PLC0415 - the container has CUDA torch

    gpus = torch.cuda.device_count()
    problems = preflight_problems(Path(project), gpus, lambda p: importlib.util.find_spec(p) is not None, os.environ)
    if problems:
        raise RuntimeError(f"preflight of {Path(project).resolve()}/params.yaml failed:\n"
                           + "\n".join(f"- {p}" for p in problems))
    return {"gpus": gpus}
