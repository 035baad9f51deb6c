"""Per-token KL estimators between the policy and the reference model, and their two uses.

With ``logp = log pi(token)``, ``ref = log pi_ref(token)`` (both (B, T)) and ``d = logp - ref``
(Schulman 2020, "Approximating KL divergence"; verl ``kl_penalty``):

==========================  ====================================================================
name                        per-token value
==========================  ====================================================================
``k1``                      ``d``                                   (unbiased, can be negative)
``k2``                      ``0.5 * d**2``                                    (ARENA's choice)
``k3`` / ``low_var_kl``     ``exp(-d) - (-d) - 1``, with ``-d`` clamped to [-20, 20] and the
                            result clamped to [-10, 10] (verl)   (GRPO / DeepSeekMath Eq. 4)
``abs``                     ``|d|``
==========================  ====================================================================

Where the KL goes is an explicit choice (``AlgoConfig.kl_placement``), never both:

* ``"loss"``: ``kl_loss(...)`` — differentiable in ``log_prob``; the trainer adds
  ``kl_coef * kl_loss`` to the policy loss (GRPO, Search-R1 lineage, ARENA).
* ``"reward"``: ``kl_penalty_reward(...)`` — ``-kl_coef * KL`` as detached per-token rewards,
  passed to the advantage estimator as ``AdvantageBatch.token_rewards`` (PPO / REINFORCE++:
  verl ``use_kl_in_reward``, computed from the rollout policy's log-probs).

Masked positions are 0 and carry no gradient.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from harness.errors import ConfigError
from harness.registry import Registry
from harness.rl.losses import agg_loss
from harness.rl.masked import as_bool, masked_fill_zero

K3_LOG_RATIO_CLAMP = 20.0
K3_VALUE_CLAMP = 10.0

KL_ESTIMATORS: Registry[Callable[[Tensor], Tensor]] = Registry("KL estimator")
"""name -> function of ``d = log_prob - ref_log_prob`` (elementwise)."""


@KL_ESTIMATORS.register("k1")
def k1(d: Tensor) -> Tensor:
    return d


@KL_ESTIMATORS.register("k2")
def k2(d: Tensor) -> Tensor:
    return 0.5 * d.square()


@KL_ESTIMATORS.register("k3")
def k3(d: Tensor) -> Tensor:
    x = (-d).clamp(-K3_LOG_RATIO_CLAMP, K3_LOG_RATIO_CLAMP)
    return (torch.exp(x) - x - 1.0).clamp(-K3_VALUE_CLAMP, K3_VALUE_CLAMP)


KL_ESTIMATORS.register("low_var_kl", k3)


@KL_ESTIMATORS.register("abs")
def abs_kl(d: Tensor) -> Tensor:
    return d.abs()


def kl_values(log_prob: Tensor, ref_log_prob: Tensor, mask: Tensor, *, estimator: str) -> Tensor:
    """Per-token KL estimate (B, T), 0 at masked positions; differentiable in ``log_prob``."""
    if log_prob.shape != ref_log_prob.shape or log_prob.shape != mask.shape:
        raise ConfigError(
            f"log_prob {tuple(log_prob.shape)}, ref_log_prob {tuple(ref_log_prob.shape)} and mask "
            f"{tuple(mask.shape)} must be the same (B, T)"
        )
    fn = KL_ESTIMATORS.get(estimator)
    valid = as_bool(mask)
    d = masked_fill_zero(log_prob - ref_log_prob.detach(), valid)
    return masked_fill_zero(fn(d), valid)


def kl_loss(
    log_prob: Tensor,
    ref_log_prob: Tensor,
    mask: Tensor,
    *,
    estimator: str,
    agg_mode: str,
    norm_length: int | None = None,
    num_units: float | None = None,
) -> Tensor:
    """KL-as-loss: ``agg_loss(kl_values(...), mask, agg_mode, ...)``, a scalar **not** multiplied
    by ``kl_coef`` (the trainer adds ``kl_coef * kl_loss``; log the unscaled value)."""
    kl = kl_values(log_prob, ref_log_prob, mask, estimator=estimator)
    return agg_loss(kl, mask, agg_mode, norm_length=norm_length, num_units=num_units)


def kl_penalty_reward(
    log_prob: Tensor, ref_log_prob: Tensor, mask: Tensor, *, estimator: str, coef: float
) -> Tensor:
    """KL-in-reward: per-token rewards ``-coef * KL`` (B, T), detached, 0 where masked.

    Pass the result as ``AdvantageBatch.token_rewards``; ``log_prob`` should be the rollout
    (old) policy's log-probs. verl uses ``k1`` here with a fixed coefficient.
    """
    if coef < 0:
        raise ConfigError(f"KL coefficient must be >= 0, got {coef}")
    with torch.no_grad():
        return -coef * kl_values(log_prob.detach(), ref_log_prob, mask, estimator=estimator)
