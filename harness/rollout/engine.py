"""The batched multi-turn rollout engine for tag protocols (Search-R1 and the papers built on it).

All active trajectories of a batch generate together each turn. Generation stops at the
dialect's closing tags; the first complete action decides what happens (Search-R1
``execute_predictions``): a search is answered by one batched retriever call whose hits are
rendered, truncated to ``max_obs_tokens`` and wrapped in the observation tags; an answer ends the
trajectory; anything else gets the dialect's correction message. After ``max_turns`` action turns a
final turn is generated in which a search is no longer executed (Search-R1's final rollout with
``do_search=False``).

Two budget semantics (``TagRolloutConfig.budget``): ``"turns"`` (above, the default) counts action
turns; ``"searches"`` counts executed searches against ``max_turns`` and generation rounds against
``max_generations``: a search over the cap is answered with ``over_budget_message`` and the model
goes on (Search-o1). With ``repeat_query_message`` set, a query the trajectory already retrieved is
answered with that message instead of a retrieval (not counted as a search). Both messages are
recorded as ``message`` turns (statuses ``over_budget`` / ``repeat_query``), never as retrievals.
With ``after_observation_stop`` set, every retrieval's observation is followed by one extra
generation that stops at that string (or at the dialect's action tags), a sub-step of the same
turn (Eval-RAR's mode B evaluation step).

The answer is extracted from the model's own text only (observations and correction messages
excluded). In training mode the engine works in token space: each turn generates from the exact
token ids of the context so far, and returns the response token ids with a loss mask that is 1 on
model-generated tokens and 0 on every observation / correction token.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from harness.errors import ConfigError
from harness.method import RunContext
from harness.rollout.base import RolloutConfig
from harness.rollout.dialect import TagDialect
from harness.rollout.extract import Extraction, extract_tagged
from harness.rollout.render import Renderer
from harness.types import Completion, Hit, QAExample, Trajectory, Turn

if TYPE_CHECKING:
    from harness.protocol import Protocol

# Called with the searching states' queries and hits; returns the text to place inside the
# observation tags for each (default: the renderer). Search-o1's Reason-in-Documents uses it.
ObservationFn = Callable[[list["RolloutState"], list[str], list[list[Hit]], RunContext], list[str]]


@dataclass
class TagRolloutConfig(RolloutConfig):
    dialect: TagDialect
    renderer: Renderer
    top_k: int
    max_turns: int
    max_obs_tokens: int | None
    max_new_tokens: int
    extractor: Callable[[str], Extraction] | None = None  # default: the dialect's answer tags
    observation_fn: ObservationFn | None = None
    final_turn: bool = True  # one more generation after max_turns, without search
    # a turn with neither a search nor an answer: "correct" appends the dialect's correction
    # message and goes on (Search-R1, every training loop); "end" makes it the final turn
    # (R-Search's evaluation loop, QingFei1/R-Search@ecba08d src/eval/main.py)
    on_invalid: Literal["correct", "end"] = "correct"
    # what ``max_turns`` counts: "turns" = action turns, then the final turn (Search-R1); "searches"
    # = executed searches, with at most ``max_generations`` generation rounds (``final_turn`` unused)
    budget: Literal["turns", "searches"] = "turns"
    max_generations: int | None = None  # budget="searches" only (required there)
    # budget="searches": the environment text (observation tags included) for a search over the cap
    over_budget_message: str = ""
    # the environment text (observation tags included) for a query this trajectory already
    # retrieved; None = retrieve it again
    repeat_query_message: str | None = None
    # one extra generation after every retrieval's observation, stopped at this string (also at
    # the dialect's stops); None = none (Eval-RAR mode B's evaluate sub-step, its paper's Algorithm 1)
    after_observation_stop: str | None = None

    def __post_init__(self) -> None:
        if self.budget == "searches" and (self.max_generations is None or self.max_generations < 1):
            raise ConfigError(
                f"TagRolloutConfig(budget='searches') needs max_generations >= 1, got {self.max_generations!r}"
            )
        if self.budget == "turns" and (self.max_generations is not None or self.over_budget_message):
            raise ConfigError(
                "TagRolloutConfig: max_generations and over_budget_message apply to budget='searches' only"
            )

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
        return self.dialect.invalid_message if self.on_invalid == "correct" else ""


@dataclass
class RolloutState:
    example: QAExample
    prompt: str
    parts: list[tuple[str, bool]] = field(default_factory=list)  # (text, generated by the model)
    turns: list[Turn] = field(default_factory=list)
    done: bool = False
    ended_by: str = ""  # answer | max_turns | length | no_action
    last_finish: str = ""
    # token space (training)
    prompt_ids: list[int] | None = None
    response_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)

    @property
    def context(self) -> str:
        return self.prompt + "".join(t for t, _ in self.parts)

    @property
    def model_text(self) -> str:
        return "".join(t for t, own in self.parts if own)

    @property
    def response(self) -> str:
        return "".join(t for t, _ in self.parts)

    def add_turn(self, **kw: object) -> Turn:
        t = Turn(index=len(self.turns), **kw)  # type: ignore[arg-type]
        self.turns.append(t)
        return t


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

    if cfg.budget == "searches":
        n_turns = cfg.max_generations or 0
    else:
        n_turns = cfg.max_turns + (1 if cfg.final_turn else 0)
    for turn_no in range(n_turns):
        active = [s for s in states if not s.done]
        if not active:
            break
        can_search = cfg.budget == "searches" or turn_no < cfg.max_turns
        t0 = time.perf_counter()
        completions = generate_turn(ctx, active, stop=cfg.dialect.stops, max_new_tokens=cfg.max_new_tokens)
        gen_latency = (time.perf_counter() - t0) / max(len(active), 1)

        searching: list[RolloutState] = []
        queries: list[str] = []
        for s, c in zip(active, completions, strict=True):
            append_generated(ctx, s, c)
            action, content = cfg.dialect.parse_action(c.text)
            status = "ok"
            if action == "search" and not content:
                action, status = "invalid", "empty_query"
            elif action == "invalid":
                status = "invalid_action" if c.finish_reason != "length" else "truncated"
            message: tuple[str, str] | None = None  # (turn status, environment text) instead of a search
            if action == "search" and can_search:
                message = search_refusal(cfg, s, content)
            if message is not None:
                status = "search_after_budget" if message[0] == "over_budget" else message[0]
            s.add_turn(
                kind="generate",
                latency_s=gen_latency,
                **c.turn_fields(),
                status=status if action != "search" or can_search else "search_after_budget",
            )
            if action == "answer":
                s.done, s.ended_by = True, "answer"
            elif message is not None:
                n_env = append_env(ctx, s, message[1])
                s.add_turn(
                    kind="message",
                    text=message[1],
                    query=content,
                    observation_tokens=n_env,
                    status=message[0],
                )
            elif action == "search" and can_search:
                searching.append(s)
                queries.append(content)
            elif not can_search:
                s.done, s.ended_by = True, "max_turns"
            elif cfg.on_invalid == "end":
                s.done, s.ended_by = True, "no_action"
            elif cfg.dialect.invalid_message:
                # stored as a turn: a reader of the trajectory sees what the model was told (the
                # policy often copies it), and the store keeps it without reconstructing it
                n_env = append_env(ctx, s, cfg.dialect.invalid_message)
                s.add_turn(
                    kind="message",
                    text=cfg.dialect.invalid_message,
                    observation_tokens=n_env,
                    status="correction",
                )

        if searching:
            retriever = ctx.require_retriever(cfg.dialect.name)
            t0 = time.perf_counter()
            hits = retriever.search(queries, cfg.top_k)
            ret_latency = (time.perf_counter() - t0) / len(searching)
            if cfg.observation_fn is not None:
                bodies = cfg.observation_fn(searching, queries, hits, ctx)
            else:
                bodies = [cfg.renderer(h) for h in hits]
            for s, q, h, body in zip(searching, queries, hits, bodies, strict=True):
                body, _, cut = truncate_tokens(ctx, body, cfg.max_obs_tokens)
                n_obs = append_env(ctx, s, cfg.dialect.obs_prefix + body + cfg.dialect.obs_suffix)
                s.add_turn(
                    kind="retrieve",
                    text=body,
                    query=q,
                    doc_ids=[x.doc_id for x in h],
                    doc_scores=[x.score for x in h],
                    observation_tokens=n_obs,
                    latency_s=ret_latency,
                    status="obs_truncated" if cut else "ok",
                )
            if cfg.after_observation_stop is not None:
                after_observation(ctx, cfg, searching, cfg.after_observation_stop)

    return [finish_trajectory(s, cfg.extract(s.model_text)) for s in states]


def append_generated(ctx: RunContext, s: RolloutState, c: Completion) -> None:
    """Append a generation (model text; its token ids with loss mask 1 in training mode)."""
    s.parts.append((c.text, True))
    if ctx.training:
        ids = list(c.token_ids or [])
        s.response_ids.extend(ids)
        s.loss_mask.extend([1] * len(ids))
    s.last_finish = c.finish_reason


def search_refusal(cfg: TagRolloutConfig, s: RolloutState, query: str) -> tuple[str, str] | None:
    """Why a search is answered by a message instead of a retrieval, with that message: over the
    search cap (budget "searches"; checked first, as Search-o1 does) or a query this trajectory
    already retrieved (``repeat_query_message``). None: run the search."""
    retrieved = [t.query for t in s.turns if t.kind == "retrieve"]
    if cfg.budget == "searches" and len(retrieved) >= cfg.max_turns:
        return "over_budget", cfg.over_budget_message
    if cfg.repeat_query_message is not None and query in retrieved:
        return "repeat_query", cfg.repeat_query_message
    return None


def after_observation(ctx: RunContext, cfg: TagRolloutConfig, states: list[RolloutState], stop: str) -> None:
    """One generation per state right after its observation, stopped at ``stop`` or at the
    dialect's stops (Eval-RAR's Algorithm 1 read strictly: ``</evaluate>``, with ``</search>`` /
    ``</answer>`` as
    safety). A complete answer in it ends the trajectory; a search in it is not executed (the next
    turn starts after it). Turn status: ``ok`` (stopped at ``stop`` or answered), ``truncated``,
    ``unexecuted_search``, or ``missing_stop`` (ended without ``stop``)."""
    t0 = time.perf_counter()
    comps = generate_turn(ctx, states, stop=[stop, *cfg.dialect.stops], max_new_tokens=cfg.max_new_tokens)
    latency = (time.perf_counter() - t0) / len(states)
    for s, c in zip(states, comps, strict=True):
        append_generated(ctx, s, c)
        action, _ = cfg.dialect.parse_action(c.text)
        if action == "answer":
            status = "ok"
            s.done, s.ended_by = True, "answer"
        elif c.finish_reason == "length":
            status = "truncated"
        elif action == "search":
            status = "unexecuted_search"
        elif c.finish_reason == "stop" and c.text.endswith(stop):
            status = "ok"
        else:
            status = "missing_stop"
        s.add_turn(
            kind="generate",
            latency_s=latency,
            **c.turn_fields(),
            status=status,
        )


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
        meta={"prompt": s.prompt, **meta},
    )
