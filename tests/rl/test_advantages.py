"""Advantage estimators on hand-computed examples."""

from __future__ import annotations

import math

import pytest
import torch

from harness.errors import ConfigError
from harness.rl.advantages import (
    ADV_ESTIMATORS,
    AdvantageBatch,
    AdvantageParams,
    compute_advantages,
    discounted_returns,
    group_stats,
    outcome_token_rewards,
)
from tests.support.numeric import assert_close_rel

# Two groups, interleaved and with arbitrary ids: group 7 = [1, 0, 0, 1], group 3 = [2, 4, 6].
SCORES = torch.tensor([1.0, 2.0, 0.0, 4.0, 0.0, 6.0, 1.0])
GROUP = torch.tensor([7, 3, 7, 3, 7, 3, 7])
LENGTHS = [3, 1, 4, 2, 0, 4, 1]  # row 4 has no valid token (e.g. overlong-filtered)
T = 4
MASK = torch.tensor([[1.0 if t < n else 0.0 for t in range(T)] for n in LENGTHS])


def params(norm: bool, unbiased: bool = True, eps: float = 1e-6, gamma: float = 1.0) -> AdvantageParams:
    return AdvantageParams(norm_by_std=norm, std_unbiased=unbiased, eps=eps, gamma=gamma, lam=1.0)


def expected(seq: list[float]) -> torch.Tensor:
    return torch.tensor(seq).unsqueeze(-1) * MASK


def test_grpo_unbiased_std_matches_hand_computation():
    # group 7: mean 0.5, sum of squares 1, unbiased var 1/3 -> std sqrt(1/3) (torch.std, as verl)
    # group 3: mean 4, sum of squares 8, unbiased var 4 -> std 2
    a7 = 0.5 / (math.sqrt(1 / 3) + 1e-6)
    a3 = 2.0 / (2.0 + 1e-6)
    adv = compute_advantages("grpo", AdvantageBatch(SCORES, GROUP, MASK), params(norm=True))
    assert_close_rel(adv, expected([a7, -a3, -a7, 0.0, -a7, a3, a7]), rel=1e-6)
    # the filtered row 4 gets no advantage, but its score 0 still counted in group 7's mean
    assert adv[4].abs().sum() == 0


def test_grpo_population_std():
    # group 7: population std 0.5 -> +-1; group 3: population std sqrt(8/3) -> +-sqrt(3/2)
    a3 = 2.0 / math.sqrt(8 / 3)
    adv = compute_advantages(
        "grpo", AdvantageBatch(SCORES, GROUP, MASK), params(norm=True, unbiased=False, eps=0.0)
    )
    assert_close_rel(adv, expected([1.0, -a3, -1.0, 0.0, -1.0, a3, 1.0]), rel=1e-6)


def test_grpo_without_std_and_dr_grpo_are_mean_centred():
    want = expected([0.5, -2.0, -0.5, 0.0, -0.5, 2.0, 0.5])
    batch = AdvantageBatch(SCORES, GROUP, MASK)
    torch.testing.assert_close(compute_advantages("grpo", batch, params(norm=False)), want, rtol=0, atol=0)
    torch.testing.assert_close(compute_advantages("dr_grpo", batch, params(norm=False)), want, rtol=0, atol=0)


def test_dr_grpo_refuses_std_normalisation():
    with pytest.raises(ConfigError, match="norm_adv_by_std=False"):
        compute_advantages("dr_grpo", AdvantageBatch(SCORES, GROUP, MASK), params(norm=True))


def test_rloo_is_leave_one_out():
    # group 7, member with r=1: others mean 1/3 -> 2/3; r=0: others mean 2/3 -> -2/3
    # group 3: r=2 vs mean(4, 6)=5 -> -3; r=4 vs 4 -> 0; r=6 vs 3 -> 3
    adv = compute_advantages("rloo", AdvantageBatch(SCORES, GROUP, MASK), params(norm=False))
    assert_close_rel(adv, expected([2 / 3, -3.0, -2 / 3, 0.0, -2 / 3, 3.0, 2 / 3]), rel=1e-6)


@pytest.mark.parametrize("name", ["grpo", "dr_grpo", "rloo", "reinforce_pp_baseline"])
@pytest.mark.parametrize("unbiased", [True, False])
def test_degenerate_groups_give_zero_not_nan(name, unbiased):
    scores = torch.tensor([1.0, 1.0, 1.0, 5.0, 0.0, 2.0])
    group = torch.tensor([0, 0, 0, 1, 2, 2])  # all-equal group, singleton group, normal group
    mask = torch.ones(6, 3)
    adv = compute_advantages(
        name, AdvantageBatch(scores, group, mask), params(norm=name == "grpo", unbiased=unbiased)
    )
    assert torch.isfinite(adv).all()
    assert adv[:4].abs().sum() == 0  # all-equal group and the singleton: exactly zero
    assert (adv[4] < 0).all() and (adv[5] > 0).all()


def test_reinforce_pp_whitens_returns_over_batch_tokens():
    # gamma = 1, no token rewards: every valid token's return is its row's score.
    scores = torch.tensor([1.0, 0.0, 2.0])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 1]], dtype=torch.bool)
    # tokens 1,1,0,2,2,2: mean 4/3, squared deviations sum 10/3, unbiased var 2/3
    std = math.sqrt(2 / 3)
    want = torch.tensor(
        [[-1 / 3 / std, -1 / 3 / std, 0.0], [-4 / 3 / std, 0.0, 0.0], [2 / 3 / std, 2 / 3 / std, 2 / 3 / std]]
    )
    adv = compute_advantages(
        "reinforce_pp", AdvantageBatch(scores, torch.zeros(3, dtype=torch.long), mask), params(False, eps=0.0)
    )
    assert_close_rel(adv, want, rel=1e-6)


def test_reinforce_pp_baseline_group_mean_then_batch_whitening():
    # group 0 = [1, 0] (lengths 2, 2) -> +-0.5; group 1 = [3, 1] (lengths 1, 1) -> +-1
    # tokens .5 .5 -.5 -.5 1 -1: mean 0, sum of squares 3, unbiased var 3/5
    scores = torch.tensor([1.0, 0.0, 3.0, 1.0])
    group = torch.tensor([0, 0, 1, 1])
    mask = torch.tensor([[1, 1], [1, 1], [1, 0], [1, 0]])
    s = math.sqrt(3 / 5)
    want = torch.tensor([[0.5 / s, 0.5 / s], [-0.5 / s, -0.5 / s], [1 / s, 0.0], [-1 / s, 0.0]])
    adv = compute_advantages(
        "reinforce_pp_baseline", AdvantageBatch(scores, group, mask), params(False, eps=0.0)
    )
    assert_close_rel(adv, want, rel=1e-6)


def test_discounted_returns_skip_observation_tokens():
    # valid tokens 0, 2, 3 (token 1 is an observation); rewards -0.1 each, +1 at the end, gamma 0.5
    rewards = torch.tensor([[-0.1, 99.0, -0.1, 0.9]], dtype=torch.float64)
    mask = torch.tensor([[1, 0, 1, 1]])
    g = discounted_returns(rewards, mask, gamma=0.5)
    torch.testing.assert_close(g, torch.tensor([[0.075, 0.0, 0.35, 0.9]], dtype=torch.float64))


def test_reinforce_pp_with_kl_in_reward_uses_token_rewards():
    scores = torch.tensor([1.0, 0.0])
    mask = torch.tensor([[1, 0, 1, 1], [1, 1, 0, 0]])
    token_rewards = torch.tensor([[-0.1, 5.0, -0.1, -0.1], [-0.2, -0.2, 7.0, 7.0]])
    batch = AdvantageBatch(scores, torch.tensor([0, 1]), mask, token_rewards)
    adv = compute_advantages("reinforce_pp", batch, params(False, eps=0.0, gamma=0.5))
    # returns: row 0 [0.075, -, 0.35, 0.9]; row 1 [-0.2 + 0.5 * -0.2, -0.2] = [-0.3, -0.2]
    r = torch.tensor([0.075, 0.35, 0.9, -0.3, -0.2], dtype=torch.float64)
    z = (r - r.mean()) / r.std()
    want = torch.tensor([[z[0], 0, z[1], z[2]], [z[3], z[4], 0, 0]], dtype=torch.float32)
    assert_close_rel(adv, want, rel=1e-6)


def test_token_rewards_enter_sequence_return_of_group_estimators():
    # KL-in-reward with GRPO: R = score + sum of token rewards over valid tokens
    scores = torch.tensor([1.0, 1.0])
    mask = torch.tensor([[1, 1], [1, 0]])
    token_rewards = torch.tensor([[-0.25, -0.25], [-0.5, 100.0]])  # 100 sits on a masked token
    adv = compute_advantages(
        "grpo", AdvantageBatch(scores, torch.tensor([0, 0]), mask, token_rewards), params(norm=False)
    )
    # R = [0.5, 0.5] -> zero advantages
    assert adv.abs().sum() == 0


def test_adjust_hook_applies_to_sequence_advantages_before_broadcast():
    batch = AdvantageBatch(SCORES, GROUP, MASK)
    base = compute_advantages("grpo", batch, params(norm=False))
    adjusted = compute_advantages("grpo", batch, params(norm=False), adjust=lambda a: (a - 0.1) * 2.0)
    torch.testing.assert_close(adjusted, ((base[:, :1] - 0.1) * 2.0) * MASK)
    with pytest.raises(ConfigError, match="token-level"):
        compute_advantages("reinforce_pp", batch, params(False), adjust=lambda a: a)


def test_outcome_token_rewards_places_score_on_last_valid_token():
    mask = torch.tensor([[1, 0, 1, 0], [0, 0, 0, 0], [1, 1, 1, 1]])
    out = outcome_token_rewards(torch.tensor([2.0, 3.0, 4.0]), mask)
    torch.testing.assert_close(out, torch.tensor([[0, 0, 2.0, 0], [0, 0, 0, 0], [0, 0, 0, 4.0]]))


def test_group_stats():
    st = group_stats(SCORES, GROUP, unbiased=True)
    torch.testing.assert_close(st.size, torch.tensor([4.0, 3, 4, 3, 4, 3, 4], dtype=torch.float64))
    torch.testing.assert_close(st.mean[:2], torch.tensor([0.5, 4.0], dtype=torch.float64))
    torch.testing.assert_close(st.std[:2], torch.tensor([math.sqrt(1 / 3), 2.0], dtype=torch.float64))


def test_registry_names_and_unknown_estimator():
    assert ADV_ESTIMATORS.names() == [
        "dr_grpo",
        "gae",
        "grpo",
        "reinforce_pp",
        "reinforce_pp_baseline",
        "rloo",
    ]
    with pytest.raises(ConfigError, match="unknown advantage estimator 'vtrace'"):
        compute_advantages("vtrace", AdvantageBatch(SCORES, GROUP, MASK), params(False))


def test_batch_shape_errors():
    with pytest.raises(ConfigError, match="group must have shape"):
        AdvantageBatch(SCORES, GROUP[:3], MASK)
    with pytest.raises(ConfigError, match="integer"):
        AdvantageBatch(SCORES, GROUP.float(), MASK)
