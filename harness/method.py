"""The method interface: a method turns a batch of questions into trajectories.

A method module (``methods/<paper>.py`` or ``baselines/<name>.py``) subclasses :class:`Method`,
declares its :class:`MethodSpec` (prompt text, tag dialect, renderer, extractor, parameters — all
hashed into ``method_spec_hash`` and stored with each run) and implements :meth:`Method.solve`.
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict

from harness.types import QAExample, SamplingParams, Trajectory

if TYPE_CHECKING:
    from harness.llm.base import Backend
    from harness.protocol import Protocol
    from harness.retrieval.base import Retriever


class MethodSpec(BaseModel):
    """Everything method-specific that changes a score. ``spec_hash`` identifies it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    version: str = "1"
    prompts: dict[str, str] = {}
    dialect: dict[str, Any] | None = None
    renderer: str | None = None
    extractor: str = ""
    params: dict[str, Any] = {}

    @property
    def spec_hash(self) -> str:
        data = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(data.encode()).hexdigest()[:12]


@dataclass
class RunContext:
    """What a method may use while solving a batch."""

    backend: Backend
    protocol: Protocol
    retriever: Retriever | None = None
    sampling: SamplingParams = field(default_factory=SamplingParams)
    training: bool = False  # return prompt/response token ids and loss masks

    @property
    def max_new_tokens(self) -> int:
        return self.protocol.decoding.max_new_tokens

    def require_retriever(self, method: str) -> Retriever:
        if self.retriever is None:
            from harness.errors import ConfigError

            raise ConfigError(f"method {method!r} needs a retriever, but none was configured")
        return self.retriever


class Method(ABC):
    """A way of answering questions. Subclasses set the class attributes and implement ``solve``."""

    name: ClassVar[str]
    description: ClassVar[str]
    source: ClassVar[str]  # the paper / code the implementation follows
    uses_retrieval: ClassVar[bool] = True
    trained: ClassVar[bool] = False  # an RL method: an untrained policy is labelled as such
    # The protocols this method is scored under and under no other (ARENA's gold-context reader
    # setting); empty = the shared open-retrieval protocols. Other methods refuse these protocols,
    # and `harness run --method all` runs the method under its own, as a separate run.
    own_protocols: ClassVar[tuple[str, ...]] = ()

    def cannot_answer(self, example: QAExample) -> str | None:
        """Why the method cannot be run on ``example`` at all (a reader without paragraphs), else None."""
        return None

    @abstractmethod
    def spec(self, protocol: Protocol) -> MethodSpec:
        """The method's settings under ``protocol`` (its top-k, turn budget, ...)."""

    @abstractmethod
    def solve(self, examples: list[QAExample], ctx: RunContext) -> list[Trajectory]:
        """One trajectory per example, in order. Must not raise for a malformed model output:
        record it in the trajectory's status instead."""


def format_question(question: str) -> str:
    """Search-R1's question preprocessing: strip, and add a '?' if missing
    (``scripts/data_process/nq_search.py``)."""
    q = question.strip()
    return q if q.endswith("?") else q + "?"


@dataclass(frozen=True)
class RewardBreakdown:
    """A trajectory's reward: ``total`` (what the RL algorithm optimises) and its named parts
    (logged per component; dynamic-sampling filters may read them)."""

    total: float
    components: dict[str, float] = field(default_factory=dict)


@dataclass
class RewardContext:
    """What a reward function may use: the training step, and auxiliary models by role
    (``"reader"`` for R-Search's evidence reward, ``"judge"`` for judge-scored rewards,
    ``"embedder"`` for When-to-Search's query similarity), built from the recipe."""

    step: int = 0
    models: dict[str, Any] = field(default_factory=dict)
    total_steps: int | None = None  # the run's length (schedules that anneal with t/T, TIRESRAG-R1)

    def model(self, role: str, method: str) -> Any:
        if role not in self.models:
            from harness.errors import ConfigError

            raise ConfigError(
                f"method {method!r} needs a {role!r} model for its reward; configure it in the recipe's aux_models"
            )
        return self.models[role]


class TrainableMethod(Method):
    """A method that can be trained with RL: rewards, recipes and the paper's reported numbers.

    Training calls :meth:`solve` with ``ctx.training=True`` (token ids and loss masks come back
    in the trajectories), then :meth:`rewards` on each batch of trajectories."""

    trained: ClassVar[bool] = True

    @abstractmethod
    def reward_names(self) -> tuple[str, ...]:
        """The rewards this method defines; the first is the default (``"default"`` maps to it)."""

    @abstractmethod
    def reward(self, trajectory: Trajectory, *, name: str, ctx: RewardContext) -> RewardBreakdown:
        """The reward ``name`` of one finished trajectory."""

    def rewards(
        self, trajectories: list[Trajectory], *, name: str, ctx: RewardContext
    ) -> list[RewardBreakdown]:
        """Rewards of a batch; override to batch auxiliary model calls (readers, judges)."""
        return [self.reward(t, name=name, ctx=ctx) for t in trajectories]

    @abstractmethod
    def recipes(self) -> dict[str, Any]:
        """Named training recipes (``harness.rl.recipe.Recipe``); at least ``"paper"`` and ``"cpu-smoke"``."""

    def advantage_adjust(self, rewards: list[RewardBreakdown], group: Any, *, name: str) -> Any:
        """Optional hook ``(B,) sequence advantages -> (B,)`` applied before broadcasting to tokens
        (``harness.rl.advantages``), built from the batch's rewards; None = plain advantages.
        TIRESRAG-R1's difficulty-aware reweighting and consistency penalty use it."""
        return None

    def prompt_messages(self, example: QAExample, *, training: bool) -> list[dict[str, str]]:
        """The chat messages of the method's prompt for ``example`` (what ``solve`` feeds the chat
        template; ``training`` picks the training prompt where it differs); used to export training
        data to other trainers (verl). A final ``assistant`` message is a pre-fill: ``solve`` opens
        the assistant turn with that text and the model continues it (TIRESRAG-R1's ``<think>``)."""
        from harness.errors import ConfigError

        raise ConfigError(f"method {self.name!r} does not expose its prompt messages")

    def reported(self) -> list[Any]:
        """The paper's published numbers (``harness.store.ReportedRow``), every table row."""
        return []
