"""The reward registry of harness/method.py: @reward_fn registers rewards per class, the base class
lists them (default first), resolves "default", refuses an unknown name once, and hands batched
rewards the whole batch with the resolved name."""

from __future__ import annotations

import pytest

from harness.errors import ConfigError
from harness.method import RewardBreakdown, RewardContext, TrainableMethod, reward_fn
from harness.methods_registry import METHODS, get_method
from harness.types import Trajectory


def traj(i: int) -> Trajectory:
    return Trajectory(example_id=str(i), dataset="t", question=f"q{i}", answers=["a"], response=f"r{i}")


class Two(TrainableMethod):
    name = "two"
    description = source = "test"

    def __init__(self) -> None:
        self.batches: list[tuple[int, str]] = []

    spec = solve = recipes = rollout_config = None  # type: ignore[assignment]  # not used here

    @reward_fn("plain")
    def reward_plain(self, trajectory: Trajectory, ctx: RewardContext) -> RewardBreakdown:
        return RewardBreakdown(total=float(trajectory.example_id), components={"step": float(ctx.step)})

    @reward_fn("b1", "b2", default=True, batched=True)
    def reward_batch(
        self, trajectories: list[Trajectory], *, name: str, ctx: RewardContext
    ) -> list[RewardBreakdown]:
        self.batches.append((len(trajectories), name))
        return [RewardBreakdown(total=10.0 + float(t.example_id)) for t in trajectories]


class Child(Two):
    """Inherits the parent's rewards, overrides one method without re-registering, adds one."""

    def reward_plain(self, trajectory: Trajectory, ctx: RewardContext) -> RewardBreakdown:
        return RewardBreakdown(total=-1.0)

    @reward_fn("extra")
    def reward_extra(self, trajectory: Trajectory, ctx: RewardContext) -> RewardBreakdown:
        return RewardBreakdown(total=7.0)


def test_names_default_first_then_definition_order():
    assert Two().reward_names() == ("b1", "plain", "b2")
    assert Child().reward_names() == ("b1", "plain", "b2", "extra")
    assert Two().resolve_reward("default") == "b1"


def test_batched_reward_gets_the_whole_batch_and_the_resolved_name():
    m = Two()
    out = m.rewards([traj(1), traj(2), traj(3)], name="default", ctx=RewardContext())
    assert [r.total for r in out] == [11.0, 12.0, 13.0]
    assert m.batches == [(3, "b1")]
    assert m.reward(traj(4), name="b2", ctx=RewardContext()).total == 14.0
    assert m.batches[-1] == (1, "b2")


def test_plain_reward_is_called_per_trajectory_and_an_override_wins():
    out = Two().rewards([traj(1), traj(2)], name="plain", ctx=RewardContext(step=5))
    assert [(r.total, r.components) for r in out] == [(1.0, {"step": 5.0}), (2.0, {"step": 5.0})]
    assert Child().reward(traj(1), name="plain", ctx=RewardContext()).total == -1.0
    assert Child().reward(traj(1), name="extra", ctx=RewardContext()).total == 7.0


def test_unknown_name_is_refused_in_one_line_before_any_call():
    m = Two()
    with pytest.raises(ConfigError) as e:
        m.rewards([traj(1)], name="f1", ctx=RewardContext())
    assert str(e.value) == "method 'two' has no reward 'f1'; known: default, b1, plain, b2"
    assert m.batches == []


def test_default_is_not_a_reward_name():
    with pytest.raises(ValueError, match="other than 'default'"):
        reward_fn("default")
    with pytest.raises(ValueError, match="one or more names"):
        reward_fn()


@pytest.mark.parametrize("name", [n for n in METHODS.names() if issubclass(METHODS.get(n), TrainableMethod)])
def test_every_trainable_method_resolves_default_and_refuses_unknown(name):
    m = get_method(name)
    names = m.reward_names()
    assert names and "default" not in names and len(set(names)) == len(names)
    assert m.resolve_reward("default") == names[0]
    assert all(m.resolve_reward(n) == n for n in names)
    with pytest.raises(ConfigError) as e:
        m.resolve_reward("no-such-reward")
    assert (
        str(e.value) == f"method {name!r} has no reward 'no-such-reward'; known: default, {', '.join(names)}"
    )
