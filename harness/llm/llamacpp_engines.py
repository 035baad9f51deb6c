"""Several llama.cpp engines of one thread each behind one backend: the trainer's rollout engine on
a CPU with more cores than one engine uses well.

Why: decoding one sequence of a 135M model is a chain of small matrix-vector products, and
llama.cpp's threads split each of them and meet after it; on 2 cores, two engines of one thread
each served 16 requests (300 prompt tokens, 50 new) in 18.0 and 19.1 s against 24.7 and 29.0 s for
one engine of two threads (docs/training.md). Several slots of one engine batch the decode
instead, but each slot prefills its own copy of a group's prompt (8 slots: 79.8 s against 61.4 s
for a step's rollouts), and llama.cpp's server has no way to run two slots on separate threads.

Routing keeps each slot's prompt cache useful. Every engine has one slot, which keeps the KV cache
of its last prompt; a request goes to:

* the engine that served the longest earlier prompt this prompt extends (a multi-turn rollout's
  next turn is its last prompt, the completion and the observation: ``harness.rollout.engine``
  concatenates ids, so the earlier prompt is an exact prefix), which also keeps a GRPO group's
  identical first-turn prompts on one engine;
* else the engine with the fewest prompt tokens of this call so far (ties: the first).

Prompt ``i`` of a call is sampled with seed ``seed + i`` whichever engine serves it, as
:class:`~harness.llm.llamacpp_backend.LlamaCppBackend` does. Which engine serves a prompt depends
only on the calls before it (never on timing), and each engine serves its share in order, so a
rerun repeats exactly. A run with N engines is still a different run from one with one engine:
llama.cpp's kernels round differently on one thread than on two.

:meth:`drop_prefix_cache` forgets the routing history (the trainer calls it after each round of
rollouts); :meth:`set_adapters` restarts every engine, the engines concurrently.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from harness.errors import ConfigError
from harness.llm.base import BackendSpec, Completion, GenerateArgs, TokenBackend, base_seed
from harness.llm.llamacpp_backend import LlamaCppBackend

T = TypeVar("T")


def route(prompts: Sequence[Sequence[int]], history: list[list[tuple[int, ...]]], engines: int) -> list[int]:
    """The engine of each of ``prompts`` (see the module docstring), given the prompts each engine
    served before (``history[e]``, in order); the prompts are appended to ``history``."""
    if len(history) != engines:
        raise ValueError(f"route: a history for {len(history)} engines, not {engines}")
    load = [0] * engines
    out = []
    for p in prompts:
        key = tuple(int(t) for t in p)
        best, best_len = -1, 0
        for e, served in enumerate(history):
            for q in served:
                if best_len < len(q) <= len(key) and key[: len(q)] == q:
                    best, best_len = e, len(q)
        if best < 0:
            best = min(range(engines), key=lambda e: (load[e], e))
        load[best] += len(key)
        history[best].append(key)
        out.append(best)
    return out


class LlamaCppEngines(TokenBackend):
    """``engines`` :class:`~harness.llm.llamacpp_backend.LlamaCppBackend` child engines of
    ``spec.threads // engines`` threads each (one slot each), as one backend."""

    name = "llamacpp"

    def __init__(
        self,
        spec: BackendSpec,
        engines: int,
        *,
        lora: Sequence[Path] = (),
        logprobs: bool = False,
        spin: bool = False,
    ):
        """``spec.threads``: all the engines' threads together, a multiple of ``engines``;
        ``spec.max_batch_size`` must be 1 (one slot per engine). ``lora``, ``logprobs`` and
        ``spin``: each engine's (:class:`~harness.llm.llamacpp_backend.LlamaCppBackend`, always
        ``child=True``: the trainer restarts engines between learner updates)."""
        from harness.llm.server import llama_threads

        threads = llama_threads(spec.threads)
        if engines < 1 or threads % engines:
            raise ConfigError(
                f"--rollout-engines {engines}: must divide the {threads} rollout threads "
                "(--rollout-threads); each engine gets the same number"
            )
        if spec.batch_limit != 1:
            raise ConfigError(
                f"LlamaCppEngines: max_batch_size {spec.batch_limit}; each engine has one slot (1)"
            )
        self.spec = spec
        each = spec.model_copy(update={"threads": threads // engines})
        self._pool = ThreadPoolExecutor(max_workers=engines, thread_name_prefix="llamacpp-engines")
        self.engines: list[LlamaCppBackend] = []
        try:
            self.engines = self._each(
                lambda _: LlamaCppBackend(each, lora=lora, logprobs=logprobs, child=True, spin=spin),
                list(range(engines)),
            )
        except BaseException:
            self.close()
            raise
        self._history: list[list[tuple[int, ...]]] = [[] for _ in range(engines)]
        self.served = [0] * engines  # prompts each engine served, over the backend's life

    def _each(self, fn: Callable[[Any], T], items: Sequence[Any]) -> list[T]:
        """``fn`` over ``items`` concurrently (one engine each), results in order; the first error
        is raised once all have finished (no engine is left mid-request)."""
        futures = [self._pool.submit(fn, x) for x in items]
        errors = [f.exception() for f in futures]
        for err in errors:
            if err is not None:
                raise err
        return [f.result() for f in futures]

    @property
    def logprobs_unaligned(self) -> int:
        return sum(e.logprobs_unaligned for e in self.engines)

    def _complete_ids(self, prompt_ids: Sequence[Sequence[int]], args: GenerateArgs) -> list[Completion]:
        base = base_seed(args.sampling)
        where = route(prompt_ids, self._history, len(self.engines))
        shares = [[i for i, e in enumerate(where) if e == k] for k in range(len(self.engines))]

        def serve(k: int) -> list[Completion]:
            rows = shares[k]
            if not rows:
                return []
            self.served[k] += len(rows)
            return self.engines[k].complete_seeded(
                [prompt_ids[i] for i in rows], [base + i for i in rows], args
            )

        done = self._each(serve, list(range(len(self.engines))))
        out: list[Completion | None] = [None] * len(prompt_ids)
        for rows, comps in zip(shares, done, strict=True):
            for i, c in zip(rows, comps, strict=True):
                out[i] = c
        self.unaligned = sum(e.unaligned for e in self.engines)
        return [c for c in out if c is not None]

    def drop_prefix_cache(self) -> None:
        """Forget which engine served what (the next call routes afresh)."""
        self._history = [[] for _ in self.engines]

    def set_adapters(self, lora: Sequence[Path]) -> None:
        """Restart every engine with ``lora`` (concurrently); the routing history is dropped, as
        the restarted engines' prompt caches are empty."""
        self.drop_prefix_cache()
        self._each(lambda e: e.set_adapters(lora), self.engines)

    def suspend(self) -> None:
        """Stop every engine until the next :meth:`set_adapters`."""
        self._each(lambda e: e.suspend(), self.engines)

    # tokenizer and template: every engine serves the same GGUF, so the first one answers
    def tokenize(self, text: str) -> list[int]:
        return self.engines[0].tokenize(text)

    def prompt_ids(self, text: str) -> list[int]:
        return self.engines[0].prompt_ids(text)

    def detokenize(self, ids: Sequence[int]) -> str:
        return self.engines[0].detokenize(ids)

    def chat_prompt(self, messages: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        return self.engines[0].chat_prompt(messages, add_generation_prompt)

    def describe(self) -> dict[str, Any]:
        d = self.engines[0].describe()
        return {**d, "threads": self.engines[0].threads * len(self.engines), "engines": len(self.engines)}

    def close(self) -> None:
        for e in self.engines:
            e.close()
        self._pool.shutdown(wait=True)
