"""Deterministic stand-ins for control-flow tests only: a backend that replays planned outputs and
a retriever that records its calls. Metric and learning tests use real models and retrievers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from harness.types import Completion, Hit, SamplingParams


class ScriptedBackend:
    """Replays, for each prompt, the next planned output of the first script key found in the prompt.

    Outputs are cut at the first stop string (kept when ``include_stop``), like a real backend.
    Tokens are characters, so token counts are exact and easy to reason about."""

    name = "scripted"

    def __init__(self, script: dict[str, list[str]], default: str | None = None):
        self.script = {k: list(v) for k, v in script.items()}
        self.default = default
        self.calls: list[list[str]] = []

    def _next(self, prompt: str) -> str:
        # the longest matching key wins, so one question that contains another is not confused
        for key in sorted(self.script, key=len, reverse=True):
            if key in prompt:
                if not self.script[key]:
                    if self.default is None:
                        raise AssertionError(f"script for {key!r} exhausted")
                    return self.default
                return self.script[key].pop(0)
        if self.default is None:
            raise AssertionError(f"no script for prompt ...{prompt[-80:]!r}")
        return self.default

    def generate(
        self,
        prompts: list[str],
        *,
        stop: list[str],
        max_new_tokens: int,
        sampling: SamplingParams,
        include_stop: bool = False,
    ) -> list[Completion]:
        self.calls.append(list(prompts))
        out = []
        for p in prompts:
            text = self._next(p)
            finish, hit = "eos", None
            cut = min(((text.find(s), s) for s in stop if s in text), default=None)
            if cut is not None:
                idx, hit = cut
                text = text[: idx + (len(hit) if include_stop else 0)]
                finish = "stop"
            if len(text) > max_new_tokens:
                text, finish, hit = text[:max_new_tokens], "length", None
            out.append(
                Completion(
                    text=text,
                    prompt_tokens=len(p),
                    completion_tokens=len(text),
                    finish_reason=finish,
                    stop=hit,
                    token_ids=[ord(c) for c in text],
                )
            )
        return out

    def generate_ids(self, prompt_ids: list[list[int]], **kw) -> list[Completion]:
        return self.generate(["".join(map(chr, ids)) for ids in prompt_ids], **kw)

    def chat_batch(self, conversations, *, max_new_tokens=256, sampling=None, stop=()):
        return self.generate(
            [self.chat_prompt(m) for m in conversations],
            stop=list(stop),
            max_new_tokens=max_new_tokens,
            sampling=sampling,
        )

    def chat_prompt(self, messages: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        return "".join(f"<{m['role']}>{m['content']}</{m['role']}>" for m in messages) + "<assistant>"

    def tokenize(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def prompt_ids(self, text: str) -> list[int]:
        return self.tokenize(text)

    def detokenize(self, ids: Sequence[int]) -> str:
        return "".join(map(chr, ids))

    def count_tokens(self, text: str) -> int:
        return len(text)


@dataclass
class RecordingRetriever:
    """Returns ``k`` fixed passages per query (ids ``<query>#<rank>``) and records every call."""

    calls: list[tuple[list[str], int]] = field(default_factory=list)

    def search(self, queries: list[str], k: int) -> list[list[Hit]]:
        self.calls.append((list(queries), k))
        return [
            [
                Hit(
                    doc_id=f"{q[:20]}#{r}",
                    contents=f'"Title {r}"\nText about {q[:20]} number {r}.',
                    score=1.0 / r,
                )
                for r in range(1, k + 1)
            ]
            for q in queries
        ]

    @property
    def n_queries(self) -> int:
        return sum(len(q) for q, _ in self.calls)
