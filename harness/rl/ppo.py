"""PPO's critic: a value model over the policy's backbone and the clipped value loss.

The value model (verl's critic: ``AutoModelForTokenClassification`` with one label over the base
model) is a copy of the *initial* policy's transformer backbone with a linear head to one scalar,
``V(s_t)`` read at the position before response token t (the same positions whose logits give
token t's log-prob; verl ``dp_critic``: ``values[:, -response_length - 1:-1]``). The head starts
at zero (weights and bias), so the first values are 0 and GAE starts as plain returns; verl
initialises it randomly (our choice: no random offset in the first advantages).

The value loss is verl's ``compute_value_loss``::

    V_clip = clip(V, V_old - c, V_old + c)
    loss   = 0.5 * mean_over_valid_tokens(max((V - R)^2, (V_clip - R)^2))

with ``R`` the GAE returns (:func:`harness.rl.advantages.gae_advantages_returns`) and the same
mask as the policy loss: observation tokens are no value positions.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from harness.errors import ConfigError
from harness.rl.losses import agg_loss
from harness.rl.masked import masked_mean
from harness.rl.sequences import pack_sequences


class ValueModel(nn.Module):
    """A causal LM's backbone (its ``base_model`` / ``model``: embeddings and decoder layers) and a
    zero-initialised scalar head."""

    def __init__(self, backbone: nn.Module, hidden_size: int):
        super().__init__()
        self.backbone = backbone
        self.head = nn.Linear(hidden_size, 1)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    @classmethod
    def from_policy(cls, policy: Any) -> ValueModel:
        """A trainable copy of ``policy``'s backbone, taken before any update (the critic starts from
        the base model, as verl's ``critic.model.path``)."""
        if hasattr(policy, "get_base_model"):  # peft: its layers hold the LoRA wrappers
            raise ConfigError(
                "PPO's critic is built from a full policy; set recipe.lora=null for adv_estimator 'gae'"
            )
        backbone = getattr(policy, "model", None)
        if backbone is None:
            raise ConfigError(f"{type(policy).__name__}: no .model backbone to build a critic from")
        backbone = copy.deepcopy(backbone)
        for p in backbone.parameters():
            p.requires_grad_(True)
        model = cls(backbone, policy.config.hidden_size)
        # the head is created on the CPU in float32 (forward casts the hidden states to it): onto
        # the backbone's device
        model.head.to(next(backbone.parameters()).device)
        model.train()
        return model

    def forward(self, input_ids: Tensor, attention_mask: Tensor, position_ids: Tensor) -> Tensor:
        hidden = self.backbone(
            input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids
        ).last_hidden_state
        return self.head(hidden.float()).squeeze(-1)


def sequence_values(
    critic: ValueModel, prompts: list[list[int]], responses: list[list[int]], *, pad_id: int
) -> Tensor:
    """Values (B, T) of the state before each response token (prompt left-padded, response
    right-padded: the layout of :func:`harness.rl.sequences.sequence_logprobs`)."""
    packed = pack_sequences(critic, prompts, responses, pad_id=pad_id)
    v = critic(packed.input_ids, packed.attention, packed.position_ids)
    return v[:, packed.prompt_len - 1 : packed.prompt_len - 1 + packed.response_len]


@dataclass(frozen=True)
class ValueLossStats:
    clip_frac: float
    values_mean: float
    returns_mean: float


def value_loss(
    values: Tensor,
    old_values: Tensor,
    returns: Tensor,
    mask: Tensor,
    *,
    cliprange_value: float,
    num_units: float | None = None,
) -> tuple[Tensor, ValueLossStats]:
    """verl's clipped value loss (module docstring), token-mean over ``mask``; ``num_units`` is the
    token count of the whole mini-batch when this is one micro-batch of it."""
    clipped = torch.clamp(values, old_values - cliprange_value, old_values + cliprange_value)
    l1 = (values - returns) ** 2
    l2 = (clipped - returns) ** 2
    loss = 0.5 * agg_loss(torch.max(l1, l2), mask, "token-mean", num_units=num_units)
    stats = ValueLossStats(
        clip_frac=float(masked_mean((l2 > l1).float(), mask)),
        values_mean=float(masked_mean(values.detach(), mask)),
        returns_mean=float(masked_mean(returns, mask)),
    )
    return loss, stats
