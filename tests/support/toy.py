"""A single-turn trainable method for trainer tests and benchmarks: one generation per question
through the rollout engine (no search turns), reward defined by the subclass."""

from __future__ import annotations

from harness.method import MethodSpec, RewardBreakdown, RunContext, TrainableMethod
from methods.search_r1.render import SEARCH_R1_DIALECT
from harness.rollout.engine import TagRolloutConfig, run_tag_rollouts
from harness.rollout.render import RENDERERS
from harness.types import QAExample, Trajectory


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

    def reward_names(self):
        return ("default",)

    def reward(self, trajectory, *, name, ctx):
        return self.score(trajectory)

    def recipes(self):
        return {}
