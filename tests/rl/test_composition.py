"""The pieces composed the way a trainer uses them learn a toy bandit (signs and masks right)."""

from __future__ import annotations

import pytest
import torch

from harness.rl.advantages import AdvantageBatch, compute_advantages
from harness.rl.config import preset
from harness.rl.kl import kl_loss, kl_penalty_reward
from harness.rl.losses import POLICY_LOSSES, log_probs_from_logits


@pytest.mark.parametrize("name", ["grpo", "dr_grpo", "dapo", "reinforce_pp"])
def test_toy_bandit_learns_with_each_preset(name):
    """Responses are 3 tokens from a 5-token vocabulary; reward = fraction of tokens equal to 2.
    Position 1 is an 'observation' (mask 0): its token is forced and must not be learned."""
    torch.manual_seed(0)
    v, t, groups = 5, 3, 4
    cfg = preset(name).replace(
        group_size=6, train_batch_size=groups, mini_batch_size=groups, kl_placement="none", kl_coef=0.0
    )
    if cfg.loss_agg_mode == "seq-mean-token-sum-norm":
        cfg = cfg.replace(loss_norm_length=t)
    logits = torch.zeros(t, v, requires_grad=True)
    ref_logits = torch.zeros(t, v)
    opt = torch.optim.Adam([logits], lr=0.1)
    mask = torch.tensor([[1, 0, 1]]).expand(groups * cfg.group_size, t)
    b = groups * cfg.group_size
    for _ in range(60):
        with torch.no_grad():
            tokens = torch.distributions.Categorical(logits=logits).sample((b,))  # (B, T)
            tokens[:, 1] = 4  # the observation token
            scores = (tokens[:, [0, 2]] == 2).float().mean(-1)
            old_lp = log_probs_from_logits(logits.expand(b, t, v), tokens)
        group = torch.arange(groups).repeat_interleave(cfg.group_size)
        adv = compute_advantages(
            cfg.adv_estimator, AdvantageBatch(scores, group, mask), cfg.advantage_params()
        )
        for _ in range(cfg.ppo_epochs):
            lp = log_probs_from_logits(logits.expand(b, t, v), tokens)
            # the loss the preset names, with its settings, as the trainer calls it
            loss, _ = POLICY_LOSSES.get(cfg.policy_loss)(lp, old_lp, adv, mask, cfg, None)
            opt.zero_grad()
            loss.backward()
            opt.step()
    probs = torch.softmax(logits.detach(), -1)
    assert probs[0, 2] > 0.9 and probs[2, 2] > 0.9
    # the masked position never received a gradient: still uniform
    torch.testing.assert_close(probs[1], torch.full((v,), 1 / v))
    # KL pieces plug in the same way
    lp = log_probs_from_logits(logits.expand(b, t, v), tokens)
    ref = log_probs_from_logits(ref_logits.expand(b, t, v), tokens)
    assert kl_loss(lp, ref, mask, estimator="k3", agg_mode="token-mean").item() > 0
    assert (kl_penalty_reward(lp, ref, mask, estimator="k1", coef=0.1)[:, 1] == 0).all()
