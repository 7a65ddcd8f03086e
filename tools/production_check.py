"""The production (GPU) path: a dry run of it on any machine, and the pull steps of its Prefect deployment.

`python -m tools.production_check [ROOT]` checks what can be checked of README "Production on a GPU work pool"
with no GPU, no network and neither vLLM nor DeepSpeed installed: prefect.yaml's deployments against the flow
and the Docker worker, the production profile, the accelerate and DeepSpeed ZeRO-3 configs, the Dockerfile,
the README's commands and numbers, and that no secret is written down. Every check returns its problems (empty:
fine), each naming the file and key; tests/flow/test_production_dry_run.py runs them, and breaks each input once.

`secret_to_env` and `preflight` are pull steps of the rubricrl-gpu deployment: Prefect runs them in the flow
run's container before the flow. Heavy imports stay inside the functions.
"""

from __future__ import annotations

import importlib
import inspect
import re
import shlex
import sys
from pathlib import Path
from urllib.parse import urlparse

import yaml

from rubricrl.flow.deploy import (  # noqa: F401  (re-exported: the checks of the pull steps' own inputs)
    ACCELERATE, LOOPBACK, PREFLIGHT_STEP, PROFILE, SECRET_STEP, _value, accelerate_config, accelerate_problems,
    preflight, preflight_problems, profile_problems, secret_to_env,
)

FLOW_ENTRYPOINT, FLOW_NAME = "flows/pipeline.py:pipeline", "rubricrl-pipeline"
CPU_DEPLOYMENT, GPU_DEPLOYMENT = "rubricrl-cpu", "rubricrl-gpu"
DOCKERFILE = "docker/Dockerfile.gpu"
README_SECTION, README_PREVIOUS = "**Production on a GPU work pool.**", "**Production (GPU):**"
CHDIR_STEP = "prefect.deployments.steps.set_working_directory"
# The job variables of a `docker` work pool: the fields of prefect-docker 0.7.4's DockerWorkerJobConfiguration.
# The worker host installs prefect-docker, this project does not; when it is importable its own fields are used.
DOCKER_JOB_VARIABLES = frozenset({
    "command", "env", "labels", "name", "image", "registry_credentials", "image_pull_policy", "networks",
    "network_mode", "auto_remove", "volumes", "stream_output", "mem_limit", "memswap_limit", "privileged",
    "container_create_kwargs"})
TRL_VLLM = ("0.22.0", "0.31.0")  # the vLLM versions TRL 1.16 supports (trl/import_utils.py, is_vllm_available)
SECRET_PATTERNS = [
    re.compile(r"\bsk-[A-Za-z0-9_-]{16,}"),  # OpenAI-style keys
    re.compile(r"\bhf_[A-Za-z0-9]{20,}"),  # Hugging Face tokens
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),  # AWS access key ids
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{16,}"),
    # a key, token or password written as a value (not the name of a variable or a {{ template }})
    re.compile(r"(?im)^[ \t-]*[\w.-]*?(api[_-]?key|token|secret|password)[\"']?[ \t]*[:=][ \t]*[\"']?"
               r"(?!\{\{|\$)[^\s\"'#]{8,}"),
]
SECRET_NAME = re.compile(r"(?i)(^|_)(api_?key|key|token|secret|password)(_|$)")  # an environment variable's name


# --- inputs ------------------------------------------------------------------------------------------------

def read_yaml(path: Path) -> dict:
    return yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}


def deployment(doc: dict, name: str) -> dict | None:
    return next((d for d in doc.get("deployments") or [] if d.get("name") == name), None)


def steps(dep: dict) -> list[tuple[str, dict]]:
    return [(next(iter(s)), next(iter(s.values())) or {}) for s in dep.get("pull") or [] if isinstance(s, dict) and s]


def step_args(dep: dict, fqn: str) -> dict | None:
    return next((args for name, args in steps(dep) if name == fqn), None)


def docker_job_variables() -> frozenset:
    try:
        from prefect_docker.worker import DockerWorkerJobConfiguration
    except ImportError:
        return DOCKER_JOB_VARIABLES
    return frozenset(DockerWorkerJobConfiguration.model_fields)


def docker_create_args(job_variables: dict) -> dict:
    """What the Docker worker hands docker-py's `containers.create` for these job variables (prefect-docker 0.7.4,
    DockerWorker._build_container_settings, less the host.docker.internal entry it adds), turned into the Engine
    API's arguments by docker-py itself: a wrong name or shape (device_requests, ulimits, ...) raises here as it
    would on the worker. No daemon is needed."""
    from docker.models.containers import _create_container_args

    jv = job_variables
    extra = {k: v for k, v in (jv.get("container_create_kwargs") or {}).items() if k not in docker_job_variables()}
    return _create_container_args(dict(
        image=jv.get("image"), network=(jv.get("networks") or [None])[0], network_mode=jv.get("network_mode"),
        command="prefect flow-run execute", environment=jv.get("env") or {}, auto_remove=bool(jv.get("auto_remove")),
        labels={}, name=None, volumes=jv.get("volumes") or [], mem_limit=jv.get("mem_limit"),
        memswap_limit=jv.get("memswap_limit"), privileged=bool(jv.get("privileged")), version="1.44", **extra))


def requested_gpus(create_args: dict) -> int | None:
    """GPUs the container asks for: None for none, -1 for all of the host's."""
    total = None
    for req in (create_args.get("host_config") or {}).get("DeviceRequests") or []:
        if any("gpu" in caps for caps in req.get("Capabilities") or []):
            count = len(req["DeviceIDs"]) if req.get("DeviceIDs") else req.get("Count") or 0
            if count == -1:
                return -1
            total = (total or 0) + count
    return total


# --- checks: each returns its problems -----------------------------------------------------------------------

def prefect_yaml_problems(doc: dict) -> list[str]:
    """prefect.yaml against Prefect's own model of it (prefect/cli/deploy/_models.py). That model ignores unknown
    keys, so a misspelt key is reported here instead of silently dropped by `prefect deploy`."""
    from prefect.cli.deploy._models import DeploymentConfig, PrefectYamlModel, WorkPoolConfig
    from pydantic import ValidationError

    problems = []
    try:
        PrefectYamlModel.model_validate(doc)
    except ValidationError as err:
        problems += [f"prefect.yaml: {'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors()]
    top = {f.alias or n for n, f in PrefectYamlModel.model_fields.items()} | {"definitions"}
    problems += [f"prefect.yaml: unknown key {k!r}" for k in doc if k not in top]
    for dep in doc.get("deployments") or []:
        where = f"prefect.yaml: deployment {dep.get('name')!r}"
        problems += [f"{where}: unknown key {k!r}" for k in dep if k not in DeploymentConfig.model_fields]
        problems += [f"{where}: work_pool: unknown key {k!r}" for k in dep.get("work_pool") or {}
                     if k not in WorkPoolConfig.model_fields]
    names = [d.get("name") for d in doc.get("deployments") or []]
    problems += [f"prefect.yaml: no deployment {n!r}" for n in (CPU_DEPLOYMENT, GPU_DEPLOYMENT) if n not in names]
    return problems


def flow_problems(dep: dict, root: Path) -> list[str]:
    """The entrypoint loads, as `prefect deploy` loads it, the Prefect flow FLOW_NAME, and the deployment's
    parameters fit that flow's signature and types."""
    from prefect.flows import Flow, load_flow_from_entrypoint

    where = f"prefect.yaml: deployment {dep.get('name')!r}"
    entry = dep.get("entrypoint") or ""
    path, _, func = entry.rpartition(":")
    if not path or not (root / path).is_file():
        return [f"{where}: entrypoint {entry!r} names no file of the project"]
    try:
        flow = load_flow_from_entrypoint(f"{root / path}:{func}")
    except Exception as err:  # noqa: BLE001
        return [f"{where}: entrypoint {entry!r} does not load: {type(err).__name__}: {err}"]
    if not isinstance(flow, Flow) or flow.name != FLOW_NAME:
        return [f"{where}: entrypoint {entry!r} is {flow!r}, not the Prefect flow {FLOW_NAME!r}"]
    try:
        flow.validate_parameters(dict(dep.get("parameters") or {}))
    except Exception as err:  # noqa: BLE001 - SignatureMismatchError, ParameterTypeError
        return [f"{where}: parameters do not fit {FLOW_NAME}: {err}"]
    return []


def cpu_deployment_problems(dep: dict) -> list[str]:
    """The CPU default: a process pool, and no schedule (`rubricrl pipeline serve` owns the CPU schedule)."""
    from prefect.workers.process import ProcessJobConfiguration

    where = f"prefect.yaml: deployment {dep.get('name')!r}"
    problems = []
    if dep.get("schedule") or dep.get("schedules"):
        problems.append(f"{where}: a schedule here runs every scheduled run twice beside `rubricrl pipeline serve`")
    pool = dep.get("work_pool") or {}
    if not pool.get("name"):
        problems.append(f"{where}: work_pool.name missing")
    unknown = set(pool.get("job_variables") or {}) - set(ProcessJobConfiguration.model_fields)
    if unknown:
        problems.append(f"{where}: job_variables {sorted(unknown)} are no variables of a process work pool")
    return problems


def gpu_deployment_problems(dep: dict, params, accel, dockerfile: str = "") -> list[str]:
    """The GPU deployment: a Docker work pool whose containers get the GPUs accelerate starts processes on, the
    host network when the judge is on the host's loopback, the checkout mounted where the flow runs, the judge's
    key from a Secret block at run time (never in the deployment), the preflight, and the profile's cron."""
    where = f"prefect.yaml: deployment {dep.get('name')!r}"
    pool = dep.get("work_pool") or {}
    jv = pool.get("job_variables") or {}
    problems = []
    if not pool.get("name"):
        problems.append(f"{where}: work_pool.name missing")
    unknown = set(jv) - docker_job_variables()
    if unknown:
        problems.append(f"{where}: job_variables {sorted(unknown)} are no variables of a docker work pool")
    if not jv.get("image"):
        problems.append(f"{where}: job_variables.image missing (the image of {DOCKERFILE})")
    try:
        create = docker_create_args(jv)
    except Exception as err:  # noqa: BLE001 - docker-py rejects the container settings
        problems.append(f"{where}: the Docker worker could not create the container: {type(err).__name__}: {err}")
        create = {}
    host = create.get("host_config") or {}
    gpus, procs = requested_gpus(create), accel.num_processes if accel else None
    if gpus is None:
        problems.append(f"{where}: the container requests no GPU (container_create_kwargs.device_requests)")
    elif gpus != -1 and procs and gpus != procs:
        problems.append(f"{where}: the container gets {gpus} GPU(s), {ACCELERATE} starts {procs} processes")
    if host.get("IpcMode") != "host" and not host.get("ShmSize"):
        problems.append(f"{where}: NCCL and vLLM need shared memory: container_create_kwargs ipc_mode host or shm_size")
    judge = params.scoring.judge_config()
    if judge and urlparse(judge.base_url or "").hostname in LOOPBACK and host.get("NetworkMode") != "host":
        problems.append(f"{where}: the judge is on the host's loopback ({judge.base_url}); only network_mode host "
                        f"reaches it from the container")
    for key in jv.get("env") or {}:
        if SECRET_NAME.search(key):
            problems.append(f"{where}: job_variables.env.{key}: a secret there is stored in the deployment in "
                            f"plain text; use the {SECRET_STEP} pull step")
    project = (dep.get("parameters") or {}).get("project")
    mounts = {v.split(":")[1] for v in jv.get("volumes") or [] if ":" in v}
    if not project:
        problems.append(f"{where}: parameters.project: name the mounted checkout the flow runs in")
    elif project not in mounts:
        problems.append(f"{where}: parameters.project {project!r} is no volume's mount point {sorted(mounts)}")
    pulled = steps(dep)
    if not pulled or pulled[0][0] != CHDIR_STEP or pulled[0][1].get("directory") != project:
        problems.append(f"{where}: the first pull step must be {CHDIR_STEP} to parameters.project ({project})")
    for fqn, args in pulled:
        if fqn.startswith("rubricrl."):
            module, _, func = fqn.rpartition(".")
            try:  # as Prefect finds a step
                fn = getattr(importlib.import_module(module), func)
            except (ImportError, AttributeError) as err:
                problems.append(f"{where}: pull step {fqn}: {err}")
                continue
            try:
                inspect.signature(fn).bind(**args)
            except TypeError as err:
                problems.append(f"{where}: pull step {fqn}: {err}")
    secret = step_args(dep, SECRET_STEP)
    if judge and judge.api_key_env and (secret is None or secret.get("env") != judge.api_key_env):
        problems.append(f"{where}: no pull step {SECRET_STEP} with env {judge.api_key_env} "
                        f"(scoring.openai_judge.api_key_env)")
    if (step_args(dep, PREFLIGHT_STEP) or {}).get("project") != project:
        problems.append(f"{where}: no pull step {PREFLIGHT_STEP} with project {project}")
    crons = [s.get("cron") for s in dep.get("schedules") or []] + [(dep.get("schedule") or {}).get("cron")]
    if [c for c in crons if c] != [params.pipeline.cron]:
        problems.append(f"{where}: schedules {[c for c in crons if c]} are not the profile's pipeline.cron "
                        f"{params.pipeline.cron!r}")
    workdir = re.findall(r"(?im)^WORKDIR\s+(\S+)", dockerfile)
    if dockerfile and project and workdir[-1:] != [project]:
        problems.append(f"{where}: parameters.project {project!r} is not the image's WORKDIR {workdir[-1:]}")
    return problems


def dockerfile_problems(text: str, pyproject: dict) -> list[str]:
    """A CUDA devel base (DeepSpeed's JIT builds need nvcc), the project installed with its gpu extra, vLLM
    pinned to the versions TRL supports, DeepSpeed built against the installed torch."""
    from packaging.requirements import InvalidRequirement, Requirement

    problems = []
    lines = text.replace("\\\n", " ").splitlines()
    args = dict(re.findall(r"(?m)^ARG\s+(\w+)=(\S+)", text))
    base = next((ln.split()[1] for ln in lines if ln.startswith("FROM ")), "")
    base = re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), m.group(0)), base)
    if not re.match(r"(docker\.io/)?nvidia/cuda:\S*devel", base):
        problems.append(f"{DOCKERFILE}: FROM {base or '?'} is no nvidia/cuda devel image")
    installs = [shlex.split(ln.split("pip install", 1)[1].split("&&")[0]) for ln in lines
                if ln.startswith("RUN") and "pip install" in ln]
    tokens = [t for words in installs for t in words]
    if not any(re.fullmatch(r"\.\[([\w-]+,)*gpu(,[\w-]+)*\]", t) for t in tokens):
        problems.append(f"{DOCKERFILE}: no `pip install` of the project with its gpu extra (.[gpu])")
    lo, hi = TRL_VLLM
    for token in tokens:
        try:
            req = Requirement(token)
        except InvalidRequirement:
            continue
        if req.name == "vllm" and (not req.specifier or not req.specifier.contains(hi) or any(
                req.specifier.contains(v) for v in ("0.21.0", "0.32.0"))):
            problems.append(f"{DOCKERFILE}: {token}: TRL 1.16 supports vLLM {lo} to {hi}; pin that range")
    if not any("--no-build-isolation" in words and any(t.startswith("deepspeed") for t in words) for words in installs):
        problems.append(f"{DOCKERFILE}: DeepSpeed must be built against the installed torch (--no-build-isolation)")
    gpu = {Requirement(r).name for r in pyproject.get("project", {}).get("optional-dependencies", {}).get("gpu", [])}
    problems += [f"pyproject.toml: the gpu extra lacks {p}" for p in ("vllm", "deepspeed") if p not in gpu]
    return problems


def secret_problems(files: dict[str, str]) -> list[str]:
    """No key, token or password written into a config, prefect.yaml or the Dockerfile (name -> text)."""
    return [f"{name}:{text.count(chr(10), 0, m.start()) + 1}: looks like a secret written down; read it from a "
            f"variable or a Prefect Secret block" for name, text in files.items()
            for pattern in SECRET_PATTERNS for m in pattern.finditer(text)]


def readme_section(readme: str) -> str:
    start = readme.find(README_SECTION)
    if start < 0:
        return ""
    end = re.search(r"\n(\*\*[^*\n]+\*\*|#+ )", readme[start + len(README_SECTION):])
    return readme[start: start + len(README_SECTION) + (end.start() if end else len(readme))]


def readme_problems(readme: str, doc: dict, params, accel) -> list[str]:
    """The README subsection right after "Production (GPU)" tells what the files hold: the pool and its type, the
    deployment, the image tag, the judge model, and accelerate's number of processes."""
    problems = []
    section = readme_section(readme)
    if not section:
        return [f"README.md: no subsection {README_SECTION}"]
    before = readme[: readme.find(README_SECTION)].rstrip()
    last = before[before.rfind("\n\n") + 2:] if "\n\n" in before else before
    if not last.startswith(README_PREVIOUS):
        problems.append(f"README.md: {README_SECTION} must follow the paragraph {README_PREVIOUS}")
    section = " ".join(section.split())  # Markdown reads a line break inside a paragraph as a space
    dep = deployment(doc, GPU_DEPLOYMENT) or {}
    pool = (dep.get("work_pool") or {}).get("name")
    if not re.search(rf"prefect work-pool create {re.escape(str(pool))} --type docker\b", section):
        problems.append(f"README.md: no `prefect work-pool create {pool} --type docker`")
    if f"prefect deploy --name {GPU_DEPLOYMENT}" not in section:
        problems.append(f"README.md: no `prefect deploy --name {GPU_DEPLOYMENT}`")
    image = ((dep.get("work_pool") or {}).get("job_variables") or {}).get("image")
    if f"docker build -f {DOCKERFILE} -t {image} ." not in section:
        problems.append(f"README.md: no `docker build -f {DOCKERFILE} -t {image} .` (the deployment's image)")
    judge = params.scoring.judge_config()
    if judge and f"vllm serve {judge.model}" not in section:
        problems.append(f"README.md: no `vllm serve {judge.model}` (scoring.openai_judge.model)")
    said = re.findall(r"num_processes: (\d+)", section)
    if accel and said != [str(accel.num_processes)]:
        problems.append(f"README.md: says num_processes {said}, {ACCELERATE} has {accel.num_processes}")
    return problems


def dry_run(root: Path) -> list[str]:
    """Every check on the project at root; empty when the production path is consistent."""
    from rubricrl.config import load_params
    from rubricrl.core.errors import ConfigError

    root = Path(root)
    try:
        params = load_params(root / "params.yaml", [root / PROFILE])  # the profile is an overlay of params.yaml
    except ConfigError as err:
        return [f"{PROFILE}: {err}"]
    doc = read_yaml(root / "prefect.yaml")
    accel, problems = accelerate_config(root / ACCELERATE)
    dockerfile = (root / DOCKERFILE).read_text(encoding="utf-8")
    import tomllib

    pyproject = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    problems += prefect_yaml_problems(doc)
    for name in (CPU_DEPLOYMENT, GPU_DEPLOYMENT):
        if deployment(doc, name):
            problems += flow_problems(deployment(doc, name), root)
    if deployment(doc, CPU_DEPLOYMENT):
        problems += cpu_deployment_problems(deployment(doc, CPU_DEPLOYMENT))
    if deployment(doc, GPU_DEPLOYMENT):
        problems += gpu_deployment_problems(deployment(doc, GPU_DEPLOYMENT), params, accel, dockerfile)
    problems += accelerate_problems(accel, root) + profile_problems(params, accel)
    problems += dockerfile_problems(dockerfile, pyproject)
    scanned = ["prefect.yaml", "params.yaml", *sorted(str(p.relative_to(root)) for p in (root / "configs").iterdir()),
               *sorted(str(p.relative_to(root)) for p in (root / "docker").iterdir())]
    problems += secret_problems({n: (root / n).read_text(encoding="utf-8") for n in scanned if (root / n).is_file()})
    problems += readme_problems((root / "README.md").read_text(encoding="utf-8"), doc, params, accel)
    return problems


def grpo_dry_config(settings) -> dict:
    """TRL's GRPOConfig, built from these grpo settings by rubricrl.train.trainer_args.grpo_config on this machine:
    in fp32 (a CPU has no bf16) and without the DeepSpeed JSON (DeepSpeed is not installed here; the JSON is
    checked on its own). Returns the fields the production path relies on."""
    from rubricrl.train.trainer_args import grpo_config

    cfg = grpo_config(settings.model_copy(update={"precision": "fp32", "deepspeed": None}), Path("outputs/dry-run"),
                      settings.beta, [1.0])
    keys = ("use_vllm", "vllm_mode", "vllm_max_model_length", "vllm_tensor_parallel_size", "learning_rate", "beta",
            "num_generations", "temperature", "top_p", "max_completion_length", "max_steps", "save_steps",
            "per_device_train_batch_size", "gradient_accumulation_steps", "steps_per_generation",
            "gradient_checkpointing", "bf16", "deepspeed")
    return {k: getattr(cfg, k) for k in keys}


def sft_dry_config(settings) -> dict:
    """TRL's SFTConfig from these sft settings (rubricrl.train.trainer_args.sft_config), as grpo_dry_config."""
    from rubricrl.train.trainer_args import sft_config

    cfg = sft_config(settings.model_copy(update={"precision": "fp32", "deepspeed": None}), Path("outputs/dry-run"))
    keys = ("learning_rate", "num_train_epochs", "max_steps", "per_device_train_batch_size",
            "gradient_accumulation_steps", "max_length", "completion_only_loss", "gradient_checkpointing", "bf16")
    return {k: getattr(cfg, k) for k in keys}


def gkd_dry_config(distill) -> dict:
    """TRL's GKDConfig as rubricrl.release.distill.gkd_train builds it from these distill settings, in fp32."""
    from rubricrl.release.distill import gkd_config

    cfg = gkd_config(distill.model_copy(update={"precision": "fp32", "device": "cpu"}), "outputs/dry-run")
    keys = ("max_steps", "per_device_train_batch_size", "gradient_accumulation_steps", "gradient_checkpointing",
            "learning_rate", "lmbda", "beta", "temperature", "max_new_tokens", "max_length", "bf16")
    return {k: getattr(cfg, k) for k in keys}


# --- pull steps of the rubricrl-gpu deployment (run in the flow run's container) ---------------------------

def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    problems = dry_run(Path(argv[0]) if argv else Path.cwd())
    for p in problems:
        print(p, file=sys.stderr)
    print(f"production dry run: {len(problems)} problem(s)" if problems else "production dry run: OK")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
