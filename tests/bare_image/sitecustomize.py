"""The GPU image's missing packages, for a test: an interpreter with this folder on PYTHONPATH imports this file at
start-up (Python's `sitecustomize`), and from then on `import prefect` (mlflow, dvc, vllm, deepspeed) raises
ModuleNotFoundError and `importlib.util.find_spec` says None, as where they are not installed. Child interpreters
inherit PYTHONPATH, so every stage the one-GPU script starts sees the same bare image."""

import sys

ABSENT = ("prefect", "mlflow", "dvc", "vllm", "deepspeed")
for _name in ABSENT:
    sys.modules[_name] = None  # the import system's "known missing" marker
