"""A multi-turn policy through a real backend, for prefix-reuse tests: the real model generates
every turn freely (greedy, its own KV cache), then a scripted action is appended, so a rollout
has a fixed number of turns however untrained the model is: a search after each of the first
``searches`` turns, then an answer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness.types import Completion
from methods.search_r1.render import SEARCH_R1_DIALECT

OBS = SEARCH_R1_DIALECT.obs_prefix
QUERIES = ("capital of France", "author of Hamlet", "longest river in Europe", "tallest mountain")


class SearchesThenAnswers:
    """Wraps a backend (``generate`` and ``generate_ids``): each completion is the real model's
    ``free_tokens`` tokens followed by ``<search> q </search>`` while the context holds fewer than
    ``searches`` observations (counted by their opening ``obs_prefix``), else by ``<answer> Paris </answer>``. ``completions`` records the
    real backend's completions in call order."""

    def __init__(self, inner: Any, *, searches: int = 3, free_tokens: int = 32, obs_prefix: str = OBS):
        self.inner = inner
        self.obs_prefix = obs_prefix
        self.searches = searches
        self.free_tokens = free_tokens
        self.completions: list[list[Completion]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _action(self, context: str) -> str:
        n = context.count(self.obs_prefix)
        return f" <search> {QUERIES[n]} </search>" if n < self.searches else " <answer> Paris </answer>"

    def _finish(self, contexts: Sequence[str], real: list[Completion]) -> list[Completion]:
        self.completions.append(real)
        out = []
        for ctx, c in zip(contexts, real, strict=True):
            action = self._action(ctx)
            ids = self.inner.tokenize(action)
            out.append(
                Completion(
                    text=c.text + action,
                    prompt_tokens=c.prompt_tokens,
                    prefill_tokens=c.prefill_tokens,
                    completion_tokens=c.completion_tokens + len(ids),
                    finish_reason="stop",
                    stop=action.split()[-1],
                    token_ids=[t for t in c.token_ids or [] if t not in self.inner.eos_ids] + ids,
                )
            )
        return out

    def generate(self, prompts: Sequence[str], **kw: Any) -> list[Completion]:
        kw["max_new_tokens"] = self.free_tokens
        return self._finish(prompts, self.inner.generate(prompts, **kw))

    def generate_ids(self, prompt_ids: Sequence[Sequence[int]], **kw: Any) -> list[Completion]:
        kw["max_new_tokens"] = self.free_tokens
        contexts = [self.inner.detokenize(p) for p in prompt_ids]
        return self._finish(contexts, self.inner.generate_ids(prompt_ids, **kw))
