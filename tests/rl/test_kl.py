"""KL estimators on known log-probabilities, KL-as-loss and KL-in-reward."""

from __future__ import annotations

import math

import pytest
import torch

from harness.errors import ConfigError
from harness.rl.kl import KL_ESTIMATORS, kl_loss, kl_penalty_reward, kl_values
from tests.support.numeric import assert_close_rel

LN2 = math.log(2)
# token 0: pi = 0.5, ref = 0.25 (d = +ln 2); token 1: pi = 0.25, ref = 0.5 (d = -ln 2);
# token 2: masked, garbage.
LOGP = torch.tensor([[math.log(0.5), math.log(0.25), float("nan")]])
REF = torch.tensor([[math.log(0.25), math.log(0.5), 0.0]])
MASK = torch.tensor([[1, 1, 0]])


@pytest.mark.parametrize(
    ("name", "want"),
    [
        ("k1", [LN2, -LN2]),
        ("k2", [0.5 * LN2**2, 0.5 * LN2**2]),
        # k3 = ref/pi - log(ref/pi) - 1
        ("k3", [0.5 + LN2 - 1, 2 - LN2 - 1]),
        ("low_var_kl", [0.5 + LN2 - 1, 2 - LN2 - 1]),
        ("abs", [LN2, LN2]),
    ],
)
def test_estimators_on_known_log_probs(name, want):
    kl = kl_values(LOGP, REF, MASK, estimator=name)
    assert_close_rel(kl, torch.tensor([[*want, 0.0]]), rel=1e-6)


def test_k3_is_clamped_like_verl():
    # pi(token) = e^-30 times ref: exp(30) would explode; verl clamps log ratio to 20, value to 10
    kl = kl_values(torch.tensor([[-30.0]]), torch.tensor([[0.0]]), torch.ones(1, 1), estimator="k3")
    assert kl.item() == 10.0


def test_kl_loss_is_unscaled_aggregate_and_differentiable():
    logp = LOGP.clone().requires_grad_(True)
    loss = kl_loss(logp, REF, MASK, estimator="k2", agg_mode="token-mean")
    assert loss.item() == pytest.approx(0.5 * LN2**2)
    loss.backward()
    # d(0.5 d^2)/dlogp = d, averaged over 2 tokens
    torch.testing.assert_close(logp.grad, torch.tensor([[LN2 / 2, -LN2 / 2, 0.0]]))


def test_kl_penalty_reward_is_negative_scaled_and_detached():
    logp = LOGP.clone().requires_grad_(True)
    r = kl_penalty_reward(logp, REF, MASK, estimator="k1", coef=0.1)
    assert not r.requires_grad
    torch.testing.assert_close(r, torch.tensor([[-0.1 * LN2, 0.1 * LN2, 0.0]]))
    with pytest.raises(ConfigError, match=">= 0"):
        kl_penalty_reward(logp, REF, MASK, estimator="k1", coef=-1.0)


def test_unknown_estimator():
    assert KL_ESTIMATORS.names() == ["abs", "k1", "k2", "k3", "low_var_kl"]
    with pytest.raises(ConfigError, match="unknown KL estimator 'full'"):
        kl_values(LOGP, REF, MASK, estimator="full")
