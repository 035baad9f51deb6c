"""The method interface: a method turns a batch of questions into trajectories.

A method module (``methods/<paper>.py`` or ``baselines/<name>.py``) subclasses :class:`Method`,
declares its :class:`MethodSpec` (prompt text, tag dialect, renderer, extractor, parameters — all
hashed into ``method_spec_hash`` and stored with each run) and implements :meth:`Method.solve`.
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict

from harness.rollout.base import RolloutConfig, RunContext
from harness.types import QAExample, Trajectory

if TYPE_CHECKING:
    from harness.protocol import Protocol


_F = TypeVar("_F", bound=Callable[..., Any])


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
    # The trajectory meta key under which a reader method records where its references came from
    # ("dataset": the question's own paragraphs; anything else: a substitute), counted per run by
    # ``harness.results.summary.reference_sources``; a method that records none counts 0 and 0.
    reference_source_key: ClassVar[str] = "reference_source"

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


def split_prefill(messages: list[dict[str, str]]) -> tuple[list[dict[str, str]], str]:
    """``prompt_messages`` -> (the chat messages, the assistant pre-fill or "")."""
    if messages and messages[-1]["role"] == "assistant":
        return messages[:-1], messages[-1]["content"]
    return messages, ""


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


@dataclass(frozen=True)
class _RewardMark:
    names: tuple[str, ...]
    default: bool
    batched: bool


@dataclass(frozen=True)
class _RewardEntry:
    attr: str  # the method's attribute name: a subclass that overrides it is called
    batched: bool


def reward_fn(*names: str, default: bool = False, batched: bool = False) -> Callable[[_F], _F]:
    """Registers the decorated method of a :class:`TrainableMethod` subclass as the reward(s)
    ``names``, in the order they are defined; ``default=True``: the first name is the default.

    A plain reward is ``fn(self, trajectory, ctx) -> RewardBreakdown``. A ``batched`` one is
    ``fn(self, trajectories, *, name, ctx) -> list[RewardBreakdown]``: it gets the whole batch (to
    ask a reader or judge once) and the resolved name (one function may serve several names).
    :meth:`TrainableMethod.rewards` resolves ``"default"`` and refuses an unknown name for all."""
    if not names or "default" in names:
        raise ValueError(f"@reward_fn needs one or more names other than 'default', got {names!r}")

    def mark(fn: _F) -> _F:
        fn.__reward__ = _RewardMark(tuple(names), default, batched)  # type: ignore[attr-defined]
        return fn

    return mark


class TrainableMethod(Method):
    """A method that can be trained with RL: rewards, recipes and the paper's reported numbers.

    Training calls :meth:`solve` with ``ctx.training=True`` (token ids and loss masks come back
    in the trajectories), then :meth:`rewards` on each batch of trajectories."""

    trained: ClassVar[bool] = True
    # What :meth:`advantage_adjust` does, in one line, for a method that overrides it; None = the
    # method has no advantage hook. Exporters to trainers that cannot run the hook (verl's
    # main_ppo) list it among what they do not run.
    advantage_hook: ClassVar[str | None] = None

    @abstractmethod
    def rollout_config(self, protocol: Protocol) -> RolloutConfig | None:
        """The method's multi-turn rollout under ``protocol`` (its dialect, budgets and engine:
        ``rollout_config(p).run(prompts, examples, ctx)``); None for a method that does not
        retrieve and answers in one completion (exporters replay its ``solve`` on the response)."""

    def demonstration_fields(self, example: QAExample, protocol: Protocol) -> dict[str, str]:
        """Extra fields a supervised warm-up's turn templates (``recipe.sft.turns``) may name beside
        ``{question}`` and ``{answer}``, for ``example``: what the method's own output format needs that
        only the method knows (e.g. the numbers of the gold references). None by default."""
        return {}

    # The rewards the class registers with @reward_fn: name -> entry, the default first (filled by
    # __init_subclass__ from the base classes' and the class's own decorated methods).
    _reward_table: ClassVar[dict[str, _RewardEntry]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        table = dict(cls._reward_table)
        default = next(iter(table), None)
        for attr, fn in vars(cls).items():
            marks: _RewardMark | None = getattr(fn, "__reward__", None)
            if marks is None:
                continue
            for name in marks.names:
                table[name] = _RewardEntry(attr, marks.batched)
            if marks.default:
                default = marks.names[0]
        if default is not None:
            table = {default: table.pop(default), **table}
        cls._reward_table = table

    def reward_names(self) -> tuple[str, ...]:
        """The rewards this method defines (with :func:`reward_fn`); the first is the default
        (``"default"`` maps to it)."""
        return tuple(self._reward_table)

    def resolve_reward(self, name: str) -> str:
        """The reward ``name`` stands for (``"default"``: the first); an unknown name is refused."""
        if name == "default" and self._reward_table:
            return next(iter(self._reward_table))
        if name not in self._reward_table:
            from harness.errors import ConfigError

            raise ConfigError(
                f"method {self.name!r} has no reward {name!r}; known: default, {', '.join(self.reward_names())}"
            )
        return name

    def reward(self, trajectory: Trajectory, *, name: str, ctx: RewardContext) -> RewardBreakdown:
        """The reward ``name`` of one finished trajectory."""
        return self.rewards([trajectory], name=name, ctx=ctx)[0]

    def rewards(
        self, trajectories: list[Trajectory], *, name: str, ctx: RewardContext
    ) -> list[RewardBreakdown]:
        """The reward ``name`` of each trajectory of a batch (a batched reward makes its auxiliary
        model calls, readers and judges, once for the batch)."""
        name = self.resolve_reward(name)
        entry = self._reward_table[name]
        fn = getattr(self, entry.attr)
        if entry.batched:
            return fn(trajectories, name=name, ctx=ctx)
        return [fn(t, ctx) for t in trajectories]

    def recipes(self) -> dict[str, Any]:
        """Named training recipes (``harness.rl.recipe.Recipe``); at least ``"paper"`` and
        ``"cpu-smoke"``. :class:`harness.api.TrainableMethod`, the class a plugin subclasses, reads
        them from the ``recipes.yaml`` beside the method's module; the engine's contract only asks
        for them (the reader is above this layer, see ``docs/architecture.md``)."""
        from harness.errors import ConfigError

        raise ConfigError(
            f"method {self.name!r} has no recipes: subclass harness.api.TrainableMethod (recipes.yaml "
            "beside the module) or override recipes()"
        )

    def load_reward_models(self) -> None:
        """Load now the models a reward of this method loads itself on first use (not the recipe's
        auxiliary models, which come in the reward context): a reward scored from many threads at
        once (verl's reward manager) then finds them loaded, instead of loading them in every
        thread. Default: nothing to load."""

    def advantage_adjust(self, rewards: list[RewardBreakdown], group: Any, *, name: str) -> Any:
        """Optional hook ``(B,) sequence advantages -> (B,)`` applied before broadcasting to tokens
        (``harness.rl.advantages``), built from the batch's rewards; None = plain advantages.
        TIRESRAG-R1's difficulty-aware reweighting and consistency penalty use it. A method that
        overrides it sets :attr:`advantage_hook`."""
        return None

    def prompt_messages(self, example: QAExample, *, training: bool) -> list[dict[str, str]]:
        """The chat messages of the method's prompt for ``example`` (what ``solve`` feeds the chat
        template; ``training`` picks the training prompt where it differs); used to export training
        data to other trainers (verl). A final ``assistant`` message is a pre-fill: ``solve`` opens
        the assistant turn with that text and the model continues it (TIRESRAG-R1's ``<think>``)."""
        from harness.errors import ConfigError

        raise ConfigError(f"method {self.name!r} does not expose its prompt messages")

    def solve(self, examples: list[QAExample], ctx: RunContext) -> list[Trajectory]:
        """The common case of a multi-turn method: each question's :meth:`prompt_messages` through
        the chat template (a final assistant message opens the turn: :func:`split_prefill`), then
        the loop of :meth:`rollout_config`, the loop the verl export runs too. A method that answers
        in one completion (``rollout_config`` returns None) or post-processes its trajectories
        overrides it."""
        cfg = self.rollout_config(ctx.protocol)
        if cfg is None:
            from harness.errors import ConfigError

            raise ConfigError(
                f"method {self.name!r} has no rollout loop (rollout_config returned None): implement solve"
            )
        prompts = []
        for e in examples:
            messages, prefill = split_prefill(self.prompt_messages(e, training=ctx.training))
            prompts.append(ctx.backend.chat_prompt(messages) + prefill)
        return cfg.run(prompts, examples, ctx)

    def reported(self) -> list[Any]:
        """The paper's published numbers (``harness.results.store.ReportedRow``), every table row;
        :class:`harness.api.TrainableMethod` reads them from the ``reported.yaml`` beside the
        method's module (none when there is no such file)."""
        f = self.reported_file()
        return f.rows() if f is not None else []

    def reported_file(self) -> Any:
        """The parsed ``reported.yaml`` of the method (:class:`harness.results.reported.ReportedFile`:
        rows and their recorded settings), or None: this contract has none;
        :class:`harness.api.TrainableMethod` reads the file beside the method's module."""
        return None
