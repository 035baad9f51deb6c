"""The rollout contract: what a method may use while solving a batch (:class:`RunContext`), and a
method's rollout config, which runs a batch and says how its text is read.

``TrainableMethod.rollout_config(protocol)`` returns one of these (or None for a method that
answers in one completion). The trainer-independent layers (the verl export and its agent loop)
use only what is declared here: :meth:`RolloutConfig.run` rolls out a batch with the engine the
config belongs to, :attr:`RolloutConfig.dialect` and :attr:`RolloutConfig.correction_message`
split a decoded response into the model's text and environment text, and
:meth:`RolloutConfig.extract` reads the answer from the model's text.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from harness.errors import ConfigError
from harness.types import SamplingParams

if TYPE_CHECKING:
    from harness.llm.base import Backend
    from harness.protocol import Protocol
    from harness.retrieval.base import Retriever
    from harness.rollout.dialect import TagDialect
    from harness.rollout.extract import Extraction
    from harness.types import QAExample, Trajectory


@dataclass
class RunContext:
    """What a method may use while solving a batch."""

    backend: Backend
    protocol: Protocol
    retriever: Retriever | None = None
    sampling: SamplingParams = field(default_factory=SamplingParams)
    training: bool = False  # return prompt/response token ids and loss masks
    # progress inside a batch: called with how many of the batch's questions just finished, as the
    # rollout engine ends them (the runner counts the rest when solve returns)
    on_finished: Callable[[int], None] | None = None
    # called with the turn (round) a multi-turn rollout engine starts, from 1 (the progress bar's
    # "turn N" while a batch's questions are still open)
    on_turn: Callable[[int], None] | None = None

    def report_turn(self, turn: int) -> None:
        if self.on_turn is not None:
            self.on_turn(turn)

    def report_finished(self, done: int, reported: int) -> int:
        """Report ``done - reported`` newly finished questions (when there are any); returns how
        many are reported now."""
        if self.on_finished is not None and done > reported:
            self.on_finished(done - reported)
        return max(done, reported)

    @property
    def max_new_tokens(self) -> int:
        return self.protocol.decoding.max_new_tokens

    def require_retriever(self, method: str) -> Retriever:
        if self.retriever is None:
            raise ConfigError(f"method {method!r} needs a retriever, but none was configured")
        return self.retriever


class RolloutConfig(ABC):
    """A multi-turn rollout in a tag dialect. Implementations are frozen-style dataclasses
    (:class:`harness.rollout.engine.TagRolloutConfig`,
    :class:`harness.rollout.segments.SegmentLoopConfig`)."""

    # the tags the model searches and answers with, and the wrapper of observations
    # (a dataclass field of every implementation)
    dialect: TagDialect
    # the token budget of each generation (a dataclass field of every implementation)
    max_new_tokens: int

    @abstractmethod
    def run(self, prompts: Sequence[str], examples: Sequence[QAExample], ctx: RunContext) -> list[Trajectory]:
        """One trajectory per (prompt, example), in order. ``prompts`` are the rendered chat
        prompts (the method's template; verl's prompt ids decoded, in the verl agent loop);
        in training mode the trajectories carry token ids and a loss mask."""

    @abstractmethod
    def extract(self, model_text: str) -> Extraction:
        """The answer in the model's own text (observations and corrections excluded)."""

    @property
    @abstractmethod
    def correction_message(self) -> str:
        """The environment text this loop appends after a turn with neither a search nor an
        answer; "" when it appends none. Read back as environment text (loss mask 0) from a
        decoded response, and counted in a response budget."""
