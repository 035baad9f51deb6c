"""TIRESRAG-R1 (He, Gutiérrez-Basulto, Pan: "From Sufficiency to Reflection: Reinforcement-Guided
Thinking Quality in Retrieval-Augmented Reasoning for LLMs", 2025; code probe2/TIRESRAG-R1, an
OpenRLHF fork). "Paper" = the paper (§n, Eq. n, Fig. n, App. X); "Code" = probe2/TIRESRAG-R1@a457873:
the rollout in ``OpenRLHF-RAG/openrlhf/trainer/ppo_utils/experience_maker.py``, the prompt layout in
``OpenRLHF-RAG/openrlhf/datasets/prompts_dataset.py``, the rewards in ``reward/answer_reflection_reward.py``
and ``reward/sufficient_thinking_reward.py``, the evaluation in ``evaluation/`` (a FlashRAG fork);
"ours" = our choice where both are silent or disagree.

Think–retrieve–reflect: a Search-R1-style agent (``<think>``, ``<search>``, ``<information>``,
``<answer>``) that may reflect once after its first answer, search again and answer again; the
**last** answer is the prediction. Generation stops only at ``</search>`` and EOS (never at
``</answer>``), at most 8 retrievals, 512 new tokens per segment (Code: experience_maker.py).
The released evaluation stops at the first ``</answer>`` and so scores the **first** answer: it is
the alternative prediction ``first_answer``, scored as ``em[first_answer]``, ``f1[first_answer]``, ...

Reward (paper §4.3, Eqs. 1-5): answer F1 + a_t·(w_t·thinking + w_s·sufficiency + w_r·reflection), the
thinking and
sufficiency scores from an LLM judge (``ctx.model("judge", ...)``; the paper's Qwen3-8B) with the
paper's prompts (verbatim in ``methods/tiresrag_r1/judge.py``); a_t anneals the auxiliary
rewards (Eq. 5). On top of GRPO's group-normalised advantage A, the advantage becomes
``A' = (A - P)·W`` with the consistency penalty P (Eq. 7) and the difficulty weight W (Eq. 6):
:meth:`TiresRAG.advantage_adjust` builds that hook; groups whose answer F1 are all ≤ 0.1 or all
≥ 0.9 are filtered (paper §4.4, Algorithm 1; Code ``--accuracy_lower_bound``; recipe ``dynamic_sampling``
threshold filter on the ``f1`` component).

Paper and released code differ (reflection reward, penalty, missing answer, judge parsing); the reward
names switch them:

=================  ==============================================================================
``recommended``    ours: paper reflection reward (+1/0/-1 on token-cover EM), the
                   code's scaled consistency penalty, prediction "" without an answer, judge replies
                   parsed after removing ``<think>`` (last sufficiency object), thinking clipped to [0, 1]
``paper``          as ``recommended`` with the paper's unscaled penalty λ_p·|z(S) z(T) z(A)| (Eq. 7,
                   typo fixed)
``code``           the released code: reflection reward in {-1, 0}, scaled penalty, the whole response
                   F1-scored when there is no answer, first sufficiency object of the raw reply,
                   thinking score not clipped
``no_*``           Table 7 ablations of ``recommended`` (difficulty, penalty, reflect, sufficiency,
                   thinking)
``f1_only``        naive GRPO (Table 7 "Naive GRPO"; undefined there, ours): answer F1 only
``smoke``          ``recommended`` with a 32-token judge budget (the packaged CPU judge; ours)
=================  ==============================================================================

A judge reply that cannot be parsed scores 0 (the code's rule) and is counted in the component
``judge_unparsed`` (0, 1 or 2 per trajectory); a failed judge request scores 0 and is counted in
``judge_error``.

The rollout is :func:`harness.rollout.segments.run_segment_rollouts`, the free-running multi-turn
loop TIRESRAG-R1 and When-to-Search need (they continue after an answer, end on EOS, count an
empty query).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # torch is imported where a training step needs it: a base install runs without it
    import torch

    from harness.api import SeqAdjust

from harness.api import (
    Completion,
    ConfigError,
    ExtractionStatus,
    Hit,
    MethodSpec,
    Protocol,
    QAExample,
    RewardBreakdown,
    RewardContext,
    RunContext,
    SamplingParams,
    SegmentLoopConfig,
    TagDialect,
    TrainableMethod,
    Trajectory,
    extract_tagged,
    normalize_answer_r1searcher,
    reward_fn,
    run_segment_rollouts,
    stopped_at,
)
from methods.tiresrag_r1.protocol import (
    RELEASED_EMPTY_QUERY,
    EvalMode,
    eval_mode,
)
from methods.tiresrag_r1.protocol import eval_protocol as eval_protocol  # re-exported
from methods.tiresrag_r1.protocol import released_protocol as released_protocol  # re-exported

# -- protocol (paper §4.1) -----------------------------------------------------------------------------

# Paper Fig. 9 (Instruct models), verbatim, as the system message (Code placement: prompts_dataset.py).
SYSTEM_INSTRUCT = (
    "You are a helpful assistant. Answer the given question.\n\n"
    "You must reason **clearly and completely** inside <think> and </think> before providing any final answer. "
    "Always identify and verify all key entities (e.g., person names, locations, dates, awards) mentioned in the "
    "question.\n\n"
    "If you are uncertain about an entity or fact, or if the question requires external knowledge, you may use "
    "<search>your query</search>, and the top search results will be returned between <information> and "
    "</information>. Carefully read and reflect on each newly retrieved piece of information. You can search as "
    "many times as you want.\n\n"
    "When reasoning, you must ensure your reasoning path aligns strictly with the evidence.\n\n"
    "After reasoning, before providing your final answer, rethink it to make sure the answer is exactly correct "
    "for the original question. Use the most accurate span from the evidence when possible.\n\n"
    "Only after satisfying all the above, give the final answer inside <answer> and </answer>. For example, "
    "<answer>Beijing</answer>.\n\n"
    "After outputting the final answer in <answer></answer>, you have one chance to reflect on the answer. If you "
    "choose not to reflect, nothing further needs to be done. Otherwise, you can then re-examine your thinking "
    "process, the information obtained, and even search for more information to verify your previous answer or "
    "correct the previous answer. Remember, after reflection ends, you should output the answer in "
    "<answer></answer>."
)
# Paper Fig. 10 (Base models), verbatim; Code layout: the text, a blank line, "Question:{q}", "\n<think>".
PROMPT_BASE = (
    "Answer the given question.\n\n"
    "You must reason **clearly and completely** inside <think> and </think> before providing any final answer.\n\n"
    "Always identify and verify all key entities (e.g., person names, locations, dates, awards) mentioned in the "
    "question.\n\n"
    "If you are uncertain about an entity or fact, or if the question requires external knowledge, you may use "
    "<search>your query</search>, and the top search results will be returned between <information> and "
    "</information>. Carefully read and reflect on each newly retrieved piece of information.\n\n"
    "You can search as many times as you want.\n\n"
    "When reasoning, you must ensure your reasoning path aligns strictly with the evidence.\n\n"
    "After reasoning, before providing your final answer, rethink it to make sure the answer is exactly correct "
    "for the original question.\n\n"
    "Use the most accurate span from the evidence when possible.\n\n"
    "Only after satisfying all the above, give the final answer inside <answer> </answer>. For example, "
    "<answer> Beijing </answer>.\n\n"
    "After outputting the final answer in <answer> </answer>, you have one chance to reflect on the answer. If you "
    "choose not to reflect, nothing further needs to be done.\n\n"
    "Otherwise, you can then re-examine your thinking process, the information obtained, and even search for more "
    "information to verify your previous answer or correct the previous answer. Remember, after reflection ends, "
    "you should output the answer in <answer> </answer>."
)
THINK_PREFILL = "<think>"  # Code: the assistant turn is pre-filled with "<think>" (prompts_dataset.py)

# Code (experience_maker.py): observation "<information>\n{docs}</information>\n\n" after the model's
# "</search>"; ours: the training format in evaluation too, sampled ids kept.
TIRESRAG_DIALECT = TagDialect(
    name="tiresrag_r1",
    obs_prefix="\n\n<information>\n",
    obs_suffix="</information>\n\n",
    invalid_message="",
)
STOPS = ("</search>",)  # Code (experience_maker.py): only </search> (and EOS); never </answer>
# The released evaluation's observation (probe2/TIRESRAG-R1@a457873
# evaluation/FlashRAG/flashrag/pipeline/active_pipeline.py:405-406): the stripped segment, "\n",
# "<information>\n", the documents, "</information>\n\n" (the segment's leading whitespace is kept here).
RELEASED_DIALECT = TagDialect(
    name="tiresrag_r1",
    obs_prefix="\n<information>\n",
    obs_suffix="</information>\n\n",
    invalid_message="",
)
PROMPT_MAX_TOKENS = 1024  # Code: prompt_max_len (not enforced here; our prompts are far shorter)

_NUM_PREFIX = re.compile(r"^\d+\s+")


def render_docs(hits: Sequence[Hit]) -> str:
    """Code ``format_docs`` (experience_maker.py): ``({j}){title}\\n{text}\\n`` per document (a leading
    ``\\d+\\s+`` stripped), the literal ``None`` without documents."""
    if not hits:
        return "None"
    out = []
    for j, h in enumerate(hits, 1):
        doc = _NUM_PREFIX.sub("", f"{h.title}\n{h.text}")
        out.append(f"({j}){doc}\n")
    return "".join(out)


def search_query(c: Completion) -> str | None:
    """Code (experience_maker.py): a segment that stopped at ``</search>`` and holds ``<search>`` is
    a search; the
    query is the text after the **last** ``<search>``, double quotes dropped, whitespace collapsed
    ("" ends the trajectory). Anything else ends the trajectory."""
    if not stopped_at(c, "</search>") or "<search>" not in c.text:
        return None
    q = c.text.split("<search>")[-1]
    q = q.removesuffix("</search>")
    return " ".join(q.replace('"', "").split())


def released_query(c: Completion) -> str | None:
    """The released evaluation's query (active_pipeline.py:88-104 ``extract_search_content``, :325): a
    segment that stopped at ``</search>`` and holds ``<search>`` is a search; the query is the text
    between the last ``<search>`` and the final ``</search>``, stripped (quotes and inner whitespace
    kept; "" is an empty query)."""
    if not stopped_at(c, "</search>") or "<search>" not in c.text:
        return None
    return c.text.split("<search>")[-1].removesuffix("</search>").strip()


def released_prediction(t: Trajectory) -> tuple[str, ExtractionStatus]:
    """The released evaluation's prediction from the final segment (active_pipeline.py:297-372):
    an empty query -> "I don't know." (:340-348); a segment holding ``<answer>`` -> the text after
    its last ``<answer>`` up to ``</answer>`` (not stripped; :298, :363); otherwise the segment
    lower-cased, after its last "." (:365). Status ``ok`` for a closed answer, else
    ``final_turn_fallback`` (scored, counted as not answered)."""
    final = next((x.text for x in reversed(t.turns) if x.kind == "generate"), "")
    if t.meta.get("ended_by") == "empty_query":
        return RELEASED_EMPTY_QUERY, "final_turn_fallback"
    if "<answer>" in final:
        tail = final.split("<answer>")[-1]
        return tail.split("</answer>")[0], "ok" if "</answer>" in tail else "final_turn_fallback"
    return final.lower().split(".")[-1], "final_turn_fallback"


def make_prompt(question: str) -> list[dict[str, str]]:
    """Instruct layout (Code prompts_dataset.py): Fig. 9 as system message, the raw question as user message;
    ``solve`` appends the ``<think>`` pre-fill after the chat template's generation prompt."""
    return [{"role": "system", "content": SYSTEM_INSTRUCT}, {"role": "user", "content": question}]


def base_prompt(question: str) -> str:
    """Base-model layout (Code prompts_dataset.py; paper Fig. 10): no chat template."""
    return f"{PROMPT_BASE}\n\nQuestion:{question}\n{THINK_PREFILL}"


# -- reward constants (paper §4.3) ---------------------------------------------------------------------

W_T, W_S, W_R = 0.6, 0.3, 0.3  # Paper App. C.1: thinking, sufficiency, reflection weights
A_LO, B_HI, RHO_0, K_W = 0.4, 1.5, 0.75, 10.0  # Paper Eq. 6: difficulty weight
LAMBDA_P = 0.1  # Paper §4.4 / Code: consistency penalty weight
DECAY_AT, DECAY_TEMP = 0.9, 10.0  # Paper Eq. 5: a_t = 1 / (1 + exp((t - 0.9 T) / 10))
Z_EPS = 1e-8  # Code: z-scores with numpy population std + 1e-8 (answer_reflection_reward.py)
REFLECT_OK_F1 = 0.5  # Code: reflection "correct" = F1 > 0.5 or token cover (answer_reflection_reward.py)
# Code (sufficient_thinking_reward.py): Qwen3-8B judge, T 0.6, top-p 0.95, top-k 20, max 4048 tokens,
# thinking on.
JUDGE_SAMPLING = SamplingParams(temperature=0.6, top_p=0.95, top_k=20)
JUDGE_MAX_TOKENS = 4048
SMOKE_JUDGE_MAX_TOKENS = 32  # ours: the packaged CPU judge


def f1_train(pred: str, gold: str) -> float:
    """The training answer F1 (paper Eq. 1; Code answer_reflection_reward.py): R1-Searcher
    normalisation (True/False -> yes/no,
    punctuation -> space), 0 when either side is yes/no/noanswer and they differ, token F1."""
    p, g = normalize_answer_r1searcher(pred), normalize_answer_r1searcher(gold)
    special = {"yes", "no", "noanswer"}
    if (p in special or g in special) and p != g:
        return 0.0
    same = sum((Counter(p.split()) & Counter(g.split())).values())
    if same == 0:
        return 0.0
    prec, rec = same / len(p.split()), same / len(g.split())
    return 2 * prec * rec / (prec + rec)


def cem_train(pred: str, gold: str) -> float:
    """Code (answer_reflection_reward.py) ``cem_train``: every gold token (``split(" ")``) is among
    the prediction's tokens."""
    pt = normalize_answer_r1searcher(pred).split(" ")
    return 1.0 if all(tok in pt for tok in normalize_answer_r1searcher(gold).split(" ")) else 0.0


def best(fn: Callable[[str, str], float], pred: str, golds: Sequence[str]) -> float:
    """Max over gold aliases (training golds are single strings; evaluation lists)."""
    return max(fn(pred, g) for g in golds)


def reflection_paper(answers: Sequence[str], golds: Sequence[str]) -> float:
    """Paper Eq. 4: +1 when a wrong first answer becomes a correct last answer (token-cover CEM,
    as the code's), -1 when a correct one becomes wrong, else 0 (a single answer or none: 0)."""
    if len(answers) < 2:
        return 0.0
    first, last = best(cem_train, answers[0], golds), best(cem_train, answers[-1], golds)
    if first == 0.0 and last == 1.0:
        return 1.0
    if first == 1.0 and last == 0.0:
        return -1.0
    return 0.0


def reflection_code(answers: Sequence[str], golds: Sequence[str]) -> float:
    """Code (answer_reflection_reward.py; never positive): with ok(a) = F1 > 0.5 or token cover, two
    or more answers:
    ok first and ok last -> 0 if the last F1 ≥ the first F1 else -1; ok first, wrong last -> -1;
    wrong first -> 0 if ok last else -1. One answer: 0 if ok else -1. None: 0."""

    def ok(a: str) -> bool:
        return best(f1_train, a, golds) > REFLECT_OK_F1 or best(cem_train, a, golds) == 1.0

    if len(answers) >= 2:
        first, last = answers[0], answers[-1]
        if ok(first):
            if ok(last):
                return 0.0 if best(f1_train, last, golds) >= best(f1_train, first, golds) else -1.0
            return -1.0
        return 0.0 if ok(last) else -1.0
    if len(answers) == 1:
        return 0.0 if ok(answers[0]) else -1.0
    return 0.0


def a_schedule(t: float, total: float) -> float:
    """Paper Eq. 5: a_t = 1 / (1 + exp((t - 0.9 T) / 10)) (Alg. 1's swapped form is a typo)."""
    return 1.0 / (1.0 + math.exp((t - DECAY_AT * total) / DECAY_TEMP))


def difficulty_weight(mean_sufficiency: float) -> float:
    """Paper Eq. 6: W = A + (B - A) / (1 + exp(k (R^S_avg - ρ_0))), A 0.4, B 1.5, ρ_0 0.75, k 10."""
    return A_LO + (B_HI - A_LO) / (1.0 + math.exp(K_W * (mean_sufficiency - RHO_0)))


def _z(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return (x - x.mean()) / (scale.std(unbiased=False) + Z_EPS)


def consistency_penalty(
    f1: torch.Tensor,
    thinking: torch.Tensor,
    sufficiency: torch.Tensor,
    a_t: float,
    *,
    mode: Literal["code_scaled", "paper_unscaled"],
    w_t: float = W_T,
    w_s: float = W_S,
    lam: float = LAMBDA_P,
) -> torch.Tensor:
    """P ≥ 0 per rollout of one group (paper Eq. 7), subtracted from the advantage.

    ``code_scaled`` (Code): zA = z(F1), zT = (a·w_t·T - mean) / (std(T) + ε), zS likewise with
    w_s·S, P = -λ·zA·zT·zS where that product is negative, else 0; population std, ε = 1e-8.
    ``paper_unscaled`` (Eq. 7 with the typo fixed): the same with unscaled z(T), z(S).
    """
    import torch

    f1, thinking, sufficiency = (v.to(torch.float64) for v in (f1, thinking, sufficiency))
    za = _z(f1, f1)
    if mode == "code_scaled":
        zt = _z(a_t * w_t * thinking, thinking)
        zs = _z(a_t * w_s * sufficiency, sufficiency)
    elif mode == "paper_unscaled":
        zt, zs = _z(thinking, thinking), _z(sufficiency, sufficiency)
    else:
        raise ConfigError(f"unknown consistency-penalty mode {mode!r}")
    prod = za * zt * zs
    return torch.where(prod < 0, -lam * prod, torch.zeros_like(prod))


@dataclass(frozen=True)
class Variant:
    """How one reward name computes the reward (see the module docstring)."""

    reflect: Literal["paper", "code"] = "paper"
    penalty: Literal["code_scaled", "paper_unscaled", "none"] = "code_scaled"
    difficulty: bool = True
    no_answer: Literal["empty", "whole_response"] = "empty"
    judge_parse: Literal["recommended", "code"] = "recommended"
    judges: bool = True
    w_t: float = W_T
    w_s: float = W_S
    w_r: float = W_R
    judge_max_tokens: int = JUDGE_MAX_TOKENS


VARIANTS: dict[str, Variant] = {
    "recommended": Variant(),
    "paper": Variant(penalty="paper_unscaled"),
    "code": Variant(reflect="code", no_answer="whole_response", judge_parse="code"),
    "no_difficulty": Variant(difficulty=False),  # Table 7 "w/o Difficulty"
    "no_penalty": Variant(penalty="none"),  # Table 7 "w/o Penalty"
    "no_reflect": Variant(w_r=0.0),  # Table 7 "w/o Reflect"
    # Table 7 "w/o Sufficient" / "w/o Thinking": the weight is 0 in R^sum; S is still judged for W. The
    # code-form penalty scales z(S) / z(T) by the weight, so it vanishes too (the paper does not say).
    "no_sufficiency": Variant(w_s=0.0),
    "no_thinking": Variant(w_t=0.0),
    "f1_only": Variant(penalty="none", difficulty=False, judges=False, w_t=0.0, w_s=0.0, w_r=0.0),
    "smoke": Variant(judge_max_tokens=SMOKE_JUDGE_MAX_TOKENS),
}

_SUFFICIENT_RAW = re.compile(r'\{\s*"sufficient context to the given answer"\s*:\s*([0-9.]+)\s*\}')


@dataclass(frozen=True)
class JudgeScore:
    value: float
    unparsed: bool
    error: bool


def parse_sufficiency(reply: str, mode: Literal["recommended", "code"]) -> JudgeScore:
    """R^S from a judge reply (paper Eq. 2; Code sufficient_thinking_reward.py). ``recommended``: the
    harness parser (``<think>`` removed,
    the last ``{"sufficient context to the given answer": 0|1}``). ``code``: the first such
    object of the lower-cased raw reply, its value as a number. No object: 0, unparsed."""
    if mode == "code":
        m = _SUFFICIENT_RAW.search(reply.lower())
        if m is None:
            return JudgeScore(0.0, True, False)
        try:
            return JudgeScore(float(m.group(1)), False, False)
        except ValueError:
            return JudgeScore(0.0, True, False)
    from methods.tiresrag_r1.judge import TIRESRAG_R1_SUFFICIENCY

    p = TIRESRAG_R1_SUFFICIENCY.parser(reply)
    if p.status != "ok" or p.score is None:
        return JudgeScore(0.0, True, False)
    return JudgeScore(p.score, False, False)


def parse_thinking(reply: str, mode: Literal["recommended", "code"]) -> JudgeScore:
    """R^T from a judge reply (paper Eq. 3): ``<think>…</think>`` removed, stripped, ``float``; failure
    -> 0, unparsed. ``recommended`` clips to [0, 1] (ours); ``code`` does not."""
    from harness.api import strip_think

    try:
        x = float(strip_think(reply).strip())
    except ValueError:
        return JudgeScore(0.0, True, False)
    if math.isnan(x):
        return JudgeScore(0.0, True, False)
    if mode == "recommended":
        x = min(1.0, max(0.0, x))
    return JudgeScore(x, False, False)


def all_answers(text: str) -> list[str]:
    """Every ``<answer>…</answer>`` of the model's text, in order, stripped (the paper scores the
    last one)."""
    return [a.strip() for a in re.findall(r"<answer>(.*?)</answer>", text, re.DOTALL)]


# -- the method ----------------------------------------------------------------------------------------


class TiresRAG(TrainableMethod):
    name = "tiresrag_r1"
    description = (
        "think-retrieve-reflect agent (one reflection after the first answer); answer F1 + judge-scored "
        "sufficiency/thinking + reflection rewards, difficulty weighting, consistency penalty, F1 group filter"
    )
    source = "He, Gutiérrez-Basulto, Pan 2025, TIRESRAG-R1 (probe2/TIRESRAG-R1)"
    advantage_hook = "consistency penalty and difficulty weight, A' = (A - P)·W (advantage_adjust)"

    def spec(self, protocol: Protocol) -> MethodSpec:
        from methods.tiresrag_r1.judge import TIRESRAG_R1_SUFFICIENCY, TIRESRAG_R1_THINKING

        mode = eval_mode(protocol)
        released = mode.name == "released"
        # the released mode adds keys; the harness mode's spec (and its pinned hash) is unchanged
        extra = {"eval_mode": mode.name, "query": "text of the last <search>, stripped"} if released else {}
        return MethodSpec(
            name=self.name,
            prompts={"system": SYSTEM_INSTRUCT, "prefill": THINK_PREFILL, "base": PROMPT_BASE},
            dialect=asdict(RELEASED_DIALECT if released else TIRESRAG_DIALECT),
            renderer="tiresrag_r1: '({j}){title}\\n{text}\\n', 'None' without documents",
            extractor=(
                "released: the final segment's last <answer> (stop at the first </answer>: the first "
                "answer), else its text after the last '.', lower-cased; empty query: \"I don't know.\""
                if released
                else "last <answer> of the model's own text (first answer kept in meta)"
            ),
            params={
                **extra,
                "top_k": protocol.top_k,
                "max_retrievals": protocol.max_turns,
                "max_obs_tokens": protocol.max_obs_tokens,
                "max_new_tokens_per_segment": protocol.decoding.max_new_tokens,
                "stops": list(mode.stops),
                "empty_query": (
                    f"ends the trajectory, prediction {RELEASED_EMPTY_QUERY!r}"
                    if released
                    else "ends the trajectory"
                ),
                "judge_prompts": {
                    "sufficiency": TIRESRAG_R1_SUFFICIENCY.prompt_hash,
                    "thinking": TIRESRAG_R1_THINKING.prompt_hash,
                },
                "weights": {"thinking": W_T, "sufficiency": W_S, "reflection": W_R},
                "difficulty": {"A": A_LO, "B": B_HI, "rho0": RHO_0, "k": K_W},
                "lambda_p": LAMBDA_P,
            },
        )

    def rollout_config(self, protocol: Protocol) -> SegmentLoopConfig:
        mode: EvalMode = eval_mode(protocol)
        released = mode.name == "released"
        return SegmentLoopConfig(
            dialect=RELEASED_DIALECT if released else TIRESRAG_DIALECT,
            stops=mode.stops,
            max_new_tokens=protocol.decoding.max_new_tokens,
            max_searches=protocol.max_turns,
            top_k=protocol.top_k,
            max_obs_tokens=protocol.max_obs_tokens,
            query_of=released_query if released else search_query,
            observe=render_docs,
            extractor=lambda text: extract_tagged(text, "<answer>", "</answer>"),
            empty_query="end",
        )

    def solve(self, examples: list[QAExample], ctx: RunContext) -> list[Trajectory]:
        released = eval_mode(ctx.protocol).name == "released"
        if released and ctx.training:
            raise ConfigError(
                f"protocol {ctx.protocol.name!r} is TIRESRAG-R1's released evaluation; train under "
                "tiresrag_r1-eval or a recipe"
            )
        prompts = [ctx.backend.chat_prompt(make_prompt(e.question)) + THINK_PREFILL for e in examples]
        trajs = run_segment_rollouts(prompts, examples, ctx, self.rollout_config(ctx.protocol))
        for t in trajs:
            if released:
                t.prediction, t.extraction_status = released_prediction(t)
            answers = all_answers(t.model_text)
            t.meta["n_answers"] = len(answers)
            t.meta["first_answer"] = answers[0] if answers else None  # the released eval's prediction
            # Code: the released evaluation stops at "</answer>" (evaluation/src/eval_config.yaml:35)
            # and predicts that segment's answer (FlashRAG/flashrag/pipeline/active_pipeline.py:297-298
            # in evaluation/), i.e. the first one: scored as em[first_answer], ... ("" without one)
            t.alt_predictions["first_answer"] = answers[0] if answers else ""
        return trajs

    # -- training ---------------------------------------------------------------------------------

    def prompt_messages(self, example: QAExample, *, training: bool) -> list[dict[str, str]]:
        """The instruct layout with the assistant turn pre-filled with ``<think>`` (as ``solve``)."""
        return [*make_prompt(example.question), {"role": "assistant", "content": THINK_PREFILL}]

    def variant(self, name: str) -> Variant:
        return VARIANTS[self.resolve_reward(name)]

    @reward_fn(*VARIANTS, default=True, batched=True)
    def reward_variant(
        self, trajectories: list[Trajectory], *, name: str, ctx: RewardContext
    ) -> list[RewardBreakdown]:
        """R^sum (Eq. 5) per trajectory; the judge calls of the batch go out in two ``chat_batch``
        calls (sufficiency, thinking). Components: ``f1`` (the group filter's metric), ``outcome``
        (= f1), ``sufficiency``, ``thinking``, ``reflection``, ``a_t``, ``n_answers``,
        ``judge_unparsed``, ``judge_error``."""
        v = VARIANTS[name]
        a_t = 0.0
        if v.w_t or v.w_s or v.w_r:
            total_steps = getattr(ctx, "total_steps", None)
            if not total_steps:
                raise ConfigError(
                    "TIRESRAG-R1's reward anneals its auxiliary rewards with a_t = 1/(1+exp((t-0.9T)/10)) "
                    "(Eq. 5), which needs the run's total steps T: the trainer must set RewardContext.total_steps"
                )
            a_t = a_schedule(ctx.step + 1, total_steps)  # Code: t counts rollout batches from 1
        n = len(trajectories)
        suff = [JudgeScore(0.0, False, False)] * n
        think = [JudgeScore(0.0, False, False)] * n
        if v.judges:
            suff, think = self._judge(trajectories, v, ctx)
        out = []
        for t, s, th in zip(trajectories, suff, think, strict=True):
            own = t.model_text
            answers = all_answers(own)
            if answers:
                pred = answers[-1]
            else:
                pred = t.response if v.no_answer == "whole_response" else ""
            f1 = best(f1_train, pred, t.answers) if pred else 0.0
            refl = (
                reflection_paper(answers, t.answers)
                if v.reflect == "paper"
                else reflection_code(answers, t.answers)
            )
            total = f1 + a_t * (v.w_t * th.value + v.w_s * s.value + v.w_r * refl)
            out.append(
                RewardBreakdown(
                    total=total,
                    components={
                        "f1": f1,
                        "outcome": f1,
                        "sufficiency": s.value,
                        "thinking": th.value,
                        "reflection": refl,
                        "a_t": a_t,
                        "n_answers": float(len(answers)),
                        "judge_unparsed": float(s.unparsed) + float(th.unparsed),
                        "judge_error": float(s.error) + float(th.error),
                    },
                )
            )
        return out

    def _judge(
        self, trajectories: list[Trajectory], v: Variant, ctx: RewardContext
    ) -> tuple[list[JudgeScore], list[JudgeScore]]:
        from harness.api import RewardJudge
        from methods.tiresrag_r1.judge import TIRESRAG_R1_SUFFICIENCY, TIRESRAG_R1_THINKING

        responses = [t.response for t in trajectories]
        results = []
        for prompt, parse in (
            (TIRESRAG_R1_SUFFICIENCY, parse_sufficiency),
            (TIRESRAG_R1_THINKING, parse_thinking),
        ):
            # the parse scores an unparsed reply 0 and counts it; a failed request scores 0, an error
            judge = RewardJudge(
                prompt, partial(parse, mode=v.judge_parse), v.judge_max_tokens, JUDGE_SAMPLING
            )
            failed = JudgeScore(0.0, False, True)
            replies = judge.ask(ctx, self.name, trajectories, responses)
            results.append([failed if r.value is None else r.value for r in replies])
        return results[0], results[1]

    def advantage_adjust(
        self, rewards: Sequence[RewardBreakdown], group: torch.Tensor, *, name: str
    ) -> SeqAdjust | None:
        """The hook ``A' = (A - P)·W`` for ``harness.rl.advantages`` (paper Algorithm 1), from the
        batch's reward
        components in trainer order and the group id of each trajectory; None when the variant has
        neither penalty nor difficulty weight."""
        import torch

        v = self.variant(name)
        if v.penalty == "none" and not v.difficulty:
            return None
        b = len(rewards)
        dev = group.device  # the trainer's device: every tensor here meets the advantages there
        pen = torch.zeros(b, dtype=torch.float64, device=dev)
        weight = torch.ones(b, dtype=torch.float64, device=dev)
        comp = {
            k: torch.tensor([r.components[k] for r in rewards], dtype=torch.float64, device=dev)
            for k in ("f1", "thinking", "sufficiency", "a_t")
        }
        for g in torch.unique(group):
            idx = (group == g).nonzero().squeeze(-1)
            if v.penalty != "none":
                a_t = float(comp["a_t"][idx[0]])
                pen[idx] = consistency_penalty(
                    comp["f1"][idx],
                    comp["thinking"][idx],
                    comp["sufficiency"][idx],
                    a_t,
                    mode=v.penalty,
                    w_t=v.w_t,
                    w_s=v.w_s,
                )
            if v.difficulty:
                weight[idx] = difficulty_weight(float(comp["sufficiency"][idx].mean()))

        def adjust(adv: torch.Tensor) -> torch.Tensor:
            return (adv.to(torch.float64) - pen) * weight

        return adjust
