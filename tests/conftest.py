import os

# Nothing may download weights or data at run time.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# One real llama.cpp server (SmolLM2 GGUF) for the whole session, shared by every judge test.
pytest_plugins = ["tests.llama_server"]
