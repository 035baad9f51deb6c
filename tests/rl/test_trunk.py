"""The learner's frozen trunk (harness.rl.sequences: frozen_depth, frozen_trunk, TrunkCache): the
layers below the first LoRA-adapted one are computed once per micro-batch and shared by the old,
reference and loss passes; and the shared-prompt forward (share_prompts: a group's prompt runs
once, its KV cache repeated for the G responses). Paired against the full padded forward: the same
log-probs, the same gradients, and the same training step."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import tests.rl.test_trainer as toy
from harness.rl.recipe import LoraConfig
from harness.rl.sequences import frozen_depth, frozen_trunk, pack_sequences, pack_shared, sequence_logprobs
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


def _shared_against_padded(policy, prompts, responses, keep, with_trunk: bool):
    """Run the padded forward and the shared-prefix one (each over its own trunk when
    ``with_trunk``) with ``keep`` as the LM head's and the entropy's mask, backpropagate a sum that
    weighs every position differently, and assert the same log-probs, entropies and non-zero LoRA
    gradients; returns both log-probs (padded, shared)."""
    depth = frozen_depth(policy)
    kw = dict(pad_id=0, temperature=0.7, with_entropy=True, mask=keep, keep=keep)

    def run(share: bool):
        trunk = None
        if with_trunk:
            pack = pack_shared if share else pack_sequences
            trunk = frozen_trunk(policy, pack(policy, prompts, responses, pad_id=0), depth)
        policy.zero_grad(set_to_none=True)
        lp, ent = sequence_logprobs(policy, prompts, responses, trunk=trunk, share_prompts=share, **kw)
        weights = torch.linspace(-1.0, 2.0, lp.numel()).reshape(lp.shape)  # each row its own weight
        (lp * weights + 0.1 * ent).sum().backward()
        return lp.detach(), ent.detach(), [p.grad.clone() for p in policy.parameters() if p.requires_grad]

    lp0, ent0, g0 = run(False)
    lp1, ent1, g1 = run(True)
    assert_close_rel(lp1, lp0, what="log-probs")
    assert_close_rel(ent1, ent0, what="entropy")
    for a, b in zip(g1, g0, strict=True):
        assert float(b.abs().max()) > 0
        assert_close_rel(a, b, what="LoRA gradient")
    return lp0, lp1


@pytest.mark.parametrize("with_trunk", [False, True])
def test_the_shared_prompt_forward_gives_the_padded_forwards_log_probs_and_gradients(
    toy_model_dir: Path, with_trunk: bool
):
    policy = _lora_policy(toy_model_dir, (1,))
    prompts, responses = _pairs()
    pk = pack_shared(policy, prompts, responses, pad_id=0)
    assert pk.shared is not None and pk.shared.prompt_ids.shape[0] == 2  # two distinct prompts
    assert pk.shared.index.tolist() == [0, 0, 0, 1, 1]
    depth = frozen_depth(policy)
    t_len = max(map(len, responses))
    keep = torch.tensor([[1.0] * len(r) + [0.0] * (t_len - len(r)) for r in responses])  # padding: 0
    keep[:, 0] = 0.0  # the first response token is predicted at the prompt's last position: keep some
    keep[0, 0] = 1.0
    kw = dict(pad_id=0, temperature=0.7, with_entropy=True, mask=keep, keep=keep)
    lp0, lp1 = _shared_against_padded(policy, prompts, responses, keep, with_trunk)
    assert float(lp0.abs().sum()) > 0 and float(lp0[0, 0]) != 0.0
    if with_trunk:  # a trunk packed the other way is refused
        trunk = frozen_trunk(policy, pack_sequences(policy, prompts, responses, pad_id=0), depth)
        with pytest.raises(ValueError, match="share_prompts"):
            sequence_logprobs(policy, prompts, responses, trunk=trunk, share_prompts=True, **kw)


@pytest.mark.parametrize("with_trunk", [False, True])
def test_responses_that_start_alike_share_their_start_and_keep_the_padded_forwards_numbers(
    toy_model_dir: Path, with_trunk: bool
):
    """A search group's rollouts often issue the same query and see the same documents: the
    common start of a prompt's responses joins its prefix. Group 1's three responses share 4
    tokens, two of them a fifth (the first token after the prefix: one hidden state, two labels);
    group 2's two responses are identical (all but the last token shared)."""
    policy = _lora_policy(toy_model_dir, (1,))
    g = torch.Generator().manual_seed(5)

    def draw(n: int) -> list[int]:
        return torch.randint(4, 64, (n,), generator=g).tolist()

    p1, p2, start, same = draw(7), draw(4), draw(4), draw(6)
    t = draw(1)
    prompts = [p1, p1, p1, p2, p2]
    responses = [start + t, start + [(t[0] + 1) % 60 + 4, *draw(4)], start + t + draw(1), same, list(same)]
    pk = pack_shared(policy, prompts, responses, pad_id=0)
    assert pk.shared is not None
    assert pk.shared.prompt_ids.shape == (2, 11)  # p1 + 4 shared tokens; p2 + 5 (left-padded to 11)
    assert pk.shared.suffix_ids.shape == (5, 5)  # the longest rest: group 1's second response
    assert pk.shared.attention.sum(-1).tolist() == [12, 16, 13, 10, 10]  # prefix + suffix = the row
    t_len = max(map(len, responses))
    keep = torch.tensor([[1.0] * len(r) + [0.0] * (t_len - len(r)) for r in responses])
    lp0, lp1 = _shared_against_padded(policy, prompts, responses, keep, with_trunk)
    assert bool((lp0[keep.bool()] != 0).all())
    assert lp1[0, 4] != lp1[1, 4] and float(lp1[0, 4]) == float(lp1[2, 4])  # same state, own labels


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
    the trainer as it runs (frozen trunk, shared prompts) and the plain one (frozen depth forced to
    0, gradient checkpointing on, which turns prompt sharing off) sample the same rollouts and end
    with the same adapter and the same logged loss and KL."""
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
    shared: list[bool] = []
    real_lp = trainer_mod.sequence_logprobs
    monkeypatch.setattr(
        trainer_mod,
        "sequence_logprobs",
        lambda *a, **k: shared.append(k["share_prompts"]) or real_lp(*a, **k),
    )
    recipe = recipe.model_copy(update={"gradient_checkpointing": True})
    m0, w0 = run("full")
    assert shared and not any(shared)
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
