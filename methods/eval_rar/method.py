"""Eval-RAR (Yu, Li, Liu, Feng, Kang, Zhan: "Eval-RAR: Evaluation-Driven Retrieval-Augmented
Reasoning via Reinforcement Learning", Findings of ACL 2026). No code release.

A Search-R1 agent that must write a self-evaluation ``<evaluate> … </evaluate>`` after every
search result (the "Search-then-Evaluate" paradigm, paper §4.1 / Algorithm 1), trained with GRPO
on an outcome EM reward that falls back to a small evaluation reward (0.1) when the answer is wrong
but a gold answer appears in the concatenated evaluations (paper Eqs. 2-5). Where the paper is
silent, the defaults of the Search-R1 / AutoRefine code bases it builds on ("lineage":
PeterGriffinJin/Search-R1@a14dc3a, syr-cn/AutoRefine@8363788; docs/sources.md).

Engine mapping:

- one step of Algorithm 1 = one generation segment; the evaluation step is the *start of the next
  segment*, driven by the prompt, nothing force-prefixed (mode A, as the lineage's loop runs; the
  default: :class:`EvalRAR`, method ``eval_rar``).
- mode B (Algorithm 1 read strictly: :class:`EvalRARModeB`, method ``eval_rar_b``): after each
  search's ``<information>``, a separate generation stopped at ``</evaluate>`` (``</search>`` /
  ``</answer>`` as safety stops) is appended as part of the same step (the loop hook
  :class:`EvaluateAfterObservation`), then the next step. It follows the last step's search too. A
  complete answer in it ends the trajectory; a search in it is not executed (turn status
  ``unexecuted_search``; the next step starts after it); other statuses: ``ok``, ``truncated``,
  ``missing_stop`` (no ``</evaluate>``; the paper defines no penalty). Both modes give the same token
  stream when the model complies; they differ in step counting and in a missing ``<evaluate>``.
- at most N generation segments and no extra final turn (Algorithm 1: ``while n < N``; a search
  in the last step is executed and its documents appended, and the trajectory ends there).
- the invalid-action message is the paper's short string (Algorithm 1 line 22).
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, Literal

from harness.api import (
    RENDERERS,
    MethodSpec,
    Protocol,
    QAExample,
    RewardBreakdown,
    RewardContext,
    RolloutConfig,
    RolloutState,
    RunContext,
    TagDialect,
    TagRolloutConfig,
    TrainableMethod,
    Trajectory,
    TurnBudget,
    TurnPolicy,
    append_generated,
    exact_match,
    extract_tagged,
    format_question,
    generate_turn,
    normalize_answer,
    reward_fn,
    stripped_observations,
)
from methods.eval_rar.protocol import eval_protocol as eval_protocol  # re-exported

# Paper Appendix A.1 "Prompt Template for Trajectory Generation", verbatim, the whole string as one
# user message (lineage); the trailing newline after the question is AutoRefine's
# (syr-cn/AutoRefine@8363788 preprocess/data_process/utils.py).
PROMPT = (
    "You are a helpful assistant excel at answering questions with multi-turn search engine calling. To answer "
    "questions, you must first reason through the available information using <think> and </think>. If you "
    "identify missing knowledge, you may issue a search request using <search> query </search> at any time. "
    "The retrieval system will provide you with the three most relevant documents enclosed in <information> "
    "and </information>. After each search, you must conduct an evaluation, reviewing the question and the "
    "retrieved documents comprehensively to determine if the question can be answered. If the question can "
    "be answered, clearly cite the source content from the search documents that supports your answer. If "
    "the question cannot be answered, specify what information is missing: entity information, relational "
    "information, or specific time/location details. Provide your evaluation using <evaluate> and "
    "</evaluate>. You may send multiple search requests if needed. Once you have sufficient information, "
    "provide a concise final answer using <answer> and </answer>. For example, <answer> Donald Trump "
    "</answer>. Question: {question}\n"
)

# Paper Algorithm 1 line 22; the surrounding newlines frame it like Search-R1's message (ours).
INVALID_MESSAGE = "\nMy action is wrong. Let me try again.\n"
EVALUATE_OPEN, EVALUATE_CLOSE = "<evaluate>", "</evaluate>"
# Search-R1's tags and observation wrapper (<information>, paper §4.1 / case study Table 3).
EVAL_RAR_DIALECT = TagDialect(name="eval_rar", invalid_message=INVALID_MESSAGE)
RENDERER = "search_r1"  # "Doc {i}(Title: ...) ...", paper Table 3 case study

R_EVAL = 0.1  # paper §5.1: "The r_eval is set to 0.1"

EVALUATE_STEP = {
    "A": "mode A: opens the next generation segment, prompt-driven",
    "B": "mode B: a separate generation stopped at </evaluate> after every observation, same step",
}

_EVAL_RE = re.compile(re.escape(EVALUATE_OPEN) + r"(.*?)" + re.escape(EVALUATE_CLOSE), re.DOTALL)


def make_prompt(question: str) -> list[dict[str, str]]:
    """One user message holding the whole template (lineage: Search-R1 / AutoRefine parquet prompt);
    the question is stripped and gets a '?' as in Search-R1's data preprocessing."""
    return [{"role": "user", "content": PROMPT.format(question=format_question(question))}]


def evaluation_text(generated: str) -> str:
    """y_eval (paper Eq. 3): the contents of every ``<evaluate>`` block of the model's own text, in
    order, each stripped, joined with one space (the paper's "Concat" names no separator; ours)."""
    return " ".join(b.strip() for b in _EVAL_RE.findall(generated))


def evaluation_covers_gold(generated: str, golds: list[str]) -> bool:
    """``∃ a ∈ A : a ⊆ y_eval`` (paper Eq. 4): a SQuAD-normalised gold is a character substring of
    the normalised evaluation text (no word boundary, as AutoRefine's ``cover_em_check`` in
    verl/utils/reward_score/qa_em.py; golds normalising to "" never count, ours)."""
    y_eval = normalize_answer(evaluation_text(generated))
    if not y_eval:
        return False
    return any(g and g in y_eval for g in (normalize_answer(a) for a in golds))


def eval_rar_reward(
    generated: str, golds: list[str], *, r_eval: float = R_EVAL, eval_reward_requires_answer: bool = False
) -> RewardBreakdown:
    """R_total (paper Eq. 5) on the model's own text ``generated`` (observations excluded, so a
    gold inside retrieved documents never counts as evaluation):

    - R_ans = 1 if the last ``<answer>`` exactly matches a gold (SQuAD normalisation), else 0 (Eq. 2);
    - R_eval = ``r_eval`` if a gold is a substring of the concatenated ``<evaluate>`` blocks, else 0 (Eqs. 3-4);
    - R_total = R_ans if R_ans > 0 else R_eval (Eq. 5), so R_total ∈ {0, r_eval, 1}.

    ``eval_reward_requires_answer=True`` gives AutoRefine's code behaviour (no ``<answer>`` -> 0;
    syr-cn/AutoRefine@8363788 verl/utils/reward_score/qa_em.py); the default is the paper's formula.
    """
    ext = extract_tagged(generated, "<answer>", "</answer>")
    has_answer = ext.status in ("ok", "multiple_answers", "empty_answer")
    r_ans = exact_match(ext.prediction, golds) if ext.prediction else 0.0
    covered = evaluation_covers_gold(generated, golds)
    r_ev = r_eval if covered else 0.0
    if r_ans > 0:
        total = r_ans
    elif eval_reward_requires_answer and not has_answer:
        total = 0.0
    else:
        total = r_ev
    return RewardBreakdown(
        total=total,
        components={
            "outcome": r_ans,
            "evaluation": r_ev,
            "has_answer": float(has_answer),
            "evaluate_blocks": float(len(_EVAL_RE.findall(generated))),
        },
    )


@dataclass(frozen=True)
class EvaluateAfterObservation(TurnPolicy):
    """Mode B's evaluation step (Algorithm 1 read strictly): one generation per state right after
    its observation, stopped at ``stop`` (``</evaluate>``) or at the dialect's stops
    (``</search>`` / ``</answer>`` as safety). A complete answer in it ends the trajectory; a
    search in it is not executed (the next turn starts after it). Turn status: ``ok`` (stopped at
    ``stop`` or answered), ``truncated``, ``unexecuted_search``, or ``missing_stop`` (ended
    without ``stop``)."""

    stop: str

    def after_observation(self, ctx: RunContext, cfg: RolloutConfig, states: list[RolloutState]) -> None:
        t0 = time.perf_counter()
        comps = generate_turn(
            ctx, states, stop=[self.stop, *cfg.dialect.stops], max_new_tokens=cfg.max_new_tokens
        )
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
            elif c.finish_reason == "stop" and c.text.endswith(self.stop):
                status = "ok"
            else:
                status = "missing_stop"
            s.add_turn(kind="generate", latency_s=latency, **c.turn_fields(), status=status)


class EvalRAR(TrainableMethod):
    name = "eval_rar"
    description = (
        "Search-R1 agent with an <evaluate> self-check after every search; EM + 0.1 evaluation reward"
    )
    source = "Yu et al., Eval-RAR, Findings of ACL 2026 (no code release; Search-R1/AutoRefine lineage)"

    # Algorithm 1's evaluation step: "A" = it opens the next segment; "B" = a separate generation stopped
    # at </evaluate> right after every observation (EvalRARModeB)
    evaluate_mode: ClassVar[Literal["A", "B"]] = "A"

    def spec(self, protocol: Protocol) -> MethodSpec:
        return MethodSpec(
            name=self.name,
            prompts={"user": PROMPT},
            dialect=asdict(EVAL_RAR_DIALECT),
            renderer=RENDERER,
            extractor="last <answer> of the model's own response",
            params={
                "top_k": protocol.top_k,
                "max_steps": protocol.max_turns,
                "final_turn": False,
                "max_obs_tokens": protocol.max_obs_tokens,
                "max_new_tokens": protocol.decoding.max_new_tokens,
                "observation": "rendered documents stripped",
                "evaluate_step": EVALUATE_STEP[self.evaluate_mode],
                "evaluate_tags": [EVALUATE_OPEN, EVALUATE_CLOSE],
                "r_eval": R_EVAL,
            },
        )

    def rollout_config(self, protocol: Protocol) -> TagRolloutConfig:
        return TagRolloutConfig.from_protocol(
            protocol,
            EVAL_RAR_DIALECT,
            RENDERERS.get(RENDERER),
            observation_fn=stripped_observations(RENDERER),
            budget=TurnBudget(final_turn=False),
            policy=EvaluateAfterObservation(EVALUATE_CLOSE) if self.evaluate_mode == "B" else TurnPolicy(),
        )

    # -- training ---------------------------------------------------------------------------------

    def prompt_messages(self, example: QAExample, *, training: bool) -> list[dict[str, str]]:
        return make_prompt(example.question)

    # eval_rar: paper Eq. 5; outcome_em: the ablation "w/o evaluation reward" (Table 2);
    # eval_rar_requires_answer: AutoRefine's code behaviour (its verl/utils/reward_score/qa_em.py)
    @reward_fn("eval_rar", default=True)
    def reward_eval_rar(self, trajectory: Trajectory, ctx: RewardContext) -> RewardBreakdown:
        return eval_rar_reward(trajectory.model_text, list(trajectory.answers))

    @reward_fn("outcome_em")
    def reward_outcome_em(self, trajectory: Trajectory, ctx: RewardContext) -> RewardBreakdown:
        full = eval_rar_reward(trajectory.model_text, list(trajectory.answers))
        return RewardBreakdown(total=full.components["outcome"], components=full.components)

    @reward_fn("eval_rar_requires_answer")
    def reward_eval_rar_requires_answer(self, trajectory: Trajectory, ctx: RewardContext) -> RewardBreakdown:
        golds = list(trajectory.answers)
        return eval_rar_reward(trajectory.model_text, golds, eval_reward_requires_answer=True)


class EvalRARModeB(EvalRAR):
    """Eval-RAR with the strict Algorithm-1 evaluation step (mode B): the same
    prompt, reward and recipes; the rollout generates the ``<evaluate>`` step separately after every
    observation."""

    name = "eval_rar_b"
    description = (
        "Eval-RAR, mode B: a separate <evaluate> generation after every search result (strict Algorithm 1)"
    )
    evaluate_mode = "B"

    def reported(self) -> list[Any]:
        # the paper's numbers are listed under eval_rar; it does not say which mode produced them
        return []
