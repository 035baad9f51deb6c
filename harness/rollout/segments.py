"""The free-running segment loop: generate segments until one is not a search.

The tag engine (:mod:`harness.rollout.engine`) always stops at the answer tag, ends a trajectory
only on an answer, and appends a correction message after a segment with no action. TIRESRAG-R1
(probe2/TIRESRAG-R1@a457873 ``experience_maker.py``) and When-to-Search (its paper §3.2) instead
continue after an answer (reflection),
end on EOS, and count an empty query; this loop does that with the engine's public pieces
(``generate_turn``, ``retrieve_step``, ``add_observation``, ``finish_trajectory``), so records,
token ids and loss masks are the engine's, and a search goes through the engine's retrieval step.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from harness.rollout.base import RolloutConfig, RunContext
from harness.rollout.dialect import TagDialect
from harness.rollout.engine import (
    add_observation,
    append_generated,
    finish_trajectory,
    generate_turn,
    rendered,
    retrieve_step,
)
from harness.rollout.extract import Extraction
from harness.rollout.state import RolloutState
from harness.types import Completion, Hit, QAExample, Trajectory

QueryOf = Callable[[Completion], "str | None"]


@dataclass(frozen=True)
class SegmentLoopConfig(RolloutConfig):
    """A multi-turn loop that generates segments until a segment is not a search.

    ``stops``: stop strings of every segment (kept in the text). ``query_of(completion)``: the
    segment's search query, or None when the segment is not a search (the trajectory then ends:
    EOS, length, or an answer stop). A search issued when ``max_searches`` searches have been run
    ends the trajectory unexecuted (``max_turns``). An empty query ends the trajectory
    (``empty_query="end"``) or is answered with ``no_results`` and counted as a retrieval
    (``"no_results"``). ``observe(hits)`` renders the documents placed between the dialect's
    ``obs_prefix`` and ``obs_suffix`` (cut to ``max_obs_tokens``). ``max_response_tokens``: budget of
    generated plus observation tokens after the prompt (each segment gets at most what is left).
    """

    dialect: TagDialect
    stops: tuple[str, ...]
    max_new_tokens: int
    max_searches: int
    top_k: int
    max_obs_tokens: int | None
    query_of: QueryOf
    observe: Callable[[Sequence[Hit]], str]
    extractor: Callable[[str], Extraction]
    empty_query: Literal["end", "no_results"] = "end"
    no_results: str = ""
    max_response_tokens: int | None = None

    def extract(self, model_text: str) -> Extraction:
        return self.extractor(model_text)

    def run(self, prompts: Sequence[str], examples: Sequence[QAExample], ctx: RunContext) -> list[Trajectory]:
        return run_segment_rollouts(prompts, examples, ctx, self)

    @property
    def correction_message(self) -> str:
        return ""  # a segment with no search ends the trajectory: nothing is appended


# long: one loop over rounds whose per-row state (token budget used, searches, the active rows
# grouped by budget) every step reads and updates; the exact regression layers pin its output
def run_segment_rollouts(
    prompts: Sequence[str], examples: Sequence[QAExample], ctx: RunContext, cfg: SegmentLoopConfig
) -> list[Trajectory]:
    """One trajectory per (prompt, example), batched across the list (states with the same token
    budget generate together). Same records as the shared engine: ``generate`` and ``retrieve``
    turns, the model's own text for extraction, token ids and a loss mask (0 on observations) in
    training mode."""
    if len(prompts) != len(examples):
        raise ValueError("one prompt per example")
    states = [RolloutState(example=e, prompt=p) for p, e in zip(prompts, examples, strict=True)]
    used = [0] * len(states)  # response tokens so far (generated + observation)
    searches = [0] * len(states)
    if ctx.training:
        for s in states:
            s.prompt_ids = ctx.backend.prompt_ids(s.prompt)
    reported = 0
    for seg in range(cfg.max_searches + 1):
        reported = ctx.report_finished(sum(s.done for s in states), reported)
        active = [i for i, s in enumerate(states) if not s.done]
        if not active:
            break
        ctx.report_turn(seg + 1)
        by_budget: dict[int, list[int]] = {}
        for i in active:
            budget = cfg.max_new_tokens
            if cfg.max_response_tokens is not None:
                budget = min(budget, cfg.max_response_tokens - used[i])
            if budget <= 0:
                states[i].done, states[i].ended_by = True, "length"
                continue
            by_budget.setdefault(budget, []).append(i)
        searching: list[int] = []
        queries: list[str] = []
        for budget, idx in by_budget.items():
            t0 = time.perf_counter()
            comps = generate_turn(ctx, [states[i] for i in idx], stop=cfg.stops, max_new_tokens=budget)
            latency = (time.perf_counter() - t0) / len(idx)
            for i, c in zip(idx, comps, strict=True):
                s = states[i]
                append_generated(ctx, s, c)
                used[i] += c.completion_tokens
                q = cfg.query_of(c)
                status = "ok"
                if q is None:
                    s.done = True
                    s.ended_by = "answer" if stopped_at(c, cfg.dialect.answer_close) else c.finish_reason
                    if c.finish_reason == "length":
                        status = "truncated"
                elif searches[i] >= cfg.max_searches:
                    s.done, s.ended_by, status = True, "max_turns", "search_after_budget"
                elif not q and cfg.empty_query == "end":
                    s.done, s.ended_by, status = True, "empty_query", "empty_query"
                else:
                    if not q:
                        status = "empty_query"
                    searching.append(i)
                    queries.append(q)
                s.add_turn(
                    kind="generate",
                    latency_s=latency,
                    **c.turn_fields(),
                    status=status,
                )
        if not searching:
            continue
        asked = [(i, q) for i, q in zip(searching, queries, strict=True) if q]
        n_obs: dict[int, int] = {}
        if asked:
            counts = retrieve_step(
                ctx,
                [states[i] for i, _ in asked],
                [q for _, q in asked],
                dialect=cfg.dialect,
                top_k=cfg.top_k,
                max_obs_tokens=cfg.max_obs_tokens,
                observe=rendered(cfg.observe),
            )
            n_obs = {i: n for (i, _), n in zip(asked, counts, strict=True)}
        for i, q in zip(searching, queries, strict=True):
            if not q:  # no_results: answered without a retrieval, counted as one
                n_obs[i] = add_observation(
                    ctx,
                    states[i],
                    cfg.dialect,
                    cfg.no_results,
                    cfg.max_obs_tokens,
                    query=q,
                    hits=[],
                    latency_s=0.0,
                    status="empty_query",
                )
            used[i] += n_obs[i]
            searches[i] += 1
    return [finish_trajectory(s, cfg.extract(s.model_text), ended_by=s.ended_by) for s in states]


def stopped_at(c: Completion, tag: str) -> bool:
    """The segment ended at stop string ``tag`` (kept in the text: ``include_stop``)."""
    return c.finish_reason == "stop" and c.text.endswith(tag)
