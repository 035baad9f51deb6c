"""A judge asked inside an RL reward: the reward context's ``judge`` model, one batch per prompt.

Unlike :class:`harness.judge.core.Judge` (evaluation: an OpenAI-compatible transport, a verdict
cache in the store, retries of failed requests), a reward asks the recipe's auxiliary judge model
(``RewardContext.models["judge"]``, a :class:`~harness.llm.base.Backend`) every time, with the
paper's sampling and token budget, and parses each reply with the paper's own rule. A failed
request is not retried: it comes back as ``error`` and the reward counts it in its components.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Literal, TypeVar

from harness.judge.prompts import JudgePrompt

if TYPE_CHECKING:
    from harness.method import RewardContext
    from harness.types import SamplingParams, Trajectory

T = TypeVar("T")

ReplyStatus = Literal["ok", "unparsable", "error", "skipped"]


@dataclass(frozen=True)
class JudgedReply(Generic[T]):
    """One item's reply: ``ok`` (``value`` is the parse), ``unparsable`` (the parser returned None),
    ``error`` (the request failed: the backend's ``finish_reason == "error"``) or ``skipped`` (no
    item: nothing was asked)."""

    status: ReplyStatus
    value: T | None = None


@dataclass(frozen=True)
class RewardJudge(Generic[T]):
    """A judge prompt as a reward asks it: the prompt, the paper's reply rule (``parse``: the parsed
    value, None when the reply cannot be parsed), the token budget and the sampling."""

    prompt: JudgePrompt
    parse: Callable[[str], T | None]
    max_new_tokens: int
    sampling: SamplingParams

    def ask(
        self, ctx: RewardContext, method: str, trajectories: Sequence[Trajectory], texts: Sequence[str | None]
    ) -> list[JudgedReply[T]]:
        """The judge's parsed reply on each trajectory's judged text (the prediction or the whole
        response; None: not asked, ``skipped``), in order. Every asked item goes to ``ctx``'s
        ``judge`` model in one ``chat_batch``; with none asked the model is not needed (``method``
        names the method in the error when the recipe configures no judge)."""
        todo = [i for i, text in enumerate(texts) if text is not None]
        out: list[JudgedReply[T]] = [JudgedReply("skipped")] * len(texts)
        if not todo:
            return out
        convs = [
            self.prompt.messages(trajectories[i].question, trajectories[i].answers, texts[i] or "")
            for i in todo
        ]
        judge = ctx.model("judge", method)
        completions = judge.chat_batch(convs, max_new_tokens=self.max_new_tokens, sampling=self.sampling)
        for i, c in zip(todo, completions, strict=True):
            if c.finish_reason == "error":
                out[i] = JudgedReply("error")
                continue
            value = self.parse(c.text)
            out[i] = JudgedReply("unparsable") if value is None else JudgedReply("ok", value)
        return out
