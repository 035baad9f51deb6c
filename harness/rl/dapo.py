"""DAPO's data-side pieces (Yu et al. 2025, arXiv 2503.14476): dynamic sampling with group
filters, overlong reward shaping and overlong filtering. Pure logic: no model, no I/O.

Group filters
-------------
A ``GroupFilter`` maps a list of groups' rewards to one keep flag per group. A group's rewards
are a ``GroupRewards``: named (G,) tensors, one value per rollout. Reserved names:

* ``"total"``: the final reward fed to the advantage estimator (after overlong shaping);
* ``"outcome"``: the method's reward before the harness adds overlong shaping (what verl's DAPO
  recipe filters on: ``filter_groups.metric=acc``);

plus any named component of the method's reward (TIRESRAG-R1 filters on ``"f1"``).

* ``DropZeroVariance(metric)`` drops a group whose values are all equal (DAPO: all correct or all
  wrong; its GRPO advantages are all 0). A group of size 1 is dropped too.
* ``ThresholdFilter(metric, lower, upper)`` keeps a group iff ``max > lower`` and ``min < upper``,
  i.e. drops it when every value is ``<= lower`` or every value is ``>= upper`` (TIRESRAG-R1 code:
  ``--accuracy_lower_bound 0.1 --accuracy_upper_bound 0.9`` on answer F1,
  probe2/TIRESRAG-R1@a457873 ``scripts/qwen_grpo.sh``).
* ``AllOf(filters)`` keeps a group only if every filter keeps it.

Dynamic sampling
----------------
``DynamicSampler.sample(generate_groups)`` calls ``generate_groups(round_index)`` (round 0, 1,
...), filters each round's groups and accumulates the kept ones until ``target_groups`` are
held, then returns exactly ``target_groups`` (extra kept groups of the last round are dropped
and counted as ``surplus``, as verl trims to the train batch). After ``max_rounds`` rounds it
stops and returns what it holds with ``capped=True`` (verl raises instead; the trainer decides
whether to train on a short batch or skip the step, and logs it).

Overlong
--------
``overlong_penalty`` is DAPO's soft overlong punishment (Eq. 13) scaled by ``penalty_factor``
(verl ``overlong_buffer.penalty_factor``); ``mask_truncated`` is overlong filtering (zero the loss
mask of truncated samples; verl-tool ``mask_overlong_loss``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

import torch
from torch import Tensor

from harness.errors import ConfigError

T = TypeVar("T")

TOTAL = "total"
OUTCOME = "outcome"


@dataclass(frozen=True, eq=False)
class GroupRewards:
    """The rewards of one group's G rollouts: metric name -> (G,) tensor."""

    values: Mapping[str, Tensor]

    def __post_init__(self) -> None:
        sizes = {name: tuple(v.shape) for name, v in self.values.items()}
        if not sizes:
            raise ConfigError("GroupRewards needs at least one metric")
        shapes = set(sizes.values())
        if len(shapes) != 1 or len(next(iter(shapes))) != 1:
            raise ConfigError(f"every metric of a group must be a (G,) tensor of the same G; got {sizes}")

    def __getitem__(self, metric: str) -> Tensor:
        if metric not in self.values:
            raise ConfigError(
                f"group rewards have no metric {metric!r}; available: {', '.join(sorted(self.values))}"
            )
        return self.values[metric]

    @property
    def size(self) -> int:
        return int(next(iter(self.values.values())).shape[0])


class GroupFilter(Protocol):
    """Keep flags, one per group, in order."""

    def __call__(self, groups: Sequence[GroupRewards]) -> list[bool]: ...


@dataclass(frozen=True)
class DropZeroVariance:
    """Drop groups whose ``metric`` values are all exactly equal (size-1 groups included)."""

    metric: str

    def __call__(self, groups: Sequence[GroupRewards]) -> list[bool]:
        keep = []
        for g in groups:
            v = g[self.metric]
            keep.append(bool(v.numel() > 1 and not torch.all(v == v[0]).item()))
        return keep


@dataclass(frozen=True)
class ThresholdFilter:
    """Keep a group iff ``max(metric) > lower`` and ``min(metric) < upper``."""

    metric: str
    lower: float
    upper: float

    def __post_init__(self) -> None:
        if not self.lower < self.upper:
            raise ConfigError(f"ThresholdFilter needs lower < upper, got {self.lower} >= {self.upper}")

    def __call__(self, groups: Sequence[GroupRewards]) -> list[bool]:
        keep = []
        for g in groups:
            v = g[self.metric]
            # bounds in the values' dtype: an F1 of 0.1 stored as float32 is not "above 0.1"
            lower = torch.tensor(self.lower, dtype=v.dtype, device=v.device)
            upper = torch.tensor(self.upper, dtype=v.dtype, device=v.device)
            keep.append(bool((v.max() > lower).item() and (v.min() < upper).item()))
        return keep


@dataclass(frozen=True)
class AllOf:
    """Keep a group iff every filter keeps it."""

    filters: tuple[GroupFilter, ...]

    def __call__(self, groups: Sequence[GroupRewards]) -> list[bool]:
        keep = [True] * len(groups)
        for f in self.filters:
            keep = [a and b for a, b in zip(keep, f(groups), strict=True)]
        return keep


@dataclass(frozen=True)
class SamplingResult(Generic[T]):
    """What ``DynamicSampler.sample`` gathered.

    groups: the kept groups, in generation order; ``target_groups`` of them unless ``capped``.
    rounds: generation rounds run. generated: groups generated in all rounds. dropped: groups
    the filter rejected. surplus: kept groups discarded because the batch was already full.
    capped: the round cap was reached before the batch was full.
    kept_per_round: groups kept in each round (before trimming).
    """

    groups: list[T]
    rounds: int
    generated: int
    dropped: int
    surplus: int
    capped: bool
    kept_per_round: list[int] = field(default_factory=list)

    @property
    def dropped_fraction(self) -> float:
        return self.dropped / self.generated if self.generated else 0.0


@dataclass(frozen=True)
class DynamicSampler(Generic[T]):
    """Accumulate filtered groups over generation rounds until a batch is full, with a cap.

    group_filter: which groups to keep. target_groups: groups per training batch (>= 1).
    max_rounds: cap on generation rounds (>= 1). rewards_of: a group object -> its
    ``GroupRewards``.
    """

    group_filter: GroupFilter
    target_groups: int
    max_rounds: int
    rewards_of: Callable[[T], GroupRewards]

    def __post_init__(self) -> None:
        if self.target_groups < 1:
            raise ConfigError(f"target_groups must be >= 1, got {self.target_groups}")
        if self.max_rounds < 1:
            raise ConfigError(f"max_rounds must be >= 1, got {self.max_rounds}")

    def sample(self, generate_groups: Callable[[int], Sequence[T]]) -> SamplingResult[T]:
        kept: list[T] = []
        generated = dropped = rounds = 0
        per_round: list[int] = []
        while len(kept) < self.target_groups and rounds < self.max_rounds:
            batch = list(generate_groups(rounds))
            rounds += 1
            flags = self.group_filter([self.rewards_of(g) for g in batch])
            if len(flags) != len(batch):
                raise ConfigError(f"group filter returned {len(flags)} flags for {len(batch)} groups")
            round_kept = [g for g, k in zip(batch, flags, strict=True) if k]
            generated += len(batch)
            dropped += len(batch) - len(round_kept)
            per_round.append(len(round_kept))
            kept.extend(round_kept)
        capped = len(kept) < self.target_groups
        surplus = max(0, len(kept) - self.target_groups)
        return SamplingResult(
            groups=kept[: self.target_groups],
            rounds=rounds,
            generated=generated,
            dropped=dropped,
            surplus=surplus,
            capped=capped,
            kept_per_round=per_round,
        )


def overlong_penalty(lengths: Tensor, *, max_len: int, cache_len: int, penalty_factor: float) -> Tensor:
    """DAPO soft overlong punishment per trajectory, (B,) int -> (B,) float32, added to the reward.

    With ``L = lengths``, ``start = max_len - cache_len``::

        0                                    if L <= start
        penalty_factor * (start - L) / cache_len   if start < L <= max_len   (linear, 0 -> -factor)
        -penalty_factor                      if L > max_len

    ``lengths`` are response lengths in tokens as counted against the generation budget
    ``max_len``. DAPO: ``max_len = 20480``, ``cache_len = 4096``, factor 1.0.
    """
    if not (0 < cache_len <= max_len):
        raise ConfigError(f"need 0 < cache_len <= max_len, got cache_len={cache_len}, max_len={max_len}")
    if penalty_factor < 0:
        raise ConfigError(f"penalty_factor must be >= 0, got {penalty_factor}")
    length = lengths.to(torch.float64)
    start = float(max_len - cache_len)
    linear = (start - length) / cache_len
    out = torch.where(length <= start, torch.zeros_like(length), linear)
    out = torch.where(length > max_len, torch.full_like(length, -1.0), out)
    return (out * penalty_factor).to(torch.float32)


def mask_truncated(response_mask: Tensor, truncated: Tensor) -> Tensor:
    """Overlong filtering: the loss mask with every row of a truncated sample zeroed.

    response_mask (B, T) binary; truncated (B,) bool. Same dtype as ``response_mask``.
    """
    if truncated.shape != response_mask.shape[:1]:
        raise ConfigError(f"truncated must be ({response_mask.shape[0]},), got {tuple(truncated.shape)}")
    keep = ~truncated.to(torch.bool)
    return torch.where(keep.unsqueeze(-1), response_mask, torch.zeros_like(response_mask))
