"""The learner's frozen trunk (harness.rl.sequences: frozen_depth, frozen_trunk, TrunkCache): the
layers below the first LoRA-adapted one are computed once per micro-batch and shared by the old,
reference and loss passes. Paired against the full forward: the same log-probs, the same
gradients, and the same training step."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import tests.rl.test_trainer as toy
from harness.rl.recipe import LoraConfig
from harness.rl.sequences import frozen_depth, frozen_trunk, pack_sequences, sequence_logprobs
from tests.rl.test_trainer import FavouriteWords, toy_recipe, toy_trainer
from tests.support.numeric import assert_close_rel, max_rel_diff

toy_model_dir = toy.toy_model_dir  # the fixture: a tiny random Llama over a word vocabulary


def _lora_policy(model_dir: Path, layers: tuple[int, ...] | None):
    from harness.rl.trainer import load_policy

    recipe = toy_recipe(1).model_copy(
        update={"lora": LoraConfig(rank=4, alpha=8.0, dropout=0.0, layers=layers)}
    )
    policy, _, _ = load_policy(str(model_dir), recipe, with_reference=False)
    torch.manual_seed(1)
    for name, p in policy.named_parameters():
        if "lora_B" in name:  # peft starts B at 0: make the adapter change the output
            torch.nn.init.normal_(p, std=0.5)
    return policy


def _pairs():
    g = torch.Generator().manual_seed(3)
    p1, p2 = (
        torch.randint(4, 64, (7,), generator=g).tolist(),
        torch.randint(4, 64, (4,), generator=g).tolist(),
    )
    prompts = [p1, p1, p1, p2, p2]  # two groups, prompts of two lengths (left padding)
    responses = [torch.randint(4, 64, (n,), generator=g).tolist() for n in (5, 9, 3, 8, 6)]
    return prompts, responses


def test_frozen_depth_counts_the_layers_below_the_first_adapted_one(toy_model_dir: Path):
    from transformers import AutoModelForCausalLM

    assert frozen_depth(_lora_policy(toy_model_dir, (1,))) == 1
    assert frozen_depth(_lora_policy(toy_model_dir, None)) == 0  # every layer adapted
    full = AutoModelForCausalLM.from_pretrained(str(toy_model_dir))
    assert frozen_depth(full) == 0  # full fine-tuning: the embeddings train


def test_the_trunk_gives_the_full_forwards_log_probs_and_gradients(toy_model_dir: Path):
    policy = _lora_policy(toy_model_dir, (1,))
    prompts, responses = _pairs()
    kw = dict(pad_id=0, temperature=0.7, with_entropy=False)
    pk = pack_sequences(policy, prompts, responses, pad_id=0)
    trunk = frozen_trunk(policy, pk, frozen_depth(policy))
    assert trunk.depth == 1 and not trunk.hidden.requires_grad

    def run(tr):
        policy.zero_grad(set_to_none=True)
        lp, _ = sequence_logprobs(policy, prompts, responses, trunk=tr, **kw)
        (lp * torch.linspace(-1.0, 2.0, lp.shape[1])).sum().backward()
        grads = [p.grad.clone() for p in policy.parameters() if p.requires_grad]
        return lp.detach(), grads

    full_lp, full_g = run(None)
    lp, g = run(trunk)
    assert_close_rel(lp, full_lp, what="log-probs")
    assert float(full_lp.abs().sum()) > 0 and len(g) == len(full_g) > 0
    for a, b in zip(g, full_g, strict=True):
        assert float(b.abs().max()) > 0
        assert_close_rel(a, b, what="LoRA gradient")
    # the reference (adapter off) over the same trunk: the base model's log-probs
    with policy.disable_adapter(), torch.no_grad():
        ref_full = sequence_logprobs(policy, prompts, responses, **kw)[0]
        ref = sequence_logprobs(policy, prompts, responses, trunk=trunk, **kw)[0]
    assert_close_rel(ref, ref_full, what="reference log-probs")
    assert max_rel_diff(ref_full, full_lp) > 1e-2  # the adapter does change the log-probs
    # a trunk of other pairs is refused, not silently misaligned
    with pytest.raises(ValueError, match="same pairs"):
        sequence_logprobs(policy, prompts[:2], responses[:2], trunk=trunk, **kw)


def test_a_bfloat16_trunk_is_a_rounding_of_the_float32_one(toy_model_dir: Path):
    policy = _lora_policy(toy_model_dir, (1,))
    prompts, responses = _pairs()
    pk = pack_sequences(policy, prompts, responses, pad_id=0)
    f32 = frozen_trunk(policy, pk, 1)
    b16 = frozen_trunk(policy, pk, 1, dtype=torch.bfloat16)
    assert b16.hidden.dtype == torch.float32  # handed on in the model's dtype
    d = max_rel_diff(b16.hidden, f32.hidden)
    assert 0 < d < 3e-2, d  # bfloat16 keeps 8 bits of mantissa (2**-8 = 4e-3 per rounding)


def test_a_training_step_with_the_trunk_equals_one_without(toy_model_dir: Path, tmp_path: Path, monkeypatch):
    """One GRPO step with a KL loss to the LoRA reference and 2 updates (so old log-probs too):
    the trunk-sharing trainer and the full-forward one (frozen depth forced to 0) sample the same
    rollouts and end with the same adapter and the same logged loss and KL."""
    import harness.rl.trainer as trainer_mod

    recipe = toy_recipe(1).model_copy(
        update={
            "lora": LoraConfig(rank=4, alpha=8.0, dropout=0.0, layers=(1,)),
            "algo": toy_recipe(1).algo.replace(
                mini_batch_size=2, kl_placement="loss", kl_coef=0.5, kl_estimator="low_var_kl"
            ),
        }
    )

    def run(sub: str):
        tr = toy_trainer(FavouriteWords(), recipe, toy_model_dir, tmp_path / sub, 4)
        res = tr.train()
        from transformers import AutoModelForCausalLM

        final = AutoModelForCausalLM.from_pretrained(str(tmp_path / sub / "out" / "final"))
        return res.steps[0].metrics, dict(final.named_parameters())

    from transformers import AutoModelForCausalLM

    import harness.rl.sequences as seq_mod

    calls: list[int] = []
    real = seq_mod.frozen_trunk
    monkeypatch.setattr(seq_mod, "frozen_trunk", lambda *a, **k: calls.append(1) or real(*a, **k))
    m1, w1 = run("trunk")
    assert calls, "the trunk was not used"
    monkeypatch.setattr(trainer_mod, "frozen_depth", lambda policy: 0)
    n_calls = len(calls)
    m0, w0 = run("full")
    assert len(calls) == n_calls  # the full forward computed no trunk
    assert m1["policy_tokens"] == m0["policy_tokens"] > 0
    for k in ("loss", "kl", "ratio_max"):
        assert m1[k] == pytest.approx(m0[k], rel=1e-4, abs=1e-7), k
    base = dict(AutoModelForCausalLM.from_pretrained(str(toy_model_dir)).named_parameters())
    for name, p in w0.items():
        assert_close_rel(w1[name], p, what=name)
    assert (
        max_rel_diff(
            w0["model.layers.1.self_attn.q_proj.weight"], base["model.layers.1.self_attn.q_proj.weight"]
        )
        > 1e-5
    )
