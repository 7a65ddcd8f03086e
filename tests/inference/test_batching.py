"""Generation batch sizing: `auto` fills the card's free memory on a GPU and is the CPU default elsewhere."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from rubricrl.inference import batching

SMOLLM2 = SimpleNamespace(num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3, hidden_size=576,
                          intermediate_size=1536, vocab_size=49152)  # SmolLM2-135M


def test_a_sequence_costs_its_kv_cache_prefill_and_logits():
    per = batching.per_sequence_bytes(SMOLLM2, tokens=736, prompt_tokens=480, dtype_bytes=4)
    kv = 2 * 30 * 3 * 64 * 4 * 736
    assert per == kv + 480 * (3 * 1536 + 4 * 576) * 4 + 2 * 49152 * 4
    assert 40e6 < per < 50e6  # ~45 MB a sequence in fp32


def test_free_memory_sets_the_batch_up_to_the_cap():
    per = batching.per_sequence_bytes(SMOLLM2, 736, 480, 4)
    h200_free = 139 * 2**30
    assert batching.fit(h200_free, per) == batching.CAP  # SmolLM2 on an H200: the cap, 512
    assert batching.fit(h200_free, per, returns=8) == batching.CAP // 8  # prompts, each with 8 samples
    small = 4 * 2**30  # a 4 GiB card holds ~57 sequences at 60%
    assert batching.fit(small, per) == int(small * batching.FRACTION) // per
    assert batching.fit(10, per) == 1  # never zero


def test_auto_is_the_cpu_default_off_a_gpu_and_a_number_is_kept():
    model = torch.nn.Linear(2, 2)
    assert batching.generation_batch("auto", model, 480, 256, cpu_default=8) == 8
    assert batching.generation_batch(16, model, 480, 256) == 16
    assert batching.cpu_batch("auto", 8) == 8 and batching.cpu_batch(3, 8) == 3


def test_auto_on_cuda_reads_free_memory(monkeypatch):
    class Model(torch.nn.Module):
        config = SMOLLM2

        def parameters(self, recurse=True):
            yield SimpleNamespace(device=torch.device("cuda", 0), element_size=lambda: 4)

    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (4 * 2**30, 80 * 2**30))
    per = batching.per_sequence_bytes(SMOLLM2, 480 + 256, 480, 4)
    assert batching.generation_batch("auto", Model(), 480, 256, returns=2) == int(4 * 2**30 * 0.6) // per // 2


@pytest.mark.parametrize("profile", ["configs/gpu.yaml", "configs/production.yaml"])
def test_the_gpu_profiles_size_generation_by_memory_and_the_cpu_default_keeps_its_numbers(profile):
    from rubricrl.config import load_params

    root = batching.__file__.rsplit("/rubricrl/", 1)[0]
    cpu = load_params(f"{root}/params.yaml")
    assert (cpu.eval.batch_size, cpu.general.batch_size, cpu.grpo.monitor.batch_size, cpu.distill.batch_eval,
            cpu.rubric.sample_batch) == (8, 8, 8, 8, 2)
    gpu = load_params(f"{root}/params.yaml", [f"{root}/{profile}"])
    assert {gpu.eval.batch_size, gpu.general.batch_size, gpu.grpo.monitor.batch_size, gpu.distill.batch_eval,
            gpu.rubric.sample_batch} == {"auto"}


def test_auto_off_a_gpu_is_each_callers_cpu_default(monkeypatch):
    """The policy sampler's CPU default is 2 prompts a call, the eval's 8: `auto` on a CPU gives each its own."""
    from rubricrl.core.taskfile import Task
    from rubricrl.inference import generate

    calls = []

    def fake_generate(model, tokenizer, texts, batch_size, num_return_sequences=1, desc=None, cpu_default=8, **kw):
        calls.append(batching.generation_batch(batch_size, model, 10, 10, num_return_sequences, cpu_default))
        return [["x"] * num_return_sequences for _ in texts], len(texts), 0

    monkeypatch.setattr(generate, "load_for_generation", lambda *a, **k: (torch.nn.Linear(2, 2), None))
    monkeypatch.setattr(generate, "prompt_texts", lambda tok, tasks: [t.id for t in tasks])
    monkeypatch.setattr(generate, "batched_generate", fake_generate)
    tasks = [Task(id=f"t{i}", instruction="x", text="x", schema={"type": "object"}) for i in range(3)]
    generate.sample_responses("m", tasks, 4, 0.9, 8, prompts_per_batch="auto", device="cpu")
    generate.generate_with_stats("m", tasks, batch_size="auto", device="cpu")
    assert calls == [generate.SAMPLE_BATCH_CPU, 8] == [2, 8]
