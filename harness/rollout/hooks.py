"""Loop hooks of the tag rollout engine: what a paper changes in Search-R1's loop.

:class:`harness.rollout.engine.TagRolloutConfig` holds the budgets every tag loop has (turns,
top-k, tokens) and two hook objects; their defaults are Search-R1's loop
(PeterGriffinJin/Search-R1 ``search_r1/llm_agent/generation.py``, ``run_llm_loop``):

* :class:`Budget` says what ``max_turns`` counts: how many generation rounds there are at most,
  in which rounds a search is executed, and whether a search is over the cap. The default,
  :class:`TurnBudget`, counts action turns and then runs one final turn in which a search is not
  executed (Search-R1's final rollout with ``do_search=False``).
* :class:`TurnPolicy` decides what the environment does within a turn: refuse a search with a
  message instead of a retrieval, answer a turn with neither a search nor an answer (the dialect's
  correction message, or end the trajectory), and run an extra step right after the observations.

A paper module subclasses these for what its loop does differently and passes the instances to
its ``TagRolloutConfig`` (see ``docs/extending.md``, "A paper method").
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from harness.rollout.base import RolloutConfig, RunContext
    from harness.rollout.dialect import TagDialect
    from harness.rollout.state import RolloutState


class Refusal(NamedTuple):
    """A search answered by a message instead of a retrieval: the ``message`` turn's status and the
    environment text appended (observation tags included)."""

    status: str
    message: str


class Budget(ABC):
    """What ``TagRolloutConfig.max_turns`` counts."""

    @abstractmethod
    def rounds(self, max_turns: int) -> int:
        """The most generation rounds a trajectory gets."""

    @abstractmethod
    def can_search(self, round_no: int, max_turns: int) -> bool:
        """Whether a search in generation round ``round_no`` (0-based) is executed; when not, the
        search ends the trajectory (status ``search_after_budget``, ended by ``max_turns``)."""

    def over_budget(self, state: RolloutState, max_turns: int) -> Refusal | None:
        """A search the budget refuses with a message (the model goes on; the generation's status
        is ``search_after_budget``); None: run it. Checked before :meth:`TurnPolicy.refuse`."""
        return None


@dataclass(frozen=True)
class TurnBudget(Budget):
    """``max_turns`` action turns, then (``final_turn``) one more generation in which a search is
    not executed (Search-R1)."""

    final_turn: bool = True

    def rounds(self, max_turns: int) -> int:
        return max_turns + (1 if self.final_turn else 0)

    def can_search(self, round_no: int, max_turns: int) -> bool:
        return round_no < max_turns


@dataclass(frozen=True)
class TurnPolicy:
    """What the environment does within a turn; the defaults are Search-R1's loop. A paper
    overrides the methods its loop changes."""

    def refuse(self, state: RolloutState, query: str) -> Refusal | None:
        """A search (within the budget) answered by a message instead of a retrieval; the
        generation and the ``message`` turn both get the refusal's status. None: run it."""
        return None

    def correction(self, dialect: TagDialect) -> str | None:
        """The environment text appended after a turn with neither a search nor an answer ("" =
        nothing, the model goes on); None ends the trajectory there (ended by ``no_action``)."""
        return dialect.invalid_message

    def after_observation(self, ctx: RunContext, cfg: RolloutConfig, states: list[RolloutState]) -> None:
        """Runs right after the observations of a round's retrievals are appended to ``states``
        (the states that searched this round, in batch order); may generate and record turns."""
        return None
