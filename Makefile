# One command each for a fresh machine: `make run` (set up + run the pipeline on the embedded
# default) and `make test` (set up + run the tests). Everything installs into .venv.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup run test bench clean

setup: $(VENV)/.installed

# torch is pinned to the local CPU build first, so nothing later pulls a multi-GB CUDA build.
$(VENV)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[test]"
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
