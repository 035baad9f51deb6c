"""Shared stand-ins for the baseline tests: examples, a run context over a scripted backend and a
recording retriever, and a backend that answers each prompt with a function of it."""

from __future__ import annotations

from collections.abc import Callable

from harness.protocol import CorpusRef, Protocol
from harness.rollout.base import RunContext
from harness.types import QAExample
from tests.support.scripted import RecordingRetriever, ScriptedBackend


def protocol(**changes: object) -> Protocol:
    base = Protocol(name="t", corpus=CorpusRef(id="t", content_hash="0" * 64, n_passages=1))
    return base.with_(**changes) if changes else base


def example(i: int, question: str, *answers: str, dataset: str = "toy") -> QAExample:
    return QAExample(
        id=str(i), dataset=dataset, split="test", question=question, answers=answers or ("Paris",)
    )


def context(backend: ScriptedBackend, proto: Protocol | None = None) -> tuple[RunContext, RecordingRetriever]:
    retriever = RecordingRetriever()
    return RunContext(backend=backend, protocol=proto or protocol(), retriever=retriever), retriever


class FunctionBackend(ScriptedBackend):
    """Answers each prompt with ``fn(prompt)`` (stop strings applied as by ScriptedBackend)."""

    def __init__(self, fn: Callable[[str], str]):
        super().__init__({})
        self.fn = fn

    def _next(self, prompt: str) -> str:
        return self.fn(prompt)
