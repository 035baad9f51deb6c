"""Loss aggregation, the clipped surrogate (clip-higher, dual clip), entropy and masking."""

from __future__ import annotations

import math

import pytest
import torch

from harness.errors import ConfigError
from harness.rl.kl import kl_loss
from harness.rl.losses import (
    AGG_MODES,
    agg_loss,
    agg_units,
    entropy_from_logits,
    log_probs_from_logits,
    policy_loss,
)
from harness.rl.masked import masked_mean, masked_var, masked_whiten

NAN, INF = float("nan"), float("inf")
# Ragged mask: row 0 has 3 tokens (sum 6), row 1 has 1 token (sum 5), row 2 none.
# Masked positions hold NaN/inf: they must not leak.
LOSS = torch.tensor([[1.0, 2.0, 3.0, NAN], [5.0, INF, -INF, 8.0], [9.0, 9.0, NAN, 9.0]])
MASK = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]], dtype=torch.bool)


@pytest.mark.parametrize(
    ("mode", "norm_length", "want"),
    [
        ("token-mean", None, 11 / 4),  # (6 + 5) / 4 tokens
        ("seq-mean-token-mean", None, (6 / 3 + 5 / 1) / 2),  # = 3.5; the empty row is no sequence
        ("seq-mean-token-sum", None, 11 / 2),
        ("seq-mean-token-sum-norm", 4, 11 / (2 * 4)),  # Dr. GRPO: / (N_seq * constant)
    ],
)
def test_agg_modes_exact(mode, norm_length, want):
    assert agg_loss(LOSS, MASK, mode, norm_length=norm_length).item() == pytest.approx(want, rel=1e-6)


def test_agg_float_mask_same_as_bool():
    assert agg_loss(LOSS, MASK.float(), "token-mean").item() == pytest.approx(2.75)


def test_agg_empty_mask_is_zero():
    empty = torch.zeros(2, 3, dtype=torch.bool)
    for mode in AGG_MODES:
        nl = 3 if mode == "seq-mean-token-sum-norm" else None
        assert agg_loss(torch.ones(2, 3), empty, mode, norm_length=nl).item() == 0.0


@pytest.mark.parametrize("mode", AGG_MODES)
def test_micro_batches_with_global_units_sum_to_full_batch(mode):
    g = torch.Generator().manual_seed(0)
    loss = torch.randn(6, 5, generator=g)
    mask = torch.rand(6, 5, generator=g) > 0.4
    mask[2] = False
    nl = 5 if mode == "seq-mean-token-sum-norm" else None
    full = agg_loss(loss, mask, mode, norm_length=nl)
    units = agg_units(mask, mode)
    parts = sum(
        agg_loss(loss[i : i + 2], mask[i : i + 2], mode, norm_length=nl, num_units=units)
        for i in range(0, 6, 2)
    )
    torch.testing.assert_close(parts, full)


def test_norm_length_is_explicit():
    with pytest.raises(ConfigError, match="norm_length"):
        agg_loss(LOSS, MASK, "seq-mean-token-sum-norm")
    with pytest.raises(ConfigError, match="only used by"):
        agg_loss(LOSS, MASK, "token-mean", norm_length=4)
    with pytest.raises(ConfigError, match="unknown loss aggregation mode"):
        agg_loss(LOSS, MASK, "sum")


def _one_token(ratio: float, adv: float, *, clip_low: float, clip_high: float, dual: float | None = None):
    log_prob = torch.tensor([[math.log(ratio)]], requires_grad=True)
    loss, stats = policy_loss(
        log_prob,
        torch.zeros(1, 1),
        torch.tensor([[adv]]),
        torch.ones(1, 1),
        clip_low=clip_low,
        clip_high=clip_high,
        agg_mode="token-mean",
        dual_clip_c=dual,
    )
    loss.backward()
    return loss.item(), log_prob.grad.item(), stats


def test_clip_higher_leaves_ratio_between_the_two_bounds_unclipped():
    # ratio 1.25 > 1 + 0.2 but < 1 + 0.28, positive advantage
    loss, grad, stats = _one_token(1.25, 1.0, clip_low=0.2, clip_high=0.28)
    assert loss == pytest.approx(-1.25)
    assert grad == pytest.approx(-1.25)  # d(-A * exp(logp)) / dlogp
    assert stats.clip_frac_high == 0.0 and stats.clip_frac == 0.0
    # the same token under symmetric clipping is clipped: loss -1.2, no gradient
    loss, grad, stats = _one_token(1.25, 1.0, clip_low=0.2, clip_high=0.2)
    assert loss == pytest.approx(-1.2)
    assert grad == 0.0
    assert stats.clip_frac_high == 1.0 and stats.clip_frac_low == 0.0
    # above 1 + clip_high: clipped at 1.28
    loss, grad, stats = _one_token(1.3, 1.0, clip_low=0.2, clip_high=0.28)
    assert loss == pytest.approx(-1.28)
    assert grad == 0.0


def test_lower_clip_only_for_negative_advantage():
    loss, grad, stats = _one_token(0.7, -1.0, clip_low=0.2, clip_high=0.28)
    assert loss == pytest.approx(0.8) and grad == 0.0
    assert stats.clip_frac_low == 1.0
    loss, grad, stats = _one_token(0.7, 1.0, clip_low=0.2, clip_high=0.28)
    assert loss == pytest.approx(-0.7) and grad == pytest.approx(-0.7)
    assert stats.clip_frac == 0.0


def test_dual_clip_caps_negative_advantage_loss():
    loss, grad, stats = _one_token(4.0, -1.0, clip_low=0.2, clip_high=0.2, dual=3.0)
    assert loss == pytest.approx(3.0) and grad == 0.0
    assert stats.dual_clip_frac == 1.0
    loss, grad, stats = _one_token(4.0, -1.0, clip_low=0.2, clip_high=0.2, dual=None)
    assert loss == pytest.approx(4.0) and grad == pytest.approx(4.0)
    assert stats.dual_clip_frac == 0.0
    # positive advantage: dual clip never applies
    loss, _, stats = _one_token(4.0, 1.0, clip_low=0.2, clip_high=0.2, dual=3.0)
    assert loss == pytest.approx(-1.2) and stats.dual_clip_frac == 0.0


def test_policy_loss_stats_exact():
    ratios = torch.tensor([[1.25, 0.5, 1.0, 7.0]])
    adv = torch.tensor([[1.0, -1.0, 2.0, 1.0]])
    mask = torch.tensor([[1, 1, 1, 0]])
    _, stats = policy_loss(
        ratios.log(),
        torch.zeros(1, 4),
        adv,
        mask,
        clip_low=0.2,
        clip_high=0.2,
        agg_mode="token-mean",
        dual_clip_c=None,
    )
    assert stats.num_tokens == 3
    assert stats.clip_frac_high == pytest.approx(1 / 3)  # 1.25 with A > 0
    assert stats.clip_frac_low == pytest.approx(1 / 3)  # 0.5 with A < 0
    assert stats.clip_frac == pytest.approx(2 / 3)
    assert stats.ratio_mean == pytest.approx((1.25 + 0.5 + 1.0) / 3)
    assert (stats.ratio_min, stats.ratio_max) == (pytest.approx(0.5), pytest.approx(1.25))
    k3 = [r - 1 - math.log(r) for r in (1.25, 0.5, 1.0)]
    assert stats.approx_kl == pytest.approx(sum(k3) / 3)


def test_policy_loss_seq_mean_token_mean_value():
    # ratio 1 everywhere: token loss = -A; rows of 2 and 1 tokens
    adv = torch.tensor([[1.0, 3.0], [4.0, 0.0]])
    mask = torch.tensor([[1, 1], [1, 0]])
    loss, _ = policy_loss(
        torch.zeros(2, 2),
        torch.zeros(2, 2),
        adv,
        mask,
        clip_low=0.2,
        clip_high=0.2,
        agg_mode="seq-mean-token-mean",
        dual_clip_c=None,
    )
    assert loss.item() == pytest.approx(-((1 + 3) / 2 + 4) / 2)


def test_masked_positions_get_exactly_zero_gradient():
    torch.manual_seed(0)
    b, t, v = 3, 5, 7
    mask = torch.tensor([[1, 1, 0, 1, 0], [0, 0, 0, 0, 0], [1, 0, 1, 1, 1]], dtype=torch.bool)
    logits = torch.randn(b, t, v)
    logits[~mask] = INF  # garbage where masked
    logits.requires_grad_(True)
    log_prob = torch.randn(b, t)
    log_prob[~mask] = -INF
    log_prob.requires_grad_(True)
    old = torch.where(mask, log_prob.detach() + 0.1, torch.full((b, t), NAN))
    ref = torch.where(mask, log_prob.detach() - 0.2, torch.full((b, t), NAN))
    adv = torch.where(mask, torch.randn(b, t), torch.full((b, t), INF))
    for mode in AGG_MODES:
        nl = t if mode == "seq-mean-token-sum-norm" else None
        pg, _ = policy_loss(
            log_prob,
            old,
            adv,
            mask,
            clip_low=0.2,
            clip_high=0.28,
            agg_mode=mode,
            dual_clip_c=3.0,
            norm_length=nl,
        )
        kl = kl_loss(log_prob, ref, mask, estimator="k3", agg_mode=mode, norm_length=nl)
        ent = agg_loss(entropy_from_logits(logits, mask), mask, mode, norm_length=nl)
        total = pg + 0.1 * kl - 0.01 * ent
        assert torch.isfinite(total)
        log_prob.grad = None
        logits.grad = None
        total.backward()
        assert (log_prob.grad[~mask] == 0).all() and (logits.grad[~mask] == 0).all()
        assert torch.isfinite(log_prob.grad).all() and torch.isfinite(logits.grad).all()
        assert (log_prob.grad[mask] != 0).all()


def test_entropy_from_logits_exact():
    logits = torch.tensor([[[0.0, 0.0, 0.0, 0.0], [math.log(0.5), math.log(0.25), math.log(0.25), -INF]]])
    mask = torch.tensor([[1, 1]])
    h = entropy_from_logits(logits[:, :, :3].contiguous(), mask)
    torch.testing.assert_close(h, torch.tensor([[math.log(3), 0.5 * math.log(2) + 0.5 * math.log(4)]]))
    h = entropy_from_logits(logits[:, :1], torch.tensor([[0]]))
    assert h.item() == 0.0


def test_log_probs_from_logits():
    logits = torch.tensor([[[math.log(0.5) + 3, math.log(0.25) + 3, math.log(0.25) + 3]]])
    lp = log_probs_from_logits(logits, torch.tensor([[1]]))
    assert lp.item() == pytest.approx(math.log(0.25))


def test_masked_helpers():
    x = torch.tensor([[1.0, 2.0, NAN], [3.0, INF, 4.0]])
    m = torch.tensor([[1, 1, 0], [1, 0, 1]])
    assert masked_mean(x, m).item() == pytest.approx(2.5)
    torch.testing.assert_close(masked_mean(x, m, dim=-1), torch.tensor([1.5, 3.5]))
    assert masked_var(x, m, unbiased=True).item() == pytest.approx(5 / 3)
    assert masked_var(x, m, unbiased=False).item() == pytest.approx(1.25)
    w = masked_whiten(x, m, unbiased=False, eps=0.0)
    s = math.sqrt(1.25)
    torch.testing.assert_close(w, torch.tensor([[-1.5 / s, -0.5 / s, 0.0], [0.5 / s, 0.0, 1.5 / s]]))
    one = torch.tensor([[3.0, 0.0]])
    assert masked_whiten(one, torch.tensor([[1, 0]]), unbiased=True, eps=1e-8).abs().sum() == 0


def test_policy_loss_argument_checks():
    z = torch.zeros(1, 1)
    with pytest.raises(ConfigError, match="dual_clip_c"):
        policy_loss(z, z, z, z, clip_low=0.2, clip_high=0.2, agg_mode="token-mean", dual_clip_c=0.5)
    with pytest.raises(ConfigError, match="clip_low"):
        policy_loss(z, z, z, z, clip_low=1.2, clip_high=0.2, agg_mode="token-mean", dual_clip_c=None)
    with pytest.raises(ConfigError, match="same"):
        policy_loss(
            z, torch.zeros(1, 2), z, z, clip_low=0.2, clip_high=0.2, agg_mode="token-mean", dual_clip_c=None
        )
