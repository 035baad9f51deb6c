"""DAPO pieces: group filters, dynamic sampling, overlong shaping and filtering."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from harness.errors import ConfigError
from harness.rl.dapo import (
    AllOf,
    DropZeroVariance,
    DynamicSampler,
    GroupRewards,
    ThresholdFilter,
    mask_truncated,
    overlong_penalty,
)


def gr(values: list[float], f1: list[float] | None = None) -> GroupRewards:
    d = {"total": torch.tensor(values)}
    if f1 is not None:
        d["f1"] = torch.tensor(f1)
    return GroupRewards(d)


def test_drop_zero_variance():
    groups = [gr([1.0, 1.0, 1.0]), gr([0.0, 1.0, 0.0]), gr([0.0, 0.0]), gr([0.5]), gr([0.2, 0.2000001])]
    assert DropZeroVariance("total")(groups) == [False, True, False, False, True]


def test_threshold_filter_tiresrag_semantics():
    # keep iff max F1 > 0.1 and min F1 < 0.9
    groups = [
        gr([0, 0, 0], f1=[0.0, 0.1, 0.05]),  # all <= 0.1: dropped (0.1 itself does not pass)
        gr([0, 0], f1=[0.9, 1.0]),  # all >= 0.9: dropped
        gr([0, 0], f1=[0.0, 0.95]),  # spans the band: kept
        gr([0, 0], f1=[0.5, 0.5]),  # constant but in the band: kept by the threshold filter
        gr([0, 0], f1=[0.1, 0.11]),  # max 0.11 > 0.1, min < 0.9: kept
    ]
    assert ThresholdFilter("f1", lower=0.1, upper=0.9)(groups) == [False, False, True, True, True]
    both = AllOf((ThresholdFilter("f1", 0.1, 0.9), DropZeroVariance("f1")))
    assert both(groups) == [False, False, True, False, True]


def test_filters_name_missing_metric():
    with pytest.raises(ConfigError, match="no metric 'f1'; available: total"):
        ThresholdFilter("f1", 0.1, 0.9)([gr([1.0, 0.0])])
    with pytest.raises(ConfigError, match="lower < upper"):
        ThresholdFilter("f1", 0.9, 0.1)
    with pytest.raises(ConfigError, match="same G"):
        GroupRewards({"a": torch.zeros(2), "b": torch.zeros(3)})


@dataclass
class FakeGroup:
    name: str
    rewards: list[float]


def sampler(target: int, max_rounds: int) -> DynamicSampler[FakeGroup]:
    return DynamicSampler(
        group_filter=DropZeroVariance("total"),
        target_groups=target,
        max_rounds=max_rounds,
        rewards_of=lambda g: gr(g.rewards),
    )


def scripted(rounds: list[list[FakeGroup]]):
    calls: list[int] = []

    def generate(i: int) -> list[FakeGroup]:
        calls.append(i)
        return rounds[i]

    return generate, calls


def test_rounds_accumulate_until_batch_full():
    const, var = [1.0, 1.0], [0.0, 1.0]
    gen, calls = scripted(
        [
            [FakeGroup("a", const), FakeGroup("b", var), FakeGroup("c", const)],
            [FakeGroup("d", var), FakeGroup("e", const), FakeGroup("f", var)],
            [FakeGroup("never", var)] * 3,
        ]
    )
    res = sampler(target=3, max_rounds=10).sample(gen)
    assert [g.name for g in res.groups] == ["b", "d", "f"]
    assert calls == [0, 1]
    assert (res.rounds, res.generated, res.dropped, res.surplus, res.capped) == (2, 6, 3, 0, False)
    assert res.kept_per_round == [1, 2]
    assert res.dropped_fraction == 0.5


def test_surplus_groups_are_trimmed_and_counted():
    var = [0.0, 1.0]
    gen, _ = scripted([[FakeGroup(str(i), var) for i in range(5)]])
    res = sampler(target=3, max_rounds=2).sample(gen)
    assert [g.name for g in res.groups] == ["0", "1", "2"]
    assert (res.rounds, res.surplus, res.capped) == (1, 2, False)


def test_cap_is_honoured_and_reported():
    const, var = [1.0, 1.0], [0.0, 1.0]
    gen, calls = scripted(
        [[FakeGroup("a", const), FakeGroup("b", var)], [FakeGroup("c", const)], [FakeGroup("x", var)] * 9]
    )
    res = sampler(target=4, max_rounds=2).sample(gen)
    assert calls == [0, 1]  # the third round is never generated
    assert [g.name for g in res.groups] == ["b"]
    assert (res.rounds, res.generated, res.dropped, res.capped) == (2, 3, 2, True)
    # nothing survives at all
    gen, _ = scripted([[FakeGroup("a", const)]])
    res = sampler(target=1, max_rounds=1).sample(gen)
    assert res.groups == [] and res.capped


def test_sampler_argument_checks():
    with pytest.raises(ConfigError, match="max_rounds"):
        sampler(target=1, max_rounds=0)
    with pytest.raises(ConfigError, match="target_groups"):
        sampler(target=0, max_rounds=1)


def test_overlong_penalty_boundaries():
    # max_len 10, cache 4: free up to 6, linear from 6 to 10, -1 beyond
    lengths = torch.tensor([0, 6, 7, 8, 9, 10, 11, 500])
    want = torch.tensor([0.0, 0.0, -0.25, -0.5, -0.75, -1.0, -1.0, -1.0])
    torch.testing.assert_close(overlong_penalty(lengths, max_len=10, cache_len=4, penalty_factor=1.0), want)
    torch.testing.assert_close(
        overlong_penalty(lengths, max_len=10, cache_len=4, penalty_factor=0.5), want * 0.5
    )
    # DAPO's values: the penalty starts after 16384 tokens
    dapo = overlong_penalty(
        torch.tensor([16384, 16385, 20480]), max_len=20480, cache_len=4096, penalty_factor=1.0
    )
    torch.testing.assert_close(dapo, torch.tensor([0.0, -1 / 4096, -1.0]))
    with pytest.raises(ConfigError, match="cache_len"):
        overlong_penalty(lengths, max_len=10, cache_len=11, penalty_factor=1.0)


def test_mask_truncated_zeroes_whole_rows():
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 1.0], [1.0, 1.0, 1.0]])
    out = mask_truncated(mask, torch.tensor([False, True, False]))
    torch.testing.assert_close(out, torch.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]))
    assert out.dtype == mask.dtype
    with pytest.raises(ConfigError, match="truncated must be"):
        mask_truncated(mask, torch.tensor([True]))
