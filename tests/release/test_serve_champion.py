"""The champion served the way MLflow users serve models: `mlflow models serve -m models:/NAME@champion
--env-manager local`, a task sent as OpenAI-style chat messages (MLflow's llm/v1/chat task), the answer the same
JSON as the eval's greedy generation, scored with the rubric.

The model is tiny (SmolLM2's tokenizer, two layers) and fine-tuned on one task until its greedy answer is that
task's gold JSON, so "the same JSON" compares a real extraction, not two empty strings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from rubricrl.config import SFTSettings, load_params
from rubricrl.core.prompt import task_messages
from rubricrl.inference.generate import generate_with_stats
from rubricrl.inference.models import build_tiny_model, embedded_gguf
from rubricrl.release import registry
from rubricrl.core.net import free_port
from rubricrl.release.export import stop_server
from rubricrl.reward.load import load_rubric
from rubricrl.reward.scoring import RubricScorer
from rubricrl.train.sft import train_sft
from tests.train_helpers import RUBRIC, tiny_tasks

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
MAX_NEW_TOKENS = 48


@pytest.fixture(scope="module")
def memorised(tmp_path_factory):
    """A tiny model whose greedy answer to tiny_tasks()[0] is its gold JSON."""
    from transformers import AutoTokenizer

    gguf = embedded_gguf()
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    root = tmp_path_factory.mktemp("served")
    base = build_tiny_model(root / "base", hidden_size=64, seed=5, tokenizer=tokenizer)
    task = tiny_tasks()[0]
    model = train_sft(base, [task], root / "sft", SFTSettings(max_steps=60, per_device_batch_size=1, grad_accum=1,
                                                              learning_rate=1e-2, max_tasks=None)).model_dir
    [answer], _ = generate_with_stats(model, [task], max_new_tokens=MAX_NEW_TOKENS, desc=None)
    assert json.loads(answer) == task.reference, f"the setup did not memorise the gold answer: {answer!r}"
    return model, task, answer


@pytest.mark.slow
def test_mlflow_serves_the_champion_as_chat_and_answers_as_the_eval_does(memorised, tmp_path, monkeypatch):
    model_dir, task, eval_answer = memorised
    text = (ROOT / "params.yaml").read_text().replace("sqlite:///mlruns/mlflow.db", f"sqlite:///{tmp_path}/mlflow.db")
    (tmp_path / "params.yaml").write_text(text.replace("max_new_tokens: 200 ", f"max_new_tokens: {MAX_NEW_TOKENS} ", 1))
    params = load_params(tmp_path / "params.yaml")
    assert params.eval.max_new_tokens == MAX_NEW_TOKENS
    (tmp_path / "rows.jsonl").write_text(json.dumps({"id": task.id, "part": "in_domain", "total": 1.0}) + "\n")
    (tmp_path / "test.jsonl").write_text(json.dumps(task.to_dict()) + "\n")
    cand = registry.Candidate(name="sft", trained_by="sft", model_dir=model_dir, rows=tmp_path / "rows.jsonl",
                              numbers={}, test_file=tmp_path / "test.jsonl", lineage={})
    monkeypatch.chdir(tmp_path)
    version = registry.register(params, cand, [], params_file=tmp_path / "params.yaml")
    # The gates need a general verdict; this test is about serving, so the version is made champion directly.
    registry.client(params.tracking).set_registered_model_alias(params.registry.name, registry.CHAMPION, version)

    port = free_port()
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
           "MLFLOW_TRACKING_URI": params.tracking.uri, "HF_HUB_OFFLINE": "1"}
    log = open(tmp_path / "serve.log", "wb")
    proc = subprocess.Popen([str(BIN / "mlflow"), "models", "serve", "-m", f"models:/{params.registry.name}@champion",
                             "--env-manager", "local", "-h", "127.0.0.1", "-p", str(port)],
                            cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if httpx.get(f"{url}/ping", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.5)
        assert proc.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
        # The request the README shows: the task's chat messages, as the eval builds them.
        reply = httpx.post(f"{url}/invocations", json={"messages": task_messages(task)}, timeout=120)
        assert reply.status_code == 200, reply.text[-2000:]
        body = reply.json()
        choice = (body[0] if isinstance(body, list) else body)["choices"][0]
        served = choice["message"]["content"]
        assert served == eval_answer
        assert json.loads(served) == task.reference
        scorer = RubricScorer(load_rubric(RUBRIC))
        assert scorer.score(task, served).total == scorer.score(task, eval_answer).total > 0
        # The budget is the eval's; a request's max_tokens overrides it.
        short = httpx.post(f"{url}/invocations", json={"messages": task_messages(task), "max_tokens": 3}, timeout=120)
        short_choice = (short.json()[0] if isinstance(short.json(), list) else short.json())["choices"][0]
        assert short_choice["finish_reason"] == "length" and len(short_choice["message"]["content"]) < len(served)
    finally:
        stop_server(proc)
        log.close()
