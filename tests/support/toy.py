"""A single-turn trainable method for trainer tests and benchmarks: one generation per question
through the rollout engine (no search turns), reward defined by the subclass."""

from __future__ import annotations

from harness.method import MethodSpec, RewardBreakdown, TrainableMethod, reward_fn
from harness.rollout.base import RunContext
from harness.rollout.engine import TagRolloutConfig, run_tag_rollouts
from harness.rollout.render import RENDERERS
from harness.types import QAExample, Trajectory
from methods.search_r1.render import SEARCH_R1_DIALECT


class SingleTurnToy(TrainableMethod):
    name = "toy"
    description = "toy"
    source = "test"
    uses_retrieval = False
    max_new_tokens: int | None = None  # None: the protocol's

    def prompt(self, example: QAExample) -> str:
        raise NotImplementedError

    def score(self, trajectory: Trajectory) -> RewardBreakdown:
        raise NotImplementedError

    def spec(self, protocol):
        return MethodSpec(name=self.name)

    def rollout_config(self, protocol):
        return None  # one generation per question, no search turns

    def solve(self, examples, ctx: RunContext):
        cfg = TagRolloutConfig(
            dialect=SEARCH_R1_DIALECT,
            renderer=RENDERERS.get("search_r1"),
            top_k=1,
            max_turns=0,
            max_obs_tokens=8,
            max_new_tokens=self.max_new_tokens or ctx.protocol.decoding.max_new_tokens,
        )
        return run_tag_rollouts([self.prompt(e) for e in examples], examples, ctx, cfg)

    @reward_fn("score", default=True)
    def reward_score(self, trajectory, ctx):
        return self.score(trajectory)

    def recipes(self):
        return {}
