"""A learner's LoRA adapter written as a llama.cpp GGUF adapter (harness.llm.gguf_lora) makes the
llama.cpp engine the learner's policy: on the packaged SmolLM2, the log-probs llama.cpp reports for
its own greedy tokens agree with transformers' (the learner's) as closely as the base model's do
without an adapter, while the adapter moves them far; a q/k adapter written without llama.cpp's
head permutation, or the base model alone, does not agree. The same holds for a merged checkpoint
served as base + its factored difference (how an SFT checkpoint reaches the engine).

Tolerance: llama.cpp multiplies the Q4_1 weights with 8-bit-quantised activations, transformers
the same weights dequantised in float32, so even without an adapter the two differ by about 0.04
nats per token on these prompts (measured: 0.039-0.062). The adapter must not add to that: its
gap must stay within 1.5x the base model's own gap, while the wrong constructions are at least 3x
(measured with the adapter below: base model 0.040 without adapter; with it, engine with the
adapter 0.048, engine without it 0.32, adapter without the q/k permutation 0.48 nats)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from harness.llm.base import BackendSpec
from harness.llm.gguf_lora import delta_lora_tensors, write_lora_gguf, write_tensors_gguf
from harness.rl.recipe import LoraConfig, Recipe
from harness.rl.sequences import sequence_logprobs
from harness.types import SamplingParams

pytestmark = [pytest.mark.llamacpp, pytest.mark.integration]  # the engine runs in a child process

BASE_GAP = 0.04  # llama.cpp vs transformers on the base model alone, these prompts (measured 0.0395)
QUESTIONS = [
    "Who wrote the novel Moby-Dick?",
    "What is the capital of Australia?",
    "Name three primary colors.",
]


@pytest.fixture(scope="module")
def lora_policy():
    from harness.rl.config import preset
    from harness.rl.trainer import load_policy

    recipe = Recipe(
        name="t",
        method="t",
        algo=preset("grpo"),
        steps=1,
        bench="none",
        max_new_tokens=8,
        max_turns=0,
        top_k=1,
        max_obs_tokens=8,
        micro_batch_size=1,
        lora=LoraConfig(
            rank=8,
            alpha=16.0,
            dropout=0.0,
            target_modules=("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"),
            layers=tuple(range(20, 30)),
        ),
    )
    policy, _, tok = load_policy("default", recipe, with_reference=False, device="cpu")
    policy.eval()
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():  # a trained-looking adapter: large on q/k (where the permutation matters)
        for n, p in policy.named_parameters():
            if "lora_B" in n:
                std = 0.5 if ("q_proj" in n or "k_proj" in n) else 0.03
                p.copy_(torch.randn(p.shape, generator=g) * std)
    return policy, tok


@pytest.fixture(scope="module")
def engine():
    from harness.llm.llamacpp_backend import LlamaCppBackend

    b = LlamaCppBackend(
        BackendSpec(kind="llamacpp", model="default", threads=1, n_ctx=512), logprobs=True, child=True
    )
    yield b
    b.close()


def engine_gap(engine, model, tok, questions=QUESTIONS, max_new_tokens: int = 24) -> float:
    """Mean |logp_engine - logp_transformers| over the engine's greedy tokens of ``questions``
    (also tests/llm/test_gguf_requant.py's measure)."""
    ids = [engine.prompt_ids(engine.chat_prompt([{"role": "user", "content": q}])) for q in questions]
    cs = engine.generate_ids(
        ids, stop=[], max_new_tokens=max_new_tokens, sampling=SamplingParams(), include_stop=True
    )
    with torch.no_grad():
        lp, _ = sequence_logprobs(
            model,
            ids,
            [c.token_ids for c in cs],
            pad_id=tok.pad_token_id or 0,
            temperature=1.0,
            with_entropy=False,
        )
    d = [
        (torch.tensor(c.logprobs, dtype=torch.float64) - lp[i, : len(c.token_ids)].double()).abs()
        for i, c in enumerate(cs)
    ]
    return float(torch.cat(d).mean())


def test_the_engine_with_the_written_adapter_is_the_learners_policy(lora_policy, engine, tmp_path: Path):
    policy, tok = lora_policy
    engine.set_adapters([])
    with policy.disable_adapter():
        base_gap = engine_gap(engine, policy, tok)
    assert 0 < base_gap < 0.1  # the engines' own numerics (see the module docstring)
    engine.set_adapters([write_lora_gguf(policy, tmp_path / "a.gguf")])
    lora_gap = engine_gap(engine, policy, tok)
    assert lora_gap <= 1.5 * base_gap, (lora_gap, base_gap)
    engine.set_adapters([])
    assert engine_gap(engine, policy, tok) >= 3 * lora_gap  # the adapter matters
    engine.set_adapters([write_lora_gguf(policy, tmp_path / "bad.gguf", permute=False)])
    assert engine_gap(engine, policy, tok) >= 3 * lora_gap  # and so does llama.cpp's q/k permutation


@pytest.mark.slow
def test_a_merged_checkpoint_served_as_base_plus_its_difference(lora_policy, engine, tmp_path: Path):
    from transformers import AutoModelForCausalLM

    from harness.llm.model_files import resolve_model

    policy, tok = lora_policy
    base = AutoModelForCausalLM.from_pretrained(str(resolve_model("default")), dtype=torch.float32)
    merged = copy.deepcopy(policy).merge_and_unload()
    tensors, rank = delta_lora_tensors(base, merged)
    assert rank == 8  # the merged difference of a rank-8 adapter is rank 8
    engine.set_adapters([write_tensors_gguf(tensors, float(rank), tmp_path / "start.gguf")])
    gap = engine_gap(engine, merged, tok)
    assert gap <= 1.5 * BASE_GAP, gap  # measured 0.049
    assert engine_gap(engine, base, tok) >= 3 * gap  # the difference adapter matters (measured 0.57)
    engine.set_adapters([])
