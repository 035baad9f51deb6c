"""Advantage estimators: outcome rewards per trajectory in, per-token advantages out.

Every estimator has the same signature (``AdvantageEstimator``)::

    estimator(batch: AdvantageBatch, params: AdvantageParams, adjust: SeqAdjust | None) -> (B, T)

and is looked up by name in ``ADV_ESTIMATORS`` (or called through ``compute_advantages``).
The result is float32-or-input-dtype, exactly 0 at every position where ``response_mask`` is 0,
detached (advantages are constants for the policy loss).

Let ``R_i`` be the *sequence return* of trajectory i: ``scores[i]`` plus the sum of its
``token_rewards`` over its valid tokens (the KL-in-reward penalty, when used; this is what verl
gets by summing its token-level rewards). For a group g with n members, ``mean_g`` is the group
mean of R, ``std_g`` its standard deviation (divisor ``n - 1`` if ``params.std_unbiased`` else
``n``; ``torch.std`` and verl use ``n - 1``).

================================  =======================================================
name                              advantage of trajectory i in group g (broadcast to tokens)
================================  =======================================================
``grpo``                          ``(R_i - mean_g) / (std_g + eps)`` if ``norm_by_std``,
                                  else ``R_i - mean_g``   (DeepSeekMath; verl ``grpo``)
``dr_grpo``                       ``R_i - mean_g``; refuses ``norm_by_std=True``
                                  (Liu et al. 2025, arXiv 2503.20783)
``rloo``                          ``n/(n-1) * (R_i - mean_g)`` = R_i minus the mean of the
                                  *other* members (Ahmadian et al. 2024; verl ``rloo``)
``reinforce_pp_baseline``         ``R_i - mean_g`` broadcast to tokens, then whitened over
                                  every valid token of the batch (verl
                                  ``reinforce_plus_plus_baseline``; OpenRLHF
                                  ``reinforce_baseline`` used by TIRESRAG-R1)
``reinforce_pp``                  token-level: ``G_t = sum_{s>=t} gamma^(k(s)-k(t)) r_s`` over
                                  valid tokens (k counts valid tokens; r_s = token reward,
                                  plus ``scores[i]`` at the last valid token), whitened over
                                  every valid token of the batch (Hu 2025, arXiv 2501.03262;
                                  verl ``reinforce_plus_plus``). No groups.
``gae``                           PPO with a critic: GAE over valid tokens with the critic's
                                  ``values`` (Schulman et al. 2016, arXiv 1506.02438), then
                                  whitened over every valid token of the batch (verl
                                  ``compute_gae_advantage_return``). No groups. See below.
================================  =======================================================

``gae``: with ``r_t`` as for ``reinforce_pp`` and ``V_t`` = ``batch.values`` (the critic's value
of the state before token t), over the *valid* tokens of a row only, ``next(t)`` being the next
valid token (none after the last)::

    delta_t = r_t + gamma * V_next(t) - V_t        (V_next = 0 after the last valid token)
    A_t     = delta_t + gamma * lam * A_next(t)
    return_t = A_t + V_t                            (the critic's regression target, unwhitened)

Observation tokens (mask 0) are neither value nor advantage positions: the recursion steps over
them, as the environment's part of the transition; this is verl's ``compute_gae_advantage_return``
today ("skip values and TD-error on observation tokens"). The Search-R1 fork's older copy runs GAE
over every response token, observations included (its ``info_mask`` masks the actor loss only);
with its gamma = lam = 1 both give ``A_t = R - V_t`` on model tokens.

Whitening is ``(x - mean) / sqrt(var + eps)`` over valid tokens (``masked.masked_whiten``),
so longer responses weigh more in the batch statistics, exactly as in verl.

Degenerate groups (documented behaviour, never NaN):

* all members have the same return -> every advantage in the group is exactly 0 (for ``grpo``
  with std: ``0 / (0 + eps) = 0``);
* a group of size 1 -> advantage exactly 0 (there is no baseline to compare with).
  **Differs from verl**, whose GRPO falls back to mean 0 / std 1 and so hands a lone sample its
  raw score as advantage;
* a trajectory with no valid tokens gets no advantage anywhere, but its return still counts
  in its group's statistics (an overlong-filtered sample still was sampled).

``reinforce_pp`` ignores ``group``; a row with no valid tokens has nowhere to put its score and
contributes nothing. Unlike verl, its return *skips* masked positions inside a response
(observation tokens) instead of resetting there, so tokens before a retrieval block still see
the final score.

``adjust`` is the per-method hook (TIRESRAG-R1's ``A' = (A - P) * W``): a function of the
sequence-level advantages (B,) returning new ones (B,), applied after the group step and
before broadcasting (``grpo``, ``dr_grpo``, ``rloo``) or before whitening
(``reinforce_pp_baseline``). ``reinforce_pp`` has no sequence-level advantage and refuses it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor

from harness.errors import ConfigError
from harness.registry import Registry
from harness.rl.masked import as_bool, masked_fill_zero, masked_sum, masked_whiten

SeqAdjust = Callable[[Tensor], Tensor]
"""Hook on sequence-level advantages: (B,) -> (B,)."""


@dataclass(frozen=True)
class AdvantageParams:
    """Numerical settings of the estimators; all explicit (``AlgoConfig.advantage_params()``).

    ``norm_by_std``: ``grpo`` divides by the group std (``dr_grpo`` requires False; the others
    ignore it). ``std_unbiased``: divisor ``n - 1`` (True) or ``n`` (False) for the group std and
    for the batch variance of whitening. ``eps``: ``grpo`` divides by ``std + eps``; the
    whitening estimators by ``sqrt(var + eps)``. ``gamma``: discount of ``reinforce_pp`` and
    ``gae`` (others ignore it). ``lam``: GAE's lambda (read by ``gae`` only).
    """

    norm_by_std: bool
    std_unbiased: bool
    eps: float
    gamma: float
    lam: float


@dataclass(frozen=True)
class AdvantageBatch:
    """The inputs of an estimator.

    scores: (B,) float, the trajectory's outcome reward (after any reward shaping).
    group: (B,) integer, the group id (trajectories sampled from the same prompt share it).
    response_mask: (B, T) binary, 1 on tokens that receive an advantage (policy-generated
        tokens; 0 on prompt padding, observation tokens, and filtered samples).
    token_rewards: (B, T) float or None, extra per-token rewards counted on valid tokens only,
        e.g. ``kl.kl_penalty_reward(...)`` (= -beta * KL) for KL-in-reward.
    values: (B, T) float or None, the critic's values at the response positions (``gae`` only).
    """

    scores: Tensor
    group: Tensor
    response_mask: Tensor
    token_rewards: Tensor | None = None
    values: Tensor | None = None

    def __post_init__(self) -> None:
        if self.scores.dim() != 1:
            raise ConfigError(f"scores must have shape (B,), got {tuple(self.scores.shape)}")
        b = self.scores.shape[0]
        if self.group.shape != (b,):
            raise ConfigError(f"group must have shape ({b},), got {tuple(self.group.shape)}")
        if self.group.dtype.is_floating_point or self.group.dtype == torch.bool:
            raise ConfigError(f"group must be an integer tensor, got {self.group.dtype}")
        if self.response_mask.dim() != 2 or self.response_mask.shape[0] != b:
            raise ConfigError(
                f"response_mask must have shape ({b}, T), got {tuple(self.response_mask.shape)}"
            )
        if self.token_rewards is not None and self.token_rewards.shape != self.response_mask.shape:
            raise ConfigError(
                f"token_rewards must have the response_mask's shape {tuple(self.response_mask.shape)}, "
                f"got {tuple(self.token_rewards.shape)}"
            )
        if self.values is not None and self.values.shape != self.response_mask.shape:
            raise ConfigError(
                f"values must have the response_mask's shape {tuple(self.response_mask.shape)}, "
                f"got {tuple(self.values.shape)}"
            )

    def sequence_returns(self) -> Tensor:
        """R (B,) in float64: scores plus the sum of token rewards over valid tokens."""
        r = self.scores.detach().to(torch.float64)
        if self.token_rewards is not None:
            r = r + masked_sum(self.token_rewards.detach().to(torch.float64), self.response_mask, dim=-1)
        return r


class AdvantageEstimator(Protocol):
    def __call__(
        self, batch: AdvantageBatch, params: AdvantageParams, adjust: SeqAdjust | None = None
    ) -> Tensor: ...


ADV_ESTIMATORS: Registry[AdvantageEstimator] = Registry("advantage estimator")


@dataclass(frozen=True)
class GroupStats:
    """Per-trajectory view of its group's statistics, each (B,) float64."""

    size: Tensor
    mean: Tensor
    std: Tensor


def group_stats(returns: Tensor, group: Tensor, *, unbiased: bool) -> GroupStats:
    """Size, mean and std of each trajectory's group, gathered back to (B,).

    The std of a group of size 1 with ``unbiased=True`` is defined as 0 (not NaN).
    """
    r = returns.to(torch.float64)
    _, inverse = torch.unique(group, return_inverse=True)
    k = int(inverse.max().item()) + 1 if inverse.numel() else 0
    size = torch.zeros(k, dtype=torch.float64, device=r.device).index_add_(0, inverse, torch.ones_like(r))
    total = torch.zeros(k, dtype=torch.float64, device=r.device).index_add_(0, inverse, r)
    mean = total / size
    sq = torch.zeros(k, dtype=torch.float64, device=r.device).index_add_(0, inverse, (r - mean[inverse]) ** 2)
    denom = size - 1 if unbiased else size
    var = torch.where(denom > 0, sq / denom.clamp(min=1), torch.zeros_like(sq))
    return GroupStats(size=size[inverse], mean=mean[inverse], std=var.sqrt()[inverse])


def broadcast_to_tokens(seq_values: Tensor, response_mask: Tensor, dtype: torch.dtype) -> Tensor:
    """(B,) -> (B, T): each row's value on its valid tokens, 0 elsewhere."""
    full = seq_values.to(dtype).unsqueeze(-1).expand(response_mask.shape)
    return masked_fill_zero(full, response_mask)


def _out_dtype(batch: AdvantageBatch) -> torch.dtype:
    return batch.scores.dtype if batch.scores.dtype.is_floating_point else torch.float32


def _apply(adjust: SeqAdjust | None, seq_adv: Tensor) -> Tensor:
    if adjust is None:
        return seq_adv
    out = adjust(seq_adv)
    if out.shape != seq_adv.shape:
        raise ConfigError(
            f"advantage adjust hook returned shape {tuple(out.shape)}, expected {tuple(seq_adv.shape)}"
        )
    return out.to(torch.float64)


def _centred(batch: AdvantageBatch, params: AdvantageParams, *, divide_by_std: bool, loo: bool) -> Tensor:
    """Group-centred sequence advantages (B,) float64; singletons are 0."""
    r = batch.sequence_returns()
    st = group_stats(r, batch.group, unbiased=params.std_unbiased)
    adv = r - st.mean
    if divide_by_std:
        adv = adv / (st.std + params.eps)
    if loo:
        adv = adv * st.size / (st.size - 1).clamp(min=1)
    return torch.where(st.size > 1, adv, torch.zeros_like(adv))


@ADV_ESTIMATORS.register("grpo")
def grpo(batch: AdvantageBatch, params: AdvantageParams, adjust: SeqAdjust | None = None) -> Tensor:
    """GRPO: ``(R - mean_g) / (std_g + eps)``, or ``R - mean_g`` when ``norm_by_std`` is False."""
    seq = _apply(adjust, _centred(batch, params, divide_by_std=params.norm_by_std, loo=False))
    return broadcast_to_tokens(seq, batch.response_mask, _out_dtype(batch))


@ADV_ESTIMATORS.register("dr_grpo")
def dr_grpo(batch: AdvantageBatch, params: AdvantageParams, adjust: SeqAdjust | None = None) -> Tensor:
    """Dr. GRPO: ``R - mean_g`` (no std division; pair it with ``seq-mean-token-sum-norm``)."""
    if params.norm_by_std:
        raise ConfigError("dr_grpo does not divide by the group std: set norm_adv_by_std=False")
    seq = _apply(adjust, _centred(batch, params, divide_by_std=False, loo=False))
    return broadcast_to_tokens(seq, batch.response_mask, _out_dtype(batch))


@ADV_ESTIMATORS.register("rloo")
def rloo(batch: AdvantageBatch, params: AdvantageParams, adjust: SeqAdjust | None = None) -> Tensor:
    """RLOO: ``R_i - mean_{j != i} R_j = n/(n-1) (R_i - mean_g)``."""
    seq = _apply(adjust, _centred(batch, params, divide_by_std=False, loo=True))
    return broadcast_to_tokens(seq, batch.response_mask, _out_dtype(batch))


@ADV_ESTIMATORS.register("reinforce_pp_baseline")
def reinforce_pp_baseline(
    batch: AdvantageBatch, params: AdvantageParams, adjust: SeqAdjust | None = None
) -> Tensor:
    """REINFORCE++ with group-mean baseline: ``R - mean_g`` on every valid token, then whitened
    over all valid tokens of the batch."""
    seq = _apply(adjust, _centred(batch, params, divide_by_std=False, loo=False))
    tok = broadcast_to_tokens(seq, batch.response_mask, torch.float64)
    out = masked_whiten(tok, batch.response_mask, unbiased=params.std_unbiased, eps=params.eps)
    return out.to(_out_dtype(batch))


def discounted_returns(token_rewards: Tensor, response_mask: Tensor, gamma: float) -> Tensor:
    """Reward-to-go over valid tokens: ``G_t = r_t + gamma * G_next`` where ``next`` is the next
    *valid* token; masked positions neither add reward nor discount, and are 0 in the output."""
    valid = as_bool(response_mask)
    running = torch.zeros(token_rewards.shape[0], dtype=token_rewards.dtype, device=token_rewards.device)
    out = torch.zeros_like(token_rewards)
    for t in range(token_rewards.shape[1] - 1, -1, -1):
        m = valid[:, t]
        running = torch.where(m, token_rewards[:, t] + gamma * running, running)
        out[:, t] = torch.where(m, running, torch.zeros_like(running))
    return out


def outcome_token_rewards(scores: Tensor, response_mask: Tensor) -> Tensor:
    """(B, T): each row's score on its last valid token, 0 elsewhere (rows without valid tokens
    are all 0)."""
    valid = as_bool(response_mask)
    t = valid.shape[1]
    pos = torch.arange(t, device=valid.device).expand_as(valid)
    last = torch.where(valid, pos, torch.full_like(pos, -1)).max(dim=1).values
    out = torch.zeros(valid.shape, dtype=scores.dtype, device=scores.device)
    rows = torch.nonzero(last >= 0).squeeze(-1)
    out[rows, last[rows]] = scores[rows]
    return out


@ADV_ESTIMATORS.register("reinforce_pp")
def reinforce_pp(batch: AdvantageBatch, params: AdvantageParams, adjust: SeqAdjust | None = None) -> Tensor:
    """REINFORCE++: token-level discounted returns of (score at the last valid token + token
    rewards), whitened over all valid tokens of the batch."""
    if adjust is not None:
        raise ConfigError(
            "reinforce_pp has token-level advantages only; a sequence-level adjust hook cannot apply"
        )
    rewards = outcome_token_rewards(batch.scores.detach().to(torch.float64), batch.response_mask)
    if batch.token_rewards is not None:
        rewards = rewards + masked_fill_zero(
            batch.token_rewards.detach().to(torch.float64), batch.response_mask
        )
    returns = discounted_returns(rewards, batch.response_mask, params.gamma)
    out = masked_whiten(returns, batch.response_mask, unbiased=params.std_unbiased, eps=params.eps)
    return out.to(_out_dtype(batch))


def _token_rewards(batch: AdvantageBatch) -> Tensor:
    """(B, T) float64: the score on each row's last valid token plus the token rewards, on valid tokens."""
    rewards = outcome_token_rewards(batch.scores.detach().to(torch.float64), batch.response_mask)
    if batch.token_rewards is not None:
        rewards = rewards + masked_fill_zero(
            batch.token_rewards.detach().to(torch.float64), batch.response_mask
        )
    return rewards


def gae_advantages_returns(batch: AdvantageBatch, params: AdvantageParams) -> tuple[Tensor, Tensor]:
    """GAE over valid tokens (formulas in the module docstring): raw advantages and returns, both
    (B, T) float64 and exactly 0 at masked positions."""
    if batch.values is None:
        raise ConfigError("adv_estimator 'gae' needs the critic's values (AdvantageBatch.values)")
    valid = as_bool(batch.response_mask)
    rewards = _token_rewards(batch)
    values = masked_fill_zero(batch.values.detach().to(torch.float64), batch.response_mask)
    b, t_len = rewards.shape
    next_value = torch.zeros(b, dtype=torch.float64, device=rewards.device)
    running = torch.zeros_like(next_value)
    adv = torch.zeros_like(rewards)
    for t in range(t_len - 1, -1, -1):
        m = valid[:, t]
        delta = rewards[:, t] + params.gamma * next_value - values[:, t]
        a_t = delta + params.gamma * params.lam * running
        running = torch.where(m, a_t, running)
        next_value = torch.where(m, values[:, t], next_value)
        adv[:, t] = torch.where(m, a_t, torch.zeros_like(a_t))
    returns = masked_fill_zero(adv + values, batch.response_mask)
    return adv, returns


@ADV_ESTIMATORS.register("gae")
def gae(batch: AdvantageBatch, params: AdvantageParams, adjust: SeqAdjust | None = None) -> Tensor:
    """PPO's GAE advantages, whitened over every valid token of the batch (verl's ``gae``)."""
    if adjust is not None:
        raise ConfigError("gae has token-level advantages only; a sequence-level adjust hook cannot apply")
    adv, _ = gae_advantages_returns(batch, params)
    out = masked_whiten(adv, batch.response_mask, unbiased=params.std_unbiased, eps=params.eps)
    return out.to(_out_dtype(batch))


def compute_advantages(
    name: str, batch: AdvantageBatch, params: AdvantageParams, adjust: SeqAdjust | None = None
) -> Tensor:
    """Run the estimator registered as ``name`` (unknown names raise ``ConfigError``)."""
    return ADV_ESTIMATORS.get(name)(batch, params, adjust)
