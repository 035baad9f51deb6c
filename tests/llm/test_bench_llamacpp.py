"""llama.cpp (xllamacpp) generation throughput (pytest-benchmark, ``tox -e bench``): ~300-token
prompts, 64 new tokens, greedy, one prompt vs a batch of 8 decoded together in parallel slots; the
SmolLM2 preset and the Qwen2.5-Coder-1.5B reader. Generated and prompt tokens per second land in
the benchmark's extra_info. Each test uses new prompts, so nothing comes from the prompt cache."""

from __future__ import annotations

import itertools
import time

import pytest

from harness.llm import BackendSpec, make_backend

TOPICS = ["a dragon", "the rain", "Rome", "the sea", "photosynthesis", "a farmer", "friendship", "computers"]
FILLER = (
    "Background notes: the archive contains letters, maps, ledgers and diaries written over many years "
    "by travellers, merchants and scholars who crossed the region in every season. "
)
_calls = itertools.count()


def _prompts(backend, batch: int) -> list[str]:
    tag = next(_calls)  # first in the prompt: no prefix is shared with an earlier round
    return [
        backend.chat_prompt(
            [{"role": "user", "content": f"[{tag}] Write a long, detailed story about {t}. " + FILLER * 9}]
        )
        for t in TOPICS[:batch]
    ]


def _rates(backend, prompts: list[str]) -> dict[str, float]:
    t0 = time.perf_counter()
    out = backend.generate(prompts, max_new_tokens=64)
    wall = time.perf_counter() - t0
    return {
        "generated_per_s": sum(c.completion_tokens for c in out) / wall,
        "prompt_tokens_per_s": sum(c.prompt_tokens for c in out) / wall,
        "prompt_tokens": sum(c.prompt_tokens for c in out) / len(out),
    }


@pytest.fixture(
    scope="module",
    params=["smollm2-135m-instruct", pytest.param("qwen2.5-coder-1.5b-instruct", marks=pytest.mark.slow)],
)
def llama_backend(request):
    b = make_backend(BackendSpec(kind="llamacpp", model=request.param, n_ctx=1024, max_batch_size=8))
    yield b
    b.close()


@pytest.mark.llamacpp
@pytest.mark.parametrize("batch", [1, 8])
def test_bench_llamacpp_generation(benchmark, llama_backend, batch):
    prompts = _prompts(llama_backend, batch)
    rates = benchmark.pedantic(_rates, args=(llama_backend, prompts), rounds=1, iterations=1)
    benchmark.extra_info.update(rates, model=llama_backend.spec.model, batch=batch)
    assert rates["prompt_tokens"] > 250
