"""Policy-gradient losses: loss aggregation, the clipped PPO/GRPO/DAPO surrogate, entropy.

Shapes: ``B`` trajectories, ``T`` response positions, ``V`` vocabulary. Every token tensor is
(B, T); masks are binary (B, T) (``bool`` or numeric, non-zero = valid). Masked positions never
contribute to a loss, a statistic or a gradient (their inputs are replaced by 0 before any
arithmetic; see ``harness.rl.masked``).

Loss aggregation (``agg_loss``), with ``m`` the mask, ``L`` the per-token loss,
``n_i = sum_t m[i,t]`` and ``S`` the set of rows with ``n_i > 0``:

=============================  ===============================================================
mode                           value
=============================  ===============================================================
``token-mean``                 ``sum_{i,t} m L / N_tok``,  ``N_tok = sum_i n_i``   (DAPO; verl)
``seq-mean-token-mean``        ``sum_{i in S} (sum_t m L / n_i) / N_seq``, ``N_seq = |S|``
                               (the original GRPO 1/G sum_i 1/|o_i| sum_t)
``seq-mean-token-sum``         ``sum_{i,t} m L / N_seq``
``seq-mean-token-sum-norm``    ``sum_{i,t} m L / (N_seq * norm_length)`` (Dr. GRPO: a constant
                               ``norm_length``, the generation budget, replaces ``n_i``)
=============================  ===============================================================

``norm_length`` is required for ``seq-mean-token-sum-norm`` and refused otherwise; it is never
read off the tensor's padded width (verl uses ``mask.shape[-1]``, which changes with padding and
omits the 1/N_seq; TRL's ``dr_grpo`` and the Dr. GRPO code divide by ``B * max_len`` like us).
Rows without any valid token (fully filtered samples, padding rows) are not sequences of the
batch: they are left out of ``N_seq``.

``num_units`` overrides the denominator count (``N_tok`` or ``N_seq``): pass
``agg_units(mask_of_the_whole_minibatch, mode)`` to every micro-batch and the micro-batch losses
sum exactly to the mini-batch loss (gradient accumulation without bias). An empty batch gives 0.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from harness.errors import ConfigError
from harness.rl.masked import (
    as_bool,
    masked_count,
    masked_fill_zero,
    masked_mean,
    masked_sum,
    masked_whiten,
)
from harness.rl.names import AGG_MODES, POLICY_LOSSES, AggMode  # torch-free; re-exported here

__all__ = [
    "AGG_MODES",
    "AggMode",
    "POLICY_LOSSES",
    "PolicyLossStats",
    "agg_loss",
    "agg_units",
    "entropy_from_logits",
    "log_probs_from_logits",
    "masked_mean",
    "masked_sum",
    "masked_whiten",
    "policy_loss",
]

LOG_RATIO_CLAMP = 20.0
"""|log(pi/pi_old)| is clamped to 20 before ``exp`` (verl does the same), so one wild token
cannot overflow the ratio; the gradient is 0 beyond the clamp."""


def _check_mode(mode: str, norm_length: int | None) -> None:
    if mode not in AGG_MODES:
        raise ConfigError(f"unknown loss aggregation mode {mode!r}; known: {', '.join(AGG_MODES)}")
    if mode == "seq-mean-token-sum-norm":
        if norm_length is None or norm_length <= 0:
            raise ConfigError(
                "loss_agg_mode 'seq-mean-token-sum-norm' needs a positive norm_length (max response length)"
            )
    elif norm_length is not None:
        raise ConfigError(f"norm_length is only used by 'seq-mean-token-sum-norm', not by {mode!r}")


def agg_units(mask: Tensor, mode: str) -> float:
    """The denominator count of ``mode`` for this mask: valid tokens (``token-mean``) or rows
    with at least one valid token (every ``seq-mean-*`` mode)."""
    if mode not in AGG_MODES:
        raise ConfigError(f"unknown loss aggregation mode {mode!r}; known: {', '.join(AGG_MODES)}")
    if mode == "token-mean":
        return float(masked_count(mask).item())
    return float((masked_count(mask, dim=-1) > 0).sum().item())


def agg_loss(
    loss_mat: Tensor,
    mask: Tensor,
    mode: str,
    *,
    norm_length: int | None = None,
    num_units: float | None = None,
) -> Tensor:
    """Aggregate a (B, T) per-token loss to a scalar (formulas in the module docstring)."""
    _check_mode(mode, norm_length)
    if loss_mat.shape != mask.shape or loss_mat.dim() != 2:
        raise ConfigError(
            f"loss_mat {tuple(loss_mat.shape)} and mask {tuple(mask.shape)} must both be (B, T)"
        )
    units = agg_units(mask, mode) if num_units is None else float(num_units)
    if units < 0:
        raise ConfigError(f"num_units must be >= 0, got {units}")
    denom = max(units, 1.0)
    if mode == "token-mean":
        return masked_sum(loss_mat, mask) / denom
    if mode == "seq-mean-token-mean":
        per_seq = masked_sum(loss_mat, mask, dim=-1) / masked_count(mask, dim=-1).to(loss_mat.dtype).clamp(
            min=1
        )
        return per_seq.sum() / denom
    total = masked_sum(loss_mat, mask)
    if mode == "seq-mean-token-sum":
        return total / denom
    assert norm_length is not None  # checked by _check_mode
    return total / (denom * norm_length)


@dataclass(frozen=True)
class PolicyLossStats:
    """Diagnostics of one ``policy_loss`` call, over valid tokens (all 0.0 for an empty mask).

    clip_frac_high: fraction with A > 0 and ratio > 1 + clip_high (upper clip active, no gradient).
    clip_frac_low: fraction with A < 0 and ratio < 1 - clip_low (lower clip active, no gradient).
    clip_frac: their sum.
    dual_clip_frac: fraction with A < 0 and ratio > dual_clip_c (0 when dual clip is off).
    approx_kl: mean k3 estimate of KL(pi_old || pi) = mean(ratio - 1 - log ratio), >= 0.
    ratio_mean / ratio_min / ratio_max: of ratio = pi / pi_old.
    num_tokens: number of valid tokens the statistics average over.
    """

    clip_frac_low: float
    clip_frac_high: float
    clip_frac: float
    dual_clip_frac: float
    approx_kl: float
    ratio_mean: float
    ratio_min: float
    ratio_max: float
    num_tokens: int


def policy_loss(
    log_prob: Tensor,
    old_log_prob: Tensor,
    advantages: Tensor,
    mask: Tensor,
    *,
    clip_low: float,
    clip_high: float,
    agg_mode: str,
    dual_clip_c: float | None,
    norm_length: int | None = None,
    num_units: float | None = None,
) -> tuple[Tensor, PolicyLossStats]:
    """Clipped surrogate with decoupled clip range (DAPO clip-higher) and optional dual clip.

    Per valid token, with ``ratio = exp(clamp(log_prob - old_log_prob, +-20))`` and advantage A::

        L = max(-A * ratio, -A * clamp(ratio, 1 - clip_low, 1 + clip_high))
        if dual_clip_c is not None and A < 0:  L = min(L, -A * dual_clip_c)   (Ye et al. 2020)

    then ``agg_loss(L, mask, agg_mode, norm_length=..., num_units=...)``. Symmetric PPO/GRPO is
    ``clip_low == clip_high`` (0.2); DAPO uses 0.2 / 0.28. ``log_prob`` carries the gradient;
    ``old_log_prob`` and ``advantages`` are treated as constants.

    Returns ``(loss, PolicyLossStats)``.
    """
    if not (0.0 < clip_low < 1.0) or clip_high <= 0.0:
        raise ConfigError(f"need 0 < clip_low < 1 and clip_high > 0, got {clip_low}, {clip_high}")
    if dual_clip_c is not None and dual_clip_c <= 1.0:
        raise ConfigError(f"dual_clip_c must be > 1 (a ratio cap for negative advantages), got {dual_clip_c}")
    shape = log_prob.shape
    if old_log_prob.shape != shape or advantages.shape != shape or mask.shape != shape:
        raise ConfigError(
            f"log_prob {tuple(shape)}, old_log_prob {tuple(old_log_prob.shape)}, advantages "
            f"{tuple(advantages.shape)} and mask {tuple(mask.shape)} must all be the same (B, T)"
        )
    valid = as_bool(mask)
    adv = masked_fill_zero(advantages.detach(), valid)
    log_ratio = masked_fill_zero(log_prob - old_log_prob.detach(), valid)
    log_ratio = log_ratio.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    ratio = torch.exp(log_ratio)

    unclipped = -adv * ratio
    clipped = -adv * ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
    loss_mat = torch.maximum(unclipped, clipped)
    neg = adv < 0
    if dual_clip_c is not None:
        loss_mat = torch.where(neg, torch.minimum(loss_mat, -adv * dual_clip_c), loss_mat)
    loss = agg_loss(loss_mat, valid, agg_mode, norm_length=norm_length, num_units=num_units)

    with torch.no_grad():
        r = ratio.detach()
        lr = log_ratio.detach()
        high = (adv > 0) & (r > 1.0 + clip_high)
        low = neg & (r < 1.0 - clip_low)
        dual = neg & (r > dual_clip_c) if dual_clip_c is not None else torch.zeros_like(valid)
        n = int(masked_count(valid).item())
        frac_low = float(masked_mean(low.to(r.dtype), valid).item())
        frac_high = float(masked_mean(high.to(r.dtype), valid).item())
        stats = PolicyLossStats(
            clip_frac_low=frac_low,
            clip_frac_high=frac_high,
            clip_frac=frac_low + frac_high,
            dual_clip_frac=float(masked_mean(dual.to(r.dtype), valid).item()),
            approx_kl=float(masked_mean(r - 1.0 - lr, valid).item()),
            ratio_mean=float(masked_mean(r, valid).item()),
            ratio_min=float(r[valid].min().item()) if n else 0.0,
            ratio_max=float(r[valid].max().item()) if n else 0.0,
            num_tokens=n,
        )
    return loss, stats


def entropy_from_logits(logits: Tensor, mask: Tensor) -> Tensor:
    """Per-token entropy of softmax(logits): (B, T, V), (B, T) -> (B, T), 0 at masked positions.

    ``H = logsumexp(z) - sum softmax(z) * z``, computed only at valid positions (observation
    and padding tokens cost nothing). Differentiable; aggregate with ``agg_loss``. Apply any
    sampling temperature to the logits first.
    """
    if logits.dim() != 3 or logits.shape[:2] != mask.shape:
        raise ConfigError(f"logits {tuple(logits.shape)} must be (B, T, V) matching mask {tuple(mask.shape)}")
    valid = as_bool(mask)
    z = logits[valid]
    h = torch.logsumexp(z, dim=-1) - (torch.softmax(z, dim=-1) * z).sum(dim=-1)
    out = logits.new_zeros(mask.shape)
    out[valid] = h
    return out


def log_probs_from_logits(logits: Tensor, labels: Tensor) -> Tensor:
    """log softmax(logits)[label] per position: (B, T, V), (B, T) int -> (B, T).

    ``logits[:, t]`` must already be the distribution of ``labels[:, t]`` (shifted by the caller)
    and divided by the sampling temperature when one was used (verl and TRL do both).
    """
    if logits.dim() != 3 or logits.shape[:2] != labels.shape:
        raise ConfigError(
            f"logits {tuple(logits.shape)} must be (B, T, V) matching labels {tuple(labels.shape)}"
        )
    picked = torch.gather(logits, -1, labels.long().unsqueeze(-1)).squeeze(-1)
    return picked - torch.logsumexp(logits, dim=-1)


PolicyLossFn = Callable[
    [Tensor, Tensor, Tensor, Tensor, Any, "float | None"], "tuple[Tensor, PolicyLossStats]"
]
"""``(log_prob, old_log_prob, advantages, mask, algo, num_units) -> (loss, stats)``: a policy
loss as the trainer calls it, with the recipe's :class:`harness.rl.config.AlgoConfig` as ``algo``
(its clip ranges, aggregation mode, ...). Tensors are (B, T) as in :func:`policy_loss`."""


def clipped_policy_loss(
    log_prob: Tensor,
    old_log_prob: Tensor,
    advantages: Tensor,
    mask: Tensor,
    algo: Any,
    num_units: float | None,
) -> tuple[Tensor, PolicyLossStats]:
    """PPO's clipped surrogate with decoupled clip range and optional dual clip
    (:func:`policy_loss`; verl's ``loss_mode: vanilla``), with the recipe's settings."""
    return policy_loss(
        log_prob,
        old_log_prob,
        advantages,
        mask,
        clip_low=algo.clip_low,
        clip_high=algo.clip_high,
        agg_mode=algo.loss_agg_mode,
        dual_clip_c=algo.dual_clip_c,
        norm_length=algo.loss_norm_length,
        num_units=num_units,
    )
