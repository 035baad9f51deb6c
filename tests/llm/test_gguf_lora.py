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
from harness.llm.gguf_lora import delta_lora_tensors, delta_weights, write_lora_gguf, write_tensors_gguf
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
    torch.manual_seed(0)  # PEFT draws lora_A from the global generator
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


def test_delta_weights_are_the_factored_adapters_product_densely(lora_policy):
    """What the Q8_0 rollout weights add to the base (delta_weights): for every adapted linear the
    dense difference merged - base in llama.cpp's row order, equal to the product of the adapter
    delta_lora_tensors factors it into (whose q/k rows carry the permutation the engine test above
    shows it needs); nothing else."""
    import numpy as np
    from transformers import AutoModelForCausalLM

    from harness.llm.model_files import resolve_model

    policy, _tok = lora_policy
    base = AutoModelForCausalLM.from_pretrained(str(resolve_model("default")), dtype=torch.float32)
    merged = copy.deepcopy(policy).merge_and_unload()
    dense = delta_weights(base, merged)
    tensors, _rank = delta_lora_tensors(base, merged)
    assert len(dense) == 70  # 7 linears x layers 20-29
    assert set(dense) == {k.removesuffix(".lora_a") for k in tensors if k.endswith(".lora_a")}
    for name, d in dense.items():
        product = tensors[f"{name}.lora_b"].astype(np.float64) @ tensors[f"{name}.lora_a"].astype(np.float64)
        # merged - base carries the float32 rounding of the merged weight (relative to the weight's
        # own magnitude, not the difference's): measured at most 1.9e-7 where |W| reaches about 1
        assert np.abs(d - product).max() <= 2e-6 * max(1.0, np.abs(product).max()), name
    q = "blk.20.attn_q.weight"
    hf = (
        merged.model.layers[20].self_attn.q_proj.weight - base.model.layers[20].self_attn.q_proj.weight
    ).detach()
    assert not np.allclose(dense[q], hf.numpy(), atol=0)  # q's rows are in llama.cpp's order, not HF's


@pytest.mark.slow
def test_a_merged_checkpoint_served_as_its_own_q8_weights(lora_policy, tmp_path: Path):
    """--rollout-weights q8_0 from a merged checkpoint: the base re-quantised with the checkpoint's
    difference added (no adapter at all) serves the checkpoint as closely as the Q8_0 base with
    the difference as an adapter does."""
    from transformers import AutoModelForCausalLM

    from harness.llm.gguf_requant import requantize_gguf
    from harness.llm.llamacpp_backend import LlamaCppBackend
    from harness.llm.model_files import resolve_gguf, resolve_model

    policy, tok = lora_policy
    base = AutoModelForCausalLM.from_pretrained(str(resolve_model("default")), dtype=torch.float32)
    merged = copy.deepcopy(policy).merge_and_unload()
    q8_base = requantize_gguf(resolve_gguf("default"), tmp_path / "base.gguf", "q8_0")
    q8_merged = requantize_gguf(
        resolve_gguf("default"), tmp_path / "merged.gguf", "q8_0", add=delta_weights(base, merged)
    )
    tensors, rank = delta_lora_tensors(base, merged)
    start = write_tensors_gguf(tensors, float(rank), tmp_path / "start.gguf")
    gaps = {}
    for name, gguf, lora, model in (
        ("base", q8_base, [], base),
        ("adapter", q8_base, [start], merged),
        ("merged", q8_merged, [], merged),
        ("merged_vs_base", q8_merged, [], base),
    ):
        e = LlamaCppBackend(
            BackendSpec(kind="llamacpp", model=str(gguf), threads=1, n_ctx=512),
            lora=lora,
            logprobs=True,
            child=True,
        )
        try:
            gaps[name] = engine_gap(e, model, tok)
        finally:
            e.close()
    # as close to the checkpoint as the base + difference adapter on the same Q8_0 base (the route
    # it replaces; measured over unseeded adapters: 0.94-1.09x of it, 1.2-1.8x the base's own gap)
    assert gaps["merged"] <= 1.25 * gaps["adapter"], gaps
    assert gaps["merged_vs_base"] >= 3 * gaps["merged"], gaps  # the difference is served
