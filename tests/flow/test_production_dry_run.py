"""Dry run of the production path (README "Production on a GPU work pool"): no GPU, no network, neither vLLM nor
DeepSpeed installed. Every check of tools.production_check runs on the real files, then on a copy broken in one
place, so that each is seen to fail."""

import copy
import json
import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest
import yaml

from tools import production_check as prod
from rubricrl.config import load_params

ROOT = Path(__file__).resolve().parents[2]
PROFILE = yaml.safe_load((ROOT / prod.PROFILE).read_text())

# In a subprocess, with fake `vllm` and `deepspeed` packages that look installed (dist-info in TRL's supported
# range) and record any import of them: import every rubricrl module, the flow and the stage scripts, then
# build TRL's GRPOConfig from the production grpo settings. Last, the control: importing either is recorded, and
# TRL and transformers take both for installed.
IMPORTS_SCRIPT = textwrap.dedent("""
    import importlib, importlib.util, json, os, pkgutil, sys
    from pathlib import Path
    root = Path(sys.argv[1]); sys.path.insert(0, str(root))
    log = Path(os.environ["FAKE_GPU_LOG"])
    seen = lambda: log.read_text().split() if log.exists() else []
    import rubricrl
    modules = ["rubricrl.flow.pipeline"] + [m.name for m in pkgutil.walk_packages(rubricrl.__path__, "rubricrl.")]
    for m in modules:
        importlib.import_module(m)
    after_imports = seen()
    from rubricrl.config import load_params
    from tools.production_check import grpo_dry_config
    config = grpo_dry_config(load_params(root / "params.yaml", [root / "configs/production.yaml"]).grpo)
    after_config = seen()
    for name in ("vllm", "deepspeed"):  # the control: an import of either is recorded
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    from trl.import_utils import is_vllm_available
    from transformers.integrations import is_deepspeed_available
    print(json.dumps({"modules": len(modules), "after_imports": after_imports, "after_config": after_config,
                      "control": seen(), "vllm_available": is_vllm_available(),
                      "deepspeed_available": is_deepspeed_available(), "config": config}))
""")


@pytest.fixture(scope="module", autouse=True)
def gpu_imports(tmp_path_factory):
    """Started before the first test of this file, read by test_lazy_gpu_imports_and_grpo_config: it runs beside
    the other tests (most of this file's wall time is that process importing torch, transformers and TRL)."""
    fake = tmp_path_factory.mktemp("fake_gpu_packages")
    for name, version in (("vllm", "0.31.0"), ("deepspeed", "0.19.8")):
        (fake / name).mkdir()
        (fake / name / "__init__.py").write_text(
            "import os\nwith open(os.environ['FAKE_GPU_LOG'], 'a') as f:\n    f.write(__name__ + '\\n')\n"
            f"raise ImportError('fake {name}: the dry run has no GPU packages')\n")
        (fake / f"{name}-{version}.dist-info").mkdir()
        (fake / f"{name}-{version}.dist-info" / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (fake / f"{name}-{version}.dist-info" / "top_level.txt").write_text(name + "\n")
    path = os.pathsep.join(p for p in (str(fake), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path,
           "FAKE_GPU_LOG": str(fake / "imported.log"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-c", IMPORTS_SCRIPT, str(ROOT)], env=env, cwd=fake,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    yield proc
    if proc.poll() is None:
        proc.kill()
        proc.communicate()


@pytest.fixture(scope="module")
def real():
    params = load_params(ROOT / "params.yaml", [ROOT / prod.PROFILE])
    accel, problems = prod.accelerate_config(ROOT / prod.ACCELERATE)
    assert problems == []
    return {"doc": prod.read_yaml(ROOT / "prefect.yaml"), "params": params, "accel": accel,
            "dockerfile": (ROOT / prod.DOCKERFILE).read_text(), "readme": (ROOT / "README.md").read_text(),
            "pyproject": tomllib.loads((ROOT / "pyproject.toml").read_text())}


def profile(tmp_path, change) -> object:
    """The production profile with one change applied to its YAML (an overlay of params.yaml)."""
    doc = copy.deepcopy(PROFILE)
    change(doc)
    path = tmp_path / "production.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load_params(ROOT / "params.yaml", [path])


def test_the_whole_dry_run_passes(real):
    assert prod.dry_run(ROOT) == []
    assert prod.main([str(ROOT)]) == 0


def test_prefect_yaml_follows_prefects_model(real):
    assert prod.prefect_yaml_problems(real["doc"]) == []
    doc = copy.deepcopy(real["doc"])
    doc["deployments"][1]["entrypiont"] = doc["deployments"][1].pop("entrypoint")
    assert any("unknown key 'entrypiont'" in p for p in prod.prefect_yaml_problems(doc))
    doc = copy.deepcopy(real["doc"])
    doc["deployments"][1]["schedules"] = [{"cron": "0 3 * * *", "interval": 3600}]  # exactly one of cron/interval
    assert any("schedules" in p for p in prod.prefect_yaml_problems(doc))
    doc = copy.deepcopy(real["doc"])
    doc["deployments"] = doc["deployments"][:1]
    assert prod.prefect_yaml_problems(doc) == [f"prefect.yaml: no deployment '{prod.GPU_DEPLOYMENT}'"]


def test_both_entrypoints_load_the_flow_and_parameters_fit_it(real):
    deps = [prod.deployment(real["doc"], n) for n in (prod.CPU_DEPLOYMENT, prod.GPU_DEPLOYMENT)]
    assert all(d["entrypoint"] == prod.FLOW_ENTRYPOINT for d in deps)
    assert [prod.flow_problems(d, ROOT) for d in deps] == [[], []]
    for change, says in [({"entrypoint": "rubricrl/flow/pipeline.py:run_pipeline"}, "is not a flow"),
                         ({"entrypoint": "flows/pipelines.py:pipeline"}, "names no file"),
                         ({"parameters": {"profile": "production"}}, "do not fit"),
                         ({"parameters": {"project": "/opt/rubricrl", "force": "maybe"}}, "do not fit")]:
        assert says in " ".join(prod.flow_problems({**deps[1], **change}, ROOT)), change


def test_cpu_deployment_is_a_process_job_without_schedule(real):
    dep = prod.deployment(real["doc"], prod.CPU_DEPLOYMENT)
    assert prod.cpu_deployment_problems(dep) == []
    assert "twice" in prod.cpu_deployment_problems({**dep, "schedules": [{"cron": "0 3 * * *"}]})[0]
    broken = copy.deepcopy(dep)
    broken["work_pool"]["job_variables"]["image"] = "rubricrl-gpu:0.1.0"
    assert "process work pool" in prod.cpu_deployment_problems(broken)[0]


def gpu_change(path: str, value):
    """A change of the GPU deployment at a dotted path (value None deletes the key)."""
    def apply(dep):
        *parents, last = path.split(".")
        node = dep
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
        if value is None:
            del node[int(last) if isinstance(node, list) else last]
        else:
            node[int(last) if isinstance(node, list) else last] = value
    return apply


CCK = "work_pool.job_variables.container_create_kwargs"


@pytest.mark.parametrize("path,value,says", [
    (f"{CCK}.device_requests", None, "requests no GPU"),
    (f"{CCK}.device_requests.0.count", 4, "gets 4 GPU(s)"),
    (f"{CCK}.devices_requests", [], "could not create the container"),  # docker-py rejects the name
    (f"{CCK}.device_requests.0.count", "8", "could not create the container"),  # ... and the shape
    (f"{CCK}.ipc_mode", None, "shared memory"),
    ("work_pool.job_variables.network_mode", "bridge", "only network_mode host"),
    ("work_pool.job_variables.gpus", 8, "no variables of a docker work pool"),
    ("work_pool.job_variables.image", None, "image missing"),
    ("work_pool.job_variables.env", {"RUBRICRL_JUDGE_API_KEY": "x"}, "plain text"),
    ("work_pool.job_variables.volumes.0", "/srv/rubricrl:/workspace", "no volume's mount point"),
    ("parameters.project", "/workspace", "no volume's mount point"),
    ("pull.0", {"prefect.deployments.steps.set_working_directory": {"directory": "/tmp"}}, "first pull step"),
    ("pull.1", {"rubricrl.flow.deploy.secret_to_env": {"block": "b", "env": "OPENAI_API_KEY"}}, "api_key_env"),
    ("pull.1", {"rubricrl.flow.deploy.secret_to_env": {"name": "b", "env": "RUBRICRL_JUDGE_API_KEY"}},
     "pull step rubricrl.flow.deploy.secret_to_env"),
    ("pull.2", {"rubricrl.flow.deploy.prefligth": {"project": "/opt/rubricrl"}}, "prefligth"),
    ("schedules.0.cron", "0 4 * * *", "pipeline.cron"),
    ("schedules", None, "pipeline.cron"),
])
def test_gpu_deployment_checks_fail_on_a_broken_copy(real, path, value, says):
    dep = prod.deployment(real["doc"], prod.GPU_DEPLOYMENT)
    assert prod.gpu_deployment_problems(dep, real["params"], real["accel"], real["dockerfile"]) == []
    broken = copy.deepcopy(dep)
    gpu_change(path, value)(broken)
    problems = prod.gpu_deployment_problems(broken, real["params"], real["accel"], real["dockerfile"])
    assert any(says in p for p in problems), problems


def test_gpu_job_gets_what_the_docker_worker_will_create(real):
    jv = prod.deployment(real["doc"], prod.GPU_DEPLOYMENT)["work_pool"]["job_variables"]
    host = prod.docker_create_args(jv)["host_config"]
    assert host["DeviceRequests"][0]["Driver"] == "nvidia" and host["DeviceRequests"][0]["Count"] == 8
    assert host["NetworkMode"] == "host" and host["IpcMode"] == "host" and host["AutoRemove"] is True
    assert set(host["Binds"]) == {"/srv/rubricrl:/opt/rubricrl", "/srv/rubricrl-cache:/root/.cache"}
    assert not set(jv) - prod.DOCKER_JOB_VARIABLES


def test_accelerate_runs_deepspeed_zero3(real, tmp_path):
    assert prod.accelerate_problems(real["accel"], ROOT) == []
    assert real["accel"].num_processes == 8
    (tmp_path / "configs").mkdir()
    accel_yaml = yaml.safe_load((ROOT / prod.ACCELERATE).read_text())
    ds = json.loads((ROOT / "configs/deepspeed_zero3.json").read_text())
    for accel_change, ds_change, says in [
        ({}, {"stage": 2}, "not 3"),
        ({"deepspeed_config": {"deepspeed_config_file": "configs/missing.json"}}, {}, "does not exist"),
        ({"distributed_type": "MULTI_GPU"}, {}, "not DEEPSPEED"),
        ({"num_gpus": 8}, {}, "accelerate cannot read it"),
    ]:
        (tmp_path / prod.ACCELERATE).write_text(yaml.safe_dump({**accel_yaml, **accel_change}))
        (tmp_path / "configs/deepspeed_zero3.json").write_text(json.dumps(
            {**ds, "zero_optimization": {**ds["zero_optimization"], **ds_change}}))
        accel, problems = prod.accelerate_config(tmp_path / prod.ACCELERATE)
        problems += prod.accelerate_problems(accel, tmp_path)
        assert any(says in p for p in problems), (says, problems)


@pytest.mark.parametrize("change,says", [
    (lambda d: d["policy"].update(model="Qwen/Qwen2.5-72B-Instruct"), "is the policy"),
    (lambda d: d["scoring"]["openai_judge"].update(api_key_env=None), "api_key_env"),
    (lambda d: d["scoring"].update(judge="grounded"), "openai judge"),
    (lambda d: d["grpo"].update(device="cpu"), "grpo.device"),
    (lambda d: d["sft"].update(deepspeed="configs/other.json"), "sft.deepspeed"),
    (lambda d: d["sft"].update(accelerate_config=None), "sft.accelerate_config"),
    (lambda d: d["grpo"].update(deepspeed=None), "grpo.deepspeed"),
    (lambda d: d["grpo"].update(precision="fp32"), "mixed_precision"),
    (lambda d: d["grpo"].update(use_vllm=False), "use_vllm"),
    (lambda d: d["grpo"].update(vllm_mode="server"), "port 8000"),
    (lambda d: d["grpo"].update(num_generations=6), "multiple of num_generations 6"),
])
def test_production_profile_checks_fail_on_a_broken_copy(real, tmp_path, change, says):
    assert prod.profile_problems(real["params"], real["accel"]) == []
    problems = prod.profile_problems(profile(tmp_path, change), real["accel"])
    assert any(says in p for p in problems), problems


def test_sft_and_distillation_configs_build_from_the_production_settings(real):
    """The trainer configs TRL builds from production's sft and distill sections on this machine (fp32, no
    DeepSpeed JSON: what a CPU lacks), so a setting TRL or transformers rejects fails here, not on the GPUs."""
    sft = prod.sft_dry_config(real["params"].sft)
    assert sft["gradient_accumulation_steps"] == 4 and sft["max_length"] == 2048 and sft["num_train_epochs"] == 2
    assert sft["completion_only_loss"] is True and sft["gradient_checkpointing"] is True
    gkd = prod.gkd_dry_config(real["params"].distill)
    assert (gkd["per_device_train_batch_size"], gkd["gradient_accumulation_steps"]) == (1, 8)
    assert gkd["lmbda"] == 0.5 and gkd["max_length"] == 4096 and gkd["gradient_checkpointing"] is True


def test_judge_is_an_openai_endpoint_other_than_the_policy(real):
    judge = real["params"].scoring.judge_config()
    assert judge.type == "openai" and judge.model != real["params"].policy.model
    assert judge.api_key_env == "RUBRICRL_JUDGE_API_KEY" and judge.base_url == "http://127.0.0.1:8000/v1"


@pytest.mark.slow
def test_lazy_gpu_imports_and_grpo_config(gpu_imports, real):
    out, err = gpu_imports.communicate(timeout=300)
    assert gpu_imports.returncode == 0, err[-3000:]
    result = json.loads(out.strip().splitlines()[-1])
    # The fakes look installed, so anything that imports vLLM or DeepSpeed when present would have been caught ...
    assert result["vllm_available"] and result["deepspeed_available"] and result["modules"] > 40
    assert result["control"] == ["vllm", "deepspeed"]  # ... and recorded
    # ... yet no rubricrl module, stage script or the flow imports either, nor does building the GRPO config.
    assert result["after_imports"] == [] and result["after_config"] == []
    g, cfg = real["params"].grpo, result["config"]
    assert cfg["use_vllm"] is True and cfg["vllm_mode"] == "colocate" and cfg["vllm_tensor_parallel_size"] == 1
    assert cfg["vllm_max_model_length"] == g.max_prompt_length + g.max_completion_length == 2048
    assert (cfg["learning_rate"], cfg["beta"], cfg["num_generations"], cfg["temperature"], cfg["top_p"]) == \
        (g.learning_rate, g.beta, g.num_generations, g.temperature, g.top_p)
    assert (cfg["max_completion_length"], cfg["max_steps"], cfg["save_steps"]) == (1024, 500, 50)
    assert (cfg["per_device_train_batch_size"], cfg["gradient_accumulation_steps"]) == (4, 4)
    assert cfg["gradient_checkpointing"] is True and cfg["bf16"] is False and cfg["deepspeed"] is None
    # TRL's own rule (generation batch in whole groups) on accelerate's 8 processes: 4 x 8 x 4 = 128 = 16 x 8
    assert (cfg["per_device_train_batch_size"] * real["accel"].num_processes * cfg["steps_per_generation"]) \
        % cfg["num_generations"] == 0


def test_dockerfile_installs_the_gpu_extra(real):
    text, pyproject = real["dockerfile"], real["pyproject"]
    assert prod.dockerfile_problems(text, pyproject) == []
    for old, new, says in [
        ("ARG CUDA_IMAGE=nvidia/cuda:13.0.2-devel-ubuntu24.04", "ARG CUDA_IMAGE=python:3.12-slim", "devel image"),
        ("nvidia/cuda:13.0.2-devel", "nvidia/cuda:13.0.2-runtime", "devel image"),
        ('pip install -e ".[gpu]"', "pip install -e .", "gpu extra"),
        ('"vllm>=0.22,<0.32"', "vllm", "pin that range"),
        ('"vllm>=0.22,<0.32"', '"vllm>=0.22"', "pin that range"),
        ("--no-build-isolation ", "", "--no-build-isolation"),
    ]:
        assert old in text, old
        assert any(says in p for p in prod.dockerfile_problems(text.replace(old, new), pyproject)), (old, new)
    broken = copy.deepcopy(pyproject)
    broken["project"]["optional-dependencies"]["gpu"] = ["vllm"]
    assert prod.dockerfile_problems(text, broken) == ["pyproject.toml: the gpu extra lacks deepspeed"]


def test_no_secret_is_written_down():
    names = ["prefect.yaml", "params.yaml", prod.DOCKERFILE, *(f"configs/{p.name}" for p in (ROOT / "configs").iterdir())]
    texts = {n: (ROOT / n).read_text() for n in names}
    assert prod.secret_problems(texts) == []
    assert "api_key_env: RUBRICRL_JUDGE_API_KEY" in texts[prod.PROFILE]  # a variable's name is no secret
    for leak in ["    api_key: sk-proj-abcdefghijklmnop1234", "HF_TOKEN=hf_abcdefghijklmnopqrstuvwx",
                 "  password: hunter2hunter2", 'RUBRICRL_JUDGE_API_KEY: "0123456789abcdef"',
                 "Authorization: Bearer abcdefghijklmnop0123"]:
        assert prod.secret_problems({"prefect.yaml": texts["prefect.yaml"] + leak + "\n"}), leak
    for fine in ['token: "{{ prefect.blocks.secret.hf-token }}"', "api_key: $RUBRICRL_JUDGE_API_KEY"]:
        assert prod.secret_problems({"x.yaml": fine + "\n"}) == [], fine


def test_readme_section_matches_the_files(real):
    args = (real["doc"], real["params"], real["accel"])
    readme = real["readme"]
    assert prod.readme_problems(readme, *args) == []
    section = prod.readme_section(readme)
    assert "num_processes: 8" in section
    elsewhere = "### Evaluate any model"  # a heading whose next paragraph is not "Production (GPU)"
    assert readme.count(elsewhere) == 1
    for broken, says in [
        (readme.replace(section, section.replace("num_processes: 8", "num_processes: 4")), "num_processes"),
        (readme.replace(section, section.replace("--type docker", "--type process")), "--type docker"),
        (readme.replace(section, section.replace("-t rubricrl-gpu:0.1.0", "-t rubricrl:gpu")), "docker build"),
        (readme.replace(section, ""), "no subsection"),
        (readme.replace(section, "").replace(elsewhere, elsewhere + "\n\n" + section), "must follow"),
    ]:
        assert any(says in p for p in prod.readme_problems(broken, *args)), says


def test_secret_to_env_reads_the_block_at_run_time(monkeypatch):
    from prefect.blocks.system import Secret

    monkeypatch.setenv("RUBRICRL_JUDGE_API_KEY", "already-set")
    assert prod.secret_to_env("rubricrl-judge-api-key", "RUBRICRL_JUDGE_API_KEY")["source"] == "environment"
    monkeypatch.delenv("RUBRICRL_JUDGE_API_KEY")
    monkeypatch.setattr(Secret, "load", classmethod(lambda cls, name, **kw: Secret(value=f"value-of-{name}")))
    out = prod.secret_to_env("rubricrl-judge-api-key", "RUBRICRL_JUDGE_API_KEY")
    assert os.environ["RUBRICRL_JUDGE_API_KEY"] == "value-of-rubricrl-judge-api-key"
    assert "value-of" not in json.dumps(out)  # the value is never returned (step outputs may be logged)

    def missing(cls, name, **kw):
        raise ValueError(f"Unable to find block document named {name}")

    monkeypatch.delenv("RUBRICRL_JUDGE_API_KEY")
    monkeypatch.setattr(Secret, "load", classmethod(missing))
    with pytest.raises(RuntimeError, match="no Prefect Secret block 'rubricrl-judge-api-key'"):
        prod.secret_to_env("rubricrl-judge-api-key", "RUBRICRL_JUDGE_API_KEY")


def test_preflight_refuses_what_this_machine_cannot_run(tmp_path):
    from rubricrl.config import apply_overlay

    shutil.copytree(ROOT / "configs", tmp_path / "configs")
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    apply_overlay(ROOT / prod.PROFILE, tmp_path / "params.yaml")  # the GPU host's checkout: the profile applied
    key = {"RUBRICRL_JUDGE_API_KEY": "k"}
    assert prod.preflight_problems(tmp_path, 8, lambda p: True, key) == []
    assert "1 GPU(s) visible" in " ".join(prod.preflight_problems(tmp_path, 1, lambda p: True, key))
    missing = prod.preflight_problems(tmp_path, 8, lambda p: p != "deepspeed", key)
    assert missing == ["deepspeed is not installed (the gpu extra)"]
    assert "RUBRICRL_JUDGE_API_KEY is not set" in " ".join(prod.preflight_problems(tmp_path, 8, lambda p: True, {}))
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")  # the CPU default is no GPU profile
    assert "grpo.device" in " ".join(prod.preflight_problems(tmp_path, 8, lambda p: True, key))
    with pytest.raises(RuntimeError, match="preflight of .* failed"):
        prod.preflight(str(tmp_path))  # no GPU here
