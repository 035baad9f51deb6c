"""PPO with a critic: GAE over the model's tokens only (hand-computed), the clipped value loss,
the value model's positions, and the config contract (a critic exactly for ``gae``)."""

from __future__ import annotations

import pytest
import torch

from harness.errors import ConfigError
from harness.rl.advantages import AdvantageBatch, AdvantageParams, compute_advantages, gae_advantages_returns
from harness.rl.config import preset
from harness.rl.masked import masked_whiten
from harness.rl.ppo import value_loss
from tests.support.numeric import assert_close_rel, max_rel_diff


def _params(gamma: float, lam: float) -> AdvantageParams:
    return AdvantageParams(norm_by_std=False, std_unbiased=True, eps=1e-8, gamma=gamma, lam=lam)


def _close(t: torch.Tensor, expected) -> bool:
    want = torch.tensor(expected, dtype=torch.float64)
    return max_rel_diff(t.double(), want) <= 1e-6


def _batch(scores, mask, values, token_rewards=None) -> AdvantageBatch:
    return AdvantageBatch(
        scores=torch.tensor(scores, dtype=torch.float32),
        group=torch.arange(len(scores)),
        response_mask=torch.tensor(mask, dtype=torch.float32),
        token_rewards=None if token_rewards is None else torch.tensor(token_rewards, dtype=torch.float32),
        values=torch.tensor(values, dtype=torch.float32),
    )


def test_gae_by_hand_steps_over_observation_tokens():
    # row 0: model tokens at 0, 1 and 4; 2-3 are an observation whose values (9.0) and token
    # reward (5.0) must not count. gamma 0.9, lam 0.8, score 1 on the last model token:
    #   t=4: delta = 1 - 0.4 = 0.6                       A4 = 0.6
    #   t=1: delta = 0.9*0.4 - 0.2 = 0.16                A1 = 0.16 + 0.72*0.6   = 0.592
    #   t=0: delta = 0.9*0.2 - 0.5 = -0.32               A0 = -0.32 + 0.72*0.592 = 0.10624
    # row 1: no model token at all -> all zeros; row 2: a token reward of -0.1 on t=0 (a KL
    # penalty), score 2 on t=1: A1 = 2 - 0.3 = 1.7, A0 = -0.1 + 0.9*0.3 - 0.1 + 0.72*1.7 = 1.294
    b = _batch(
        scores=[1.0, 3.0, 2.0],
        mask=[[1, 1, 0, 0, 1], [0, 0, 0, 0, 0], [1, 1, 0, 0, 0]],
        values=[[0.5, 0.2, 9.0, 9.0, 0.4], [1.0, 1.0, 1.0, 1.0, 1.0], [0.1, 0.3, 7.0, 7.0, 7.0]],
        token_rewards=[[0.0, 0.0, 5.0, 5.0, 0.0], [0.0] * 5, [-0.1, 0.0, 5.0, 0.0, 0.0]],
    )
    adv, ret = gae_advantages_returns(b, _params(0.9, 0.8))
    expected = [[0.10624, 0.592, 0, 0, 0.6], [0] * 5, [1.294, 1.7, 0, 0, 0]]
    assert _close(adv, expected), adv
    returns = [[0.60624, 0.792, 0, 0, 1.0], [0] * 5, [1.394, 2.0, 0, 0, 0]]
    assert _close(ret, returns), ret
    # the estimator whitens over every model token of the batch, zero elsewhere
    out = compute_advantages("gae", b, _params(0.9, 0.8))
    assert torch.allclose(out, masked_whiten(adv, b.response_mask, unbiased=True, eps=1e-8).float())
    assert (out[b.response_mask == 0] == 0).all()


def test_gae_with_search_r1_gamma_lam_one_is_return_minus_value():
    b = _batch(scores=[2.0], mask=[[1, 1, 0, 1]], values=[[0.1, 0.2, 5.0, 0.3]])
    adv, ret = gae_advantages_returns(b, _params(1.0, 1.0))
    assert _close(adv, [[1.9, 1.8, 0.0, 1.7]]), adv
    assert _close(ret, [[2.0, 2.0, 0.0, 2.0]]), ret


def test_gae_needs_values_and_refuses_a_sequence_hook():
    b = AdvantageBatch(
        scores=torch.ones(1), group=torch.zeros(1, dtype=torch.long), response_mask=torch.ones(1, 2)
    )
    with pytest.raises(ConfigError, match="values"):
        compute_advantages("gae", b, _params(1.0, 1.0))
    with pytest.raises(ConfigError, match="adjust"):
        compute_advantages("gae", _batch([1.0], [[1, 1]], [[0, 0]]), _params(1.0, 1.0), lambda a: a)


def test_value_loss_is_clipped_and_ignores_observation_tokens():
    # token 0: V=2, V_old=0, R=1, clip 0.5: unclipped (2-1)^2 = 1, clipped (0.5-1)^2 = 0.25 -> max 1
    # token 1: V=0.2, V_old=0, R=1: unclipped 0.64, clipped (0.2-1)^2 = 0.64 -> 0.64
    # token 2: an observation with a huge error, masked out
    v = torch.tensor([[2.0, 0.2, 100.0]], requires_grad=True)
    old = torch.zeros(1, 3)
    ret = torch.tensor([[1.0, 1.0, -50.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    loss, st = value_loss(v, old, ret, mask, cliprange_value=0.5)
    assert float(loss.detach()) == pytest.approx(0.5 * (1.0 + 0.64) / 2)
    assert st.clip_frac == 0.0  # the clipped loss is never the larger one here
    loss.backward()
    # max picks the unclipped branch for token 0: d/dV 0.5 * (V - R)^2 / 2 = (2 - 1) / 2
    assert v.grad.tolist()[0] == pytest.approx([0.5, (0.2 - 1.0) / 2, 0.0])
    # a value that moved below V_old - c with the target above: the clipped branch is larger
    loss2, st2 = value_loss(
        torch.tensor([[-1.0]]),
        torch.zeros(1, 1),
        torch.tensor([[1.0]]),
        torch.ones(1, 1),
        cliprange_value=0.5,
    )
    assert float(loss2) == pytest.approx(0.5 * 4.0) and st2.clip_frac == 0.0
    loss3, st3 = value_loss(
        torch.tensor([[2.0]]), torch.zeros(1, 1), torch.tensor([[3.0]]), torch.ones(1, 1), cliprange_value=0.5
    )
    assert float(loss3) == pytest.approx(0.5 * (0.5 - 3.0) ** 2) and st3.clip_frac == 1.0


def test_a_critic_exactly_for_gae():
    p = preset("ppo")
    assert p.adv_estimator == "gae" and p.critic is not None and p.critic.lam == 1.0 and p.gamma == 1.0
    assert p.advantage_params().lam == 1.0
    with pytest.raises(ConfigError, match="critic"):
        p.replace(critic=None)
    with pytest.raises(ConfigError, match="critic"):
        preset("grpo").replace(critic=p.critic.model_dump())
    with pytest.raises(ConfigError, match="exactly one"):
        p.replace(critic={**p.critic.model_dump(), "lr_warmup_steps": 3})


def test_value_model_reads_the_state_before_each_response_token(tiny_dir):
    from transformers import AutoModelForCausalLM

    from harness.rl.ppo import ValueModel, sequence_values

    policy = AutoModelForCausalLM.from_pretrained(str(tiny_dir))
    critic = ValueModel.from_policy(policy)
    assert critic.backbone is not policy.model  # a copy: training it leaves the policy alone
    torch.nn.init.normal_(critic.head.weight)
    prompts, responses = [[1, 5, 9], [1, 7]], [[11, 12], [13, 14, 15]]
    v = sequence_values(critic, prompts, responses, pad_id=2)
    assert v.shape == (2, 3)
    for b in range(2):
        ids = torch.tensor([prompts[b] + responses[b]])
        h = critic.backbone(input_ids=ids).last_hidden_state
        full = critic.head(h).squeeze(-1)[0]
        n = len(responses[b])
        # relative to the row's largest value: a value near 0 keeps the rounding of the terms summed
        assert_close_rel(v[b, :n].detach(), full[len(prompts[b]) - 1 : len(prompts[b]) - 1 + n].detach())


def test_verl_export_maps_ppo_to_gae_with_the_critic(tmp_path):
    from harness.methods_registry import get_method
    from harness.verl.job import verl_overrides

    recipe = get_method("search_r1").recipes()["cpu-smoke"]
    base = preset("ppo")
    algo = base.replace(critic={**base.critic.model_dump(), "warmup_steps": 3, "lr_warmup_ratio": 0.015})
    ov = verl_overrides(recipe.model_copy(update={"algo": algo}), tmp_path, n_gpus=2, model_path="/m")
    for want in (
        "algorithm.adv_estimator=gae",
        "algorithm.gamma=1.0",
        "algorithm.lam=1.0",
        "critic.model.path=/m",
        "critic.optim.lr=1e-05",
        "critic.optim.lr_warmup_steps_ratio=0.015",
        "critic.cliprange_value=0.5",
        "critic.grad_clip=1.0",
        "trainer.critic_warmup=3",
        "actor_rollout_ref.rollout.n=1",
        "algorithm.use_kl_in_reward=true",
        "algorithm.kl_ctrl.kl_coef=0.001",
        "actor_rollout_ref.actor.use_kl_loss=false",
    ):
        assert want in ov, want
    grpo_ov = verl_overrides(recipe, tmp_path, n_gpus=2, model_path="/m")
    assert not any(o.startswith(("critic.", "algorithm.lam", "trainer.critic_warmup")) for o in grpo_ov)
