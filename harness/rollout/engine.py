"""The batched multi-turn rollout engine for tag protocols (Search-R1 and the papers built on it).

All active trajectories of a batch generate together each turn. Generation stops at the
dialect's closing tags; the first complete action decides what happens (Search-R1
``execute_predictions``): a search is answered by one batched retriever call whose hits are
rendered, truncated to ``max_obs_tokens`` and wrapped in the observation tags (:func:`retrieve_step`,
shared with the segment loop); an answer ends the trajectory; anything else gets the dialect's
correction message. After ``max_turns`` action turns a final turn is generated in which a search is
no longer executed (Search-R1's final rollout with ``do_search=False``).

What a paper changes in that loop it supplies as hook objects (:mod:`harness.rollout.hooks`): a
:class:`~harness.rollout.hooks.Budget` (what ``max_turns`` counts; default
:class:`~harness.rollout.hooks.TurnBudget`, the above) and a
:class:`~harness.rollout.hooks.TurnPolicy` (searches refused with a message, what follows a turn
without an action, an extra step after the observations; default: none, the correction message,
none). A refused search is recorded as a ``message`` turn, never as a retrieval. The observation
function (default: the renderer) returns each observation's body and the turns it recorded
(e.g. an LLM call that read the documents); the engine records those right after the retrieval.

The answer is extracted from the model's own text only (observations and correction messages
excluded). In training mode the engine works in token space: each turn generates from the exact
token ids of the context so far, and returns the response token ids with a loss mask that is 1 on
model-generated tokens and 0 on every observation / correction token.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from harness.rollout.base import RolloutConfig, RunContext
from harness.rollout.dialect import TagDialect
from harness.rollout.extract import Extraction, extract_tagged
from harness.rollout.hooks import Budget, Refusal, TurnBudget, TurnPolicy
from harness.rollout.render import Renderer
from harness.rollout.state import Observation, ObservationFn, RolloutState
from harness.types import Completion, Hit, QAExample, Trajectory

if TYPE_CHECKING:
    from harness.protocol import Protocol


def rendered(renderer: Renderer) -> ObservationFn:
    """The observation function that renders each search's hits with ``renderer``."""

    def observe(
        _states: list[RolloutState], _queries: list[str], hits: list[list[Hit]], _ctx: RunContext
    ) -> list[Observation]:
        return [(renderer(h), ()) for h in hits]

    return observe


@dataclass(frozen=True)
class TagRolloutConfig(RolloutConfig):
    """The tag loop: the dialect, the protocol's budgets, and the paper's hooks."""

    dialect: TagDialect
    renderer: Renderer
    top_k: int
    max_turns: int
    max_obs_tokens: int | None
    max_new_tokens: int
    extractor: Callable[[str], Extraction] | None = None  # default: the dialect's answer tags
    observation_fn: ObservationFn | None = None  # default: ``rendered(renderer)``
    budget: Budget = TurnBudget()
    policy: TurnPolicy = TurnPolicy()

    @classmethod
    def from_protocol(
        cls, protocol: Protocol, dialect: TagDialect, renderer: Renderer, **kw: Any
    ) -> TagRolloutConfig:
        """A method's dialect and renderer with the protocol's budgets (top-k, turns, observation
        and generation tokens); ``kw`` sets the remaining fields."""
        return cls(
            dialect=dialect,
            renderer=renderer,
            top_k=protocol.top_k,
            max_turns=protocol.max_turns,
            max_obs_tokens=protocol.max_obs_tokens,
            max_new_tokens=protocol.decoding.max_new_tokens,
            **kw,
        )

    def extract(self, model_text: str) -> Extraction:
        if self.extractor is not None:
            return self.extractor(model_text)
        return extract_tagged(model_text, self.dialect.answer_open, self.dialect.answer_close)

    def run(self, prompts: Sequence[str], examples: Sequence[QAExample], ctx: RunContext) -> list[Trajectory]:
        return run_tag_rollouts(prompts, examples, ctx, self)

    @property
    def correction_message(self) -> str:
        return self.policy.correction(self.dialect) or ""


def generate_turn(
    ctx: RunContext, states: Sequence[RolloutState], *, stop: Sequence[str], max_new_tokens: int
) -> list[Completion]:
    """One generation for every state, stop strings kept in the text; in training mode from the
    exact token ids of the context so far (prompt + response)."""
    kw = dict(stop=list(stop), max_new_tokens=max_new_tokens, sampling=ctx.sampling, include_stop=True)
    if ctx.training:
        ids = [s.prompt_ids + s.response_ids for s in states]  # type: ignore[operator]
        return ctx.backend.generate_ids(ids, **kw)
    return ctx.backend.generate([s.context for s in states], **kw)


def truncate_tokens(ctx: RunContext, text: str, limit: int | None) -> tuple[str, int, bool]:
    """Cut ``text`` to at most ``limit`` tokens of the backend's tokenizer; returns (text, n_tokens, cut)."""
    ids = ctx.backend.tokenize(text)
    if limit is None or len(ids) <= limit:
        return text, len(ids), False
    return ctx.backend.detokenize(ids[:limit]), limit, True


def append_env(ctx: RunContext, s: RolloutState, text: str) -> int:
    """Append environment text (observation, correction or message; loss mask 0). Returns its token count."""
    s.parts.append((text, False))
    if ctx.training:
        ids = ctx.backend.tokenize(text)
        s.response_ids.extend(ids)
        s.loss_mask.extend([0] * len(ids))
        s.engine_logprobs.extend([math.nan] * len(ids))
        return len(ids)
    return ctx.backend.count_tokens(text)


def run_tag_rollouts(
    prompts: Sequence[str], examples: Sequence[QAExample], ctx: RunContext, cfg: TagRolloutConfig
) -> list[Trajectory]:
    """Roll out one trajectory per (prompt, example), batched across the whole list."""
    if len(prompts) != len(examples):
        raise ValueError("one prompt per example")
    states = [RolloutState(example=e, prompt=p) for p, e in zip(prompts, examples, strict=True)]
    if ctx.training:
        for s in states:
            s.prompt_ids = ctx.backend.prompt_ids(s.prompt)
    observe = cfg.observation_fn if cfg.observation_fn is not None else rendered(cfg.renderer)

    reported = 0
    for round_no in range(cfg.budget.rounds(cfg.max_turns)):
        reported = ctx.report_finished(sum(s.done for s in states), reported)
        active = [s for s in states if not s.done]
        if not active:
            break
        ctx.report_turn(round_no + 1)
        can_search = cfg.budget.can_search(round_no, cfg.max_turns)
        t0 = time.perf_counter()
        completions = generate_turn(ctx, active, stop=cfg.dialect.stops, max_new_tokens=cfg.max_new_tokens)
        gen_latency = (time.perf_counter() - t0) / max(len(active), 1)

        searching: list[RolloutState] = []
        queries: list[str] = []
        for s, c in zip(active, completions, strict=True):
            query = take_action(ctx, cfg, s, c, can_search=can_search, latency_s=gen_latency)
            if query is not None:
                searching.append(s)
                queries.append(query)

        if searching:
            retrieve_step(
                ctx,
                searching,
                queries,
                dialect=cfg.dialect,
                top_k=cfg.top_k,
                max_obs_tokens=cfg.max_obs_tokens,
                observe=observe,
            )
            cfg.policy.after_observation(ctx, cfg, searching)

    return [finish_trajectory(s, cfg.extract(s.model_text)) for s in states]


def take_action(
    ctx: RunContext,
    cfg: TagRolloutConfig,
    s: RolloutState,
    c: Completion,
    *,
    can_search: bool,
    latency_s: float,
) -> str | None:
    """Record the generated turn ``c`` of ``s`` and act on it: an answer ends the row; a search the
    round allows returns its query (the caller retrieves for every searching row at once), unless
    the budget or the policy refuses it with a message; past the search rounds the row ends at
    max_turns; no action gets the policy's correction, or ends the row."""
    append_generated(ctx, s, c)
    action, content = cfg.dialect.parse_action(c.text)
    status = "ok"
    if action == "search" and not content:
        action, status = "invalid", "empty_query"
    elif action == "invalid":
        status = "invalid_action" if c.finish_reason != "length" else "truncated"
    refusal: Refusal | None = None  # a message instead of a search
    if action == "search" and can_search:
        refusal = cfg.budget.over_budget(s, cfg.max_turns)
        if refusal is not None:
            status = "search_after_budget"
        else:
            refusal = cfg.policy.refuse(s, content)
            if refusal is not None:
                status = refusal.status
    s.add_turn(
        kind="generate",
        latency_s=latency_s,
        **c.turn_fields(),
        status=status if action != "search" or can_search else "search_after_budget",
    )
    if action == "answer":
        s.done, s.ended_by = True, "answer"
    elif refusal is not None:
        n_env = append_env(ctx, s, refusal.message)
        s.add_turn(
            kind="message",
            text=refusal.message,
            query=content,
            observation_tokens=n_env,
            status=refusal.status,
        )
    elif action == "search" and can_search:
        return content
    elif not can_search:
        s.done, s.ended_by = True, "max_turns"
    elif (correction := cfg.policy.correction(cfg.dialect)) is None:
        s.done, s.ended_by = True, "no_action"
    elif correction:
        # stored as a turn: a reader of the trajectory sees what the model was told (the
        # policy often copies it), and the store keeps it without reconstructing it
        n_env = append_env(ctx, s, correction)
        s.add_turn(
            kind="message",
            text=correction,
            observation_tokens=n_env,
            status="correction",
        )
    return None


def retrieve_step(
    ctx: RunContext,
    states: list[RolloutState],
    queries: list[str],
    *,
    dialect: TagDialect,
    top_k: int,
    max_obs_tokens: int | None,
    observe: ObservationFn,
) -> list[int]:
    """One batched retrieval for ``states`` (one non-empty query each): the retriever's top-k,
    each observation from ``observe``, cut to ``max_obs_tokens`` and appended in the dialect's
    observation tags, recorded as a ``retrieve`` turn followed by the observation's own turns.
    Returns each state's observation token count."""
    retriever = ctx.require_retriever(dialect.name)
    t0 = time.perf_counter()
    hits = retriever.search(queries, top_k)
    latency = (time.perf_counter() - t0) / len(states)
    observed = observe(states, queries, hits, ctx)
    n_obs: list[int] = []
    for s, q, h, (body, extra) in zip(states, queries, hits, observed, strict=True):
        n_obs.append(
            add_observation(ctx, s, dialect, body, max_obs_tokens, query=q, hits=h, latency_s=latency)
        )
        for t in extra:
            s.turns.append(replace(t, index=len(s.turns)))
    return n_obs


def add_observation(
    ctx: RunContext,
    s: RolloutState,
    dialect: TagDialect,
    body: str,
    max_obs_tokens: int | None,
    *,
    query: str,
    hits: Sequence[Hit],
    latency_s: float,
    status: str = "ok",
) -> int:
    """Append ``body`` cut to ``max_obs_tokens`` tokens, in the dialect's observation tags, and
    record it as a ``retrieve`` turn (status ``obs_truncated`` when cut, else ``status``).
    Returns its token count."""
    body, _, cut = truncate_tokens(ctx, body, max_obs_tokens)
    n_obs = append_env(ctx, s, dialect.obs_prefix + body + dialect.obs_suffix)
    s.add_turn(
        kind="retrieve",
        text=body,
        query=query,
        doc_ids=[x.doc_id for x in hits],
        doc_scores=[x.score for x in hits],
        observation_tokens=n_obs,
        latency_s=latency_s,
        status="obs_truncated" if cut else status,
    )
    return n_obs


def append_generated(ctx: RunContext, s: RolloutState, c: Completion) -> None:
    """Append a generation (model text; its token ids with loss mask 1 in training mode)."""
    s.parts.append((c.text, True))
    if ctx.training:
        ids = list(c.token_ids or [])
        s.response_ids.extend(ids)
        s.loss_mask.extend([1] * len(ids))
        lp = c.logprobs if c.logprobs is not None and len(c.logprobs) == len(ids) else None
        s.engine_logprobs.extend(lp if lp is not None else [math.nan] * len(ids))
    s.last_finish = c.finish_reason


def finish_trajectory(s: RolloutState, ex: Extraction, **meta: object) -> Trajectory:
    """The trajectory of a finished state. A missing answer is labelled by why it is missing:
    ``truncated`` (the token budget ran out) or ``max_turns`` (the turn budget did)."""
    status = ex.status
    if status in ("no_answer", "unclosed_tag"):
        if s.last_finish == "length" or s.ended_by == "length":
            status = "truncated"
        elif not s.done or s.ended_by == "max_turns":
            status = "max_turns"
    return Trajectory(
        example_id=s.example.id,
        dataset=s.example.dataset,
        question=s.example.question,
        answers=list(s.example.answers),
        turns=s.turns,
        prediction=ex.prediction,
        extraction_status=status,
        response=s.response,
        prompt_ids=s.prompt_ids,
        response_ids=s.response_ids if s.prompt_ids is not None else None,
        loss_mask=s.loss_mask if s.prompt_ids is not None else None,
        engine_logprobs=(
            s.engine_logprobs
            if s.prompt_ids is not None and any(not math.isnan(x) for x in s.engine_logprobs)
            else None
        ),
        meta={"prompt": s.prompt, **meta},
    )
