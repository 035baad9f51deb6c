"""Stand-ins for the ARENA / TIRESRAG-R1 / When-to-Search tests: a scripted judge (from the Paper
methods I helpers), a scripted embedder, and a reward context with the run's total steps."""

from __future__ import annotations

import numpy as np

from harness.method import RewardContext
from tests.methods.helpers import PROTO, ScriptedReader, context, example, trajectory

__all__ = ["PROTO", "ScriptedEmbedder", "ScriptedJudge", "context", "example", "reward_ctx", "trajectory"]

ScriptedJudge = ScriptedReader  # chat_batch answers each conversation from the script, records batches


class ScriptedEmbedder:
    """``encode`` looks each text up in a fixed table of vectors and records the calls."""

    def __init__(self, vectors: dict[str, list[float]]):
        self.vectors = vectors
        self.calls: list[list[str]] = []

    def encode(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return np.array([self.vectors[t] for t in texts], dtype=np.float32)


def reward_ctx(step: int = 0, total_steps: int | None = None, **models) -> RewardContext:
    """A reward context; ``total_steps`` is set as an attribute (TIRESRAG-R1's a_t needs T)."""
    ctx = RewardContext(step=step, models=dict(models))
    if total_steps is not None:
        ctx.total_steps = total_steps  # type: ignore[attr-defined]
    return ctx
