"""Generation throughput (pytest-benchmark). The tiny-model benchmark runs in the default suite (once,
with --benchmark-disable); the SmolLM2 one is slow. tokens/s land in the benchmark's extra_info."""

from __future__ import annotations

import time

import pytest

from harness.llm import BackendSpec, make_backend

QUESTIONS = [
    "Write a long story about a dragon.",
    "Explain how rain forms, in detail.",
    "Describe the history of Rome.",
    "Write a poem about the sea.",
    "Explain photosynthesis step by step.",
    "Describe a day in the life of a farmer.",
    "Write an essay about friendship.",
    "Explain how computers work.",
]


def _tokens_per_s(backend, prompts, max_new_tokens):
    t0 = time.perf_counter()
    out = backend.generate(prompts, max_new_tokens=max_new_tokens, stop=["</answer>"])
    return sum(c.completion_tokens for c in out) / (time.perf_counter() - t0)


@pytest.mark.parametrize("batch", [1, 8])
def test_bench_tiny_generation(benchmark, tiny_backend, batch):
    prompts = [tiny_backend.chat_prompt([{"role": "user", "content": q}]) for q in QUESTIONS[:batch]]
    rate = benchmark.pedantic(_tokens_per_s, args=(tiny_backend, prompts, 32), rounds=2, iterations=1)
    benchmark.extra_info["tokens_per_s"] = rate
    assert rate > 0


@pytest.mark.slow
@pytest.mark.parametrize("batch", [1, 8])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_bench_smollm2_generation(benchmark, smollm2_dir, batch, dtype):
    b = make_backend(BackendSpec(model="default", dtype=dtype, max_batch_size=8))
    prompts = [b.chat_prompt([{"role": "user", "content": q}]) for q in QUESTIONS[:batch]]
    rate = benchmark.pedantic(_tokens_per_s, args=(b, prompts, 128), rounds=1, iterations=1)
    benchmark.extra_info["tokens_per_s"] = rate
    assert rate > 0
