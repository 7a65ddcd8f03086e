# One command each for a fresh machine: `make run` (set up + run the pipeline on the embedded
# default) and `make test` (set up + run the tests). Everything installs into .venv.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup run test bench clean

setup: $(VENV)/.installed

# llama-cpp-python (the llama.cpp server the judge tests start) builds from source. Its default
# -march=native build segfaulted in every multi-token decode on an AVX-512 host, so it is built once
# per machine for portable x86-64 with AVX2 (GGML_NATIVE=OFF) and kept, like pip's own cache, outside
# the repo; the version is the one pyproject.toml pins.
LLAMA_CPP := $(shell grep -o 'llama-cpp-python\[server\]==[0-9.]*' pyproject.toml | sed 's/\[server\]//')
WHEELS ?= $(HOME)/.cache/rubricrl/wheels

# torch is pinned to the local CPU build first, so nothing later pulls a multi-GB CUDA build.
$(VENV)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	@ls $(WHEELS)/llama_cpp_python-$(subst llama-cpp-python==,,$(LLAMA_CPP))-*.whl >/dev/null 2>&1 || \
		CMAKE_ARGS="-DGGML_NATIVE=OFF" $(BIN)/pip wheel -q --no-deps --no-cache-dir -w $(WHEELS) "$(LLAMA_CPP)"
	$(BIN)/pip install -q --find-links $(WHEELS) -e ".[test]"
	@[ -d .git ] || git init -q
	touch $@

run: setup
	$(BIN)/rubricrl pipeline run

test: setup
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q

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
