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

Reward (paper §4.3, Eqs. 1-5): answer F1 + a_t·(w_t·thinking + w_s·sufficiency + w_r·reflection), the
thinking and
sufficiency scores from an LLM judge (``ctx.model("judge", ...)``; the paper's Qwen3-8B) with the
paper's prompts (reused verbatim from ``harness.judge.prompts``); a_t anneals the auxiliary
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
from typing import Any, Literal

import torch

from harness.data.benches import Selection
from harness.errors import ConfigError
from harness.llm.base import BackendSpec
from harness.method import MethodSpec, RewardBreakdown, RewardContext, RunContext, TrainableMethod
from harness.metrics.normalize import normalize_answer_r1searcher
from harness.protocol import Decoding, Protocol, mini
from harness.rl.advantages import SeqAdjust
from harness.rl.config import DynamicSamplingConfig, GroupFilterConfig, grpo
from harness.rl.recipe import Recipe, RewardStage
from harness.rollout.dialect import TagDialect
from harness.rollout.extract import extract_tagged
from harness.rollout.segments import SegmentLoopConfig, run_segment_rollouts, stopped_at
from harness.types import Completion, Hit, QAExample, SamplingParams, Trajectory

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
TOP_K = 5  # Paper §5 / Code (train): top-5 (the released eval hard-codes 7; ours: 5)
MAX_SEGMENT_TOKENS = 512  # Code: 512 new tokens per segment
MAX_RETRIEVALS = 8  # Code: 9 segments, at most 8 retrievals
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


def make_prompt(question: str) -> list[dict[str, str]]:
    """Instruct layout (Code prompts_dataset.py): Fig. 9 as system message, the raw question as user message;
    ``solve`` appends the ``<think>`` pre-fill after the chat template's generation prompt."""
    return [{"role": "system", "content": SYSTEM_INSTRUCT}, {"role": "user", "content": question}]


def base_prompt(question: str) -> str:
    """Base-model layout (Code prompts_dataset.py; paper Fig. 10): no chat template."""
    return f"{PROMPT_BASE}\n\nQuestion:{question}\n{THINK_PREFILL}"


def eval_protocol() -> Protocol:
    """TIRESRAG-R1's evaluation (ours where paper and released eval differ): the training loop, greedy,
    top-5, 512 tokens per segment, at most 8 retrievals, last answer; on the closed corpus (the
    paper's KILT-2019 + BGE index is not packaged). No observation cap (5 chunks)."""
    return mini().with_(
        name="tiresrag_r1-eval",
        description="TIRESRAG-R1 eval (training loop, greedy, top-5, 512 tokens/segment, <=8 retrievals) on the closed corpus",
        top_k=TOP_K,
        max_turns=MAX_RETRIEVALS,
        max_obs_tokens=8192,
        decoding=Decoding(temperature=0.0, top_p=1.0, max_new_tokens=MAX_SEGMENT_TOKENS).model_dump(),
    )


# -- reward constants (paper §4.3) ---------------------------------------------------------------------

W_T, W_S, W_R = 0.6, 0.3, 0.3  # Paper App. C.1: thinking, sufficiency, reflection weights
A_LO, B_HI, RHO_0, K_W = 0.4, 1.5, 0.75, 10.0  # Paper Eq. 6: difficulty weight
LAMBDA_P = 0.1  # Paper §4.4 / Code: consistency penalty weight
DECAY_AT, DECAY_TEMP = 0.9, 10.0  # Paper Eq. 5: a_t = 1 / (1 + exp((t - 0.9 T) / 10))
Z_EPS = 1e-8  # Code: z-scores with numpy population std + 1e-8 (answer_reflection_reward.py)
F1_LOWER, F1_UPPER = 0.1, 0.9  # Code: --accuracy_lower_bound 0.1 --accuracy_upper_bound 0.9 (§3.9)
REFLECT_OK_F1 = 0.5  # Code: reflection "correct" = F1 > 0.5 or token cover (answer_reflection_reward.py)
# Code (sufficient_thinking_reward.py): Qwen3-8B judge, T 0.6, top-p 0.95, top-k 20, max 4048 tokens,
# thinking on.
JUDGE_MODEL = "Qwen/Qwen3-8B"
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
    from harness.judge.prompts import TIRESRAG_R1_SUFFICIENCY

    p = TIRESRAG_R1_SUFFICIENCY.parser(reply)
    if p.status != "ok" or p.score is None:
        return JudgeScore(0.0, True, False)
    return JudgeScore(p.score, False, False)


def parse_thinking(reply: str, mode: Literal["recommended", "code"]) -> JudgeScore:
    """R^T from a judge reply (paper Eq. 3): ``<think>…</think>`` removed, stripped, ``float``; failure
    -> 0, unparsed. ``recommended`` clips to [0, 1] (ours); ``code`` does not."""
    from harness.judge.parsers import strip_think

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

    def spec(self, protocol: Protocol) -> MethodSpec:
        from harness.judge.prompts import TIRESRAG_R1_SUFFICIENCY, TIRESRAG_R1_THINKING

        return MethodSpec(
            name=self.name,
            prompts={"system": SYSTEM_INSTRUCT, "prefill": THINK_PREFILL, "base": PROMPT_BASE},
            dialect=asdict(TIRESRAG_DIALECT),
            renderer="tiresrag_r1: '({j}){title}\\n{text}\\n', 'None' without documents",
            extractor="last <answer> of the model's own text (first answer kept in meta)",
            params={
                "top_k": protocol.top_k,
                "max_retrievals": protocol.max_turns,
                "max_obs_tokens": protocol.max_obs_tokens,
                "max_new_tokens_per_segment": protocol.decoding.max_new_tokens,
                "stops": list(STOPS),
                "empty_query": "ends the trajectory",
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
        return SegmentLoopConfig(
            dialect=TIRESRAG_DIALECT,
            stops=STOPS,
            max_new_tokens=protocol.decoding.max_new_tokens,
            max_searches=protocol.max_turns,
            top_k=protocol.top_k,
            max_obs_tokens=protocol.max_obs_tokens,
            query_of=search_query,
            observe=render_docs,
            extractor=lambda text: extract_tagged(text, "<answer>", "</answer>"),
            empty_query="end",
        )

    def solve(self, examples: list[QAExample], ctx: RunContext) -> list[Trajectory]:
        prompts = [ctx.backend.chat_prompt(make_prompt(e.question)) + THINK_PREFILL for e in examples]
        trajs = run_segment_rollouts(prompts, examples, ctx, self.rollout_config(ctx.protocol))
        for t in trajs:
            answers = all_answers(t.model_text)
            t.meta["n_answers"] = len(answers)
            t.meta["first_answer"] = answers[0] if answers else None  # the released eval's prediction
        return trajs

    # -- training ---------------------------------------------------------------------------------

    def prompt_messages(self, example: QAExample, *, training: bool) -> list[dict[str, str]]:
        """The instruct layout with the assistant turn pre-filled with ``<think>`` (as ``solve``)."""
        return [*make_prompt(example.question), {"role": "assistant", "content": THINK_PREFILL}]

    def reward_names(self) -> tuple[str, ...]:
        return tuple(VARIANTS)

    def variant(self, name: str) -> Variant:
        if name == "default":
            name = "recommended"
        if name not in VARIANTS:
            raise ConfigError(
                f"method {self.name!r} has no reward {name!r}; known: default, {', '.join(VARIANTS)}"
            )
        return VARIANTS[name]

    def reward(self, trajectory: Trajectory, *, name: str, ctx: RewardContext) -> RewardBreakdown:
        return self.rewards([trajectory], name=name, ctx=ctx)[0]

    def rewards(
        self, trajectories: list[Trajectory], *, name: str, ctx: RewardContext
    ) -> list[RewardBreakdown]:
        """R^sum (Eq. 5) per trajectory; the judge calls of the batch go out in two ``chat_batch``
        calls (sufficiency, thinking). Components: ``f1`` (the group filter's metric), ``outcome``
        (= f1), ``sufficiency``, ``thinking``, ``reflection``, ``a_t``, ``n_answers``,
        ``judge_unparsed``, ``judge_error``."""
        v = self.variant(name)
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
        from harness.judge.prompts import TIRESRAG_R1_SUFFICIENCY, TIRESRAG_R1_THINKING

        judge = ctx.model("judge", self.name)
        results = []
        for prompt, parse in (
            (TIRESRAG_R1_SUFFICIENCY, parse_sufficiency),
            (TIRESRAG_R1_THINKING, parse_thinking),
        ):
            convs = [prompt.messages(t.question, t.answers, t.response) for t in trajectories]
            outs = judge.chat_batch(convs, max_new_tokens=v.judge_max_tokens, sampling=JUDGE_SAMPLING)
            scores = []
            for c in outs:
                if c.finish_reason == "error":
                    scores.append(JudgeScore(0.0, False, True))
                else:
                    scores.append(parse(c.text, v.judge_parse))
            results.append(scores)
        return results[0], results[1]

    def advantage_adjust(
        self, rewards: Sequence[RewardBreakdown], group: torch.Tensor, *, name: str
    ) -> SeqAdjust | None:
        """The hook ``A' = (A - P)·W`` for ``harness.rl.advantages`` (paper Algorithm 1), from the
        batch's reward
        components in trainer order and the group id of each trajectory; None when the variant has
        neither penalty nor difficulty weight."""
        v = self.variant(name)
        if v.penalty == "none" and not v.difficulty:
            return None
        b = len(rewards)
        pen = torch.zeros(b, dtype=torch.float64)
        weight = torch.ones(b, dtype=torch.float64)
        comp = {
            k: torch.tensor([r.components[k] for r in rewards], dtype=torch.float64)
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

    def recipes(self) -> dict[str, Recipe]:
        judge = BackendSpec(
            kind="openai", model=JUDGE_MODEL, base_urls=("http://127.0.0.1:8000/v1",), server="vllm"
        )
        f1_filter = DynamicSamplingConfig(
            enabled=True,
            max_rounds=10,
            filters=(GroupFilterConfig(kind="threshold", metric="f1", lower=F1_LOWER, upper=F1_UPPER),),
        )
        algo = grpo().replace(
            group_size=5,
            adv_std_unbiased=False,
            adv_eps=1e-8,
            clip_low=0.2,
            clip_high=0.2,
            loss_agg_mode="seq-mean-token-mean",
            kl_placement="none",
            kl_estimator="k3",
            kl_coef=0.0,
            entropy_coef=0.0,
            dynamic_sampling=f1_filter,
            train_batch_size=108,
            mini_batch_size=27,
            ppo_epochs=1,
            lr=2e-6,
            lr_schedule="cosine",
            lr_warmup_steps=None,
            lr_warmup_ratio=0.015,
            min_lr_ratio=0.1,
            adam_betas=(0.9, 0.95),
            weight_decay=0.0,
            grad_clip=1.0,
            temperature=1.0,
            top_p=0.95,
        )
        sources = {
            "algo.adv_estimator": "Paper §4.2 / Code: GRPO (advantage_estimator group_norm)",
            "algo.group_size": "Paper / Code: G = 5 (n_samples_per_prompt 5)",
            "algo.norm_adv_by_std": "Paper Alg. 1: (r - mean) / std",
            "algo.adv_std_unbiased": "Recommend (§8 B5): Alg. 1 population std (Code: unbiased; recipe paper-code)",
            "algo.adv_eps": "Recommend (§8 B5): + 1e-8 (Code: 1e-9)",
            "algo.gamma": "n/a (outcome reward)",
            "algo.clip_low": "Paper / Code: eps_clip 0.2",
            "algo.clip_high": "Code: symmetric clip",
            "algo.dual_clip_c": "Code: OpenRLHF policy loss without dual clip",
            "algo.loss_agg_mode": "Code: per-trajectory token mean over unmasked tokens, then mean (§4.1)",
            "algo.loss_norm_length": "n/a",
            "algo.kl_placement": "Paper / Code: beta = 0, no reference model (§8 B13)",
            "algo.kl_estimator": "Code: k3 computed but multiplied by 0 (unused)",
            "algo.kl_coef": "Paper / Code: init_kl_coef 0",
            "algo.entropy_coef": "Code: no entropy bonus",
            "algo.overlong": "Code: none (truncated trajectories are scored as they are, §2.6)",
            "algo.dynamic_sampling": (
                "Paper §4.4 / Code: drop a group iff max F1 <= 0.1 or min F1 >= 0.9, accumulate until a full "
                "batch (--enable_accuracy_filter, §3.9); ours: a cap of 10 rounds (the code has none)"
            ),
            "algo.train_batch_size": "Paper: total batch size 108 prompts per rollout step (§8 B1; Code: 112)",
            "algo.mini_batch_size": (
                "ours: Code/§8 B1 say 108 trajectories per optimizer step (21.6 groups); AlgoConfig counts "
                "prompts and must divide 108: 27 prompts = 135 trajectories, 4 updates per step"
            ),
            "algo.ppo_epochs": "Code: max_epochs 1 (μ = 2 is read as 2 episodes, §8 B3)",
            "algo.lr": "Paper / Code: 2e-6",
            "algo.lr_schedule": "Code: cosine_with_min_lr",
            "algo.lr_warmup_steps": "n/a (a ratio is given)",
            "algo.lr_warmup_ratio": "Code: warmup ratio 0.015",
            "algo.min_lr_ratio": "ours: OpenRLHF's cosine_with_min_lr floor of 0.1 x lr (the spec names the schedule only)",
            "algo.adam_betas": "Code: AdamW betas (0.9, 0.95)",
            "algo.weight_decay": "Code: weight decay 0",
            "algo.grad_clip": "Code: max_norm 1.0",
            "algo.temperature": "Paper: 1 / Code: the retrieval rollout hard-codes 1.0 (§8 B2)",
            "algo.top_p": "Code: top_p 0.95 in the retrieval rollout",
            "steps": "Recommend (§8 B3-B4): 2 passes over 8,148 questions at 108 per step = 152 rollout steps (= T of a_t)",
            "bench": "Paper §4.3: R1-Searcher's training set, 4,561 HotpotQA + 3,587 2Wiki (not packaged)",
            "selection": "Code: all, shuffled",
            "max_new_tokens": "Code: 512 new tokens per segment",
            "max_turns": "Code: 9 segments, at most 8 retrievals",
            "top_k": "Paper §5 / Code: top-5",
            "max_obs_tokens": "Code: no observation cap (5 chunks of 100 words never reach it)",
            "micro_batch_size": "Code: micro_train_batch_size 4",
            "reward_stages": "Paper Eq. 5 from step 0 (a_t does the annealing); the spec's recommended variant",
            "aux_models": (
                "Paper Limitations / Code: Qwen3-8B judge on vLLM (thinking on, T 0.6, top-p 0.95, top-k 20); "
                "ours: the URL is a placeholder, set it with --recipe-override aux_models.judge.base_urls=..."
            ),
            "lora": "Paper / Code: full-parameter training",
            "dtype": "ours: float32 master weights (Code: bf16)",
            "seed": "Code: seed 42",
            "save_every": "Code: save_steps 20",
        }
        paper = Recipe(
            name="paper",
            method=self.name,
            algo=algo,
            steps=152,
            bench="r1searcher-train",
            selection=Selection(),
            max_new_tokens=MAX_SEGMENT_TOKENS,
            max_turns=MAX_RETRIEVALS,
            top_k=TOP_K,
            max_obs_tokens=8192,
            micro_batch_size=4,
            reward_stages=(RewardStage(start_step=0, reward="recommended"),),
            aux_models={"judge": judge},
            lora=None,
            dtype="float32",
            seed=42,
            save_every=20,
            sources=sources,
        )

        def variant(name: str, reward: str, why: str, **updates: Any) -> Recipe:
            srcs = {**sources, "reward_stages": why, **updates.pop("sources", {})}
            return paper.model_copy(
                update={
                    "name": name,
                    "reward_stages": (RewardStage(start_step=0, reward=reward),),
                    "sources": srcs,
                    **updates,
                }
            )

        code_algo = algo.replace(
            adv_std_unbiased=True, adv_eps=1e-9, train_batch_size=112, mini_batch_size=28
        )
        out = {
            "paper": paper,
            "paper-formulas": variant(
                "paper-formulas", "paper", "Paper Eqs. 4-7 literally (unscaled penalty, §3.8)"
            ),
            "paper-code": variant(
                "paper-code",
                "code",
                "Code: the released reward (reflection in {-1, 0}, scaled penalty, whole-response F1 without an answer)",
                algo=code_algo,
                steps=146,
                sources={
                    "algo.adv_std_unbiased": "Code: torch unbiased std",
                    "algo.adv_eps": "Code: + 1e-9",
                    "algo.train_batch_size": "Code: rollout_batch_size 112",
                    "algo.mini_batch_size": "ours: Code trains on 112 trajectories per update; 28 prompts = 140, 4 updates",
                    "steps": "Code: T = ceil(8148/112) x 2 = 146",
                },
            ),
        }
        for reward, label in (
            ("no_difficulty", "w/o Difficulty"),
            ("no_penalty", "w/o Penalty"),
            ("no_reflect", "w/o Reflect"),
            ("no_sufficiency", "w/o Sufficient"),
            ("no_thinking", "w/o Thinking"),
        ):
            name = "paper-" + reward.replace("_", "-")
            out[name] = variant(name, reward, f"Paper Table 7 ablation '{label}'")
        out["paper-no-filter"] = variant(
            "paper-no-filter",
            "recommended",
            "Paper Table 7 ablation 'w/o Filter': the full reward",
            algo=algo.replace(
                dynamic_sampling=DynamicSamplingConfig(enabled=False, max_rounds=None, filters=())
            ),
            sources={"algo.dynamic_sampling": "Paper Table 7 'w/o Filter': no group filter"},
        )
        out["naive-grpo"] = variant(
            "naive-grpo",
            "f1_only",
            "Paper Table 7 'Naive GRPO' (§8 B15): answer F1 only, no filter, no weighting or penalty",
            algo=algo.replace(
                dynamic_sampling=DynamicSamplingConfig(enabled=False, max_rounds=None, filters=())
            ),
            aux_models={},
            sources={"algo.dynamic_sampling": "§8 B15: no filter", "aux_models": "none: no judge"},
        )
        out["paper-reinforce-pp"] = variant(
            "paper-reinforce-pp",
            "no_difficulty",
            "Paper §5.2 / Code (§4.5): same reward; the code computes no difficulty weight for Reinforce++",
            algo=algo.replace(adv_estimator="reinforce_pp_baseline", norm_adv_by_std=False),
            sources={
                "algo.adv_estimator": "Paper App. D / Code: reinforce_baseline (group-mean baseline, batch whitening)",
                "algo.norm_adv_by_std": "Code: no group std for Reinforce++",
            },
        )
        smoke_algo = algo.replace(
            group_size=4,
            train_batch_size=2,
            mini_batch_size=2,
            lr=1e-5,
            lr_warmup_ratio=0.0,
            dynamic_sampling=DynamicSamplingConfig(enabled=False, max_rounds=None, filters=()),
        )
        out["cpu-smoke"] = paper.model_copy(
            update={
                "name": "cpu-smoke",
                "algo": smoke_algo,
                "steps": 3,
                "bench": "mini-multihop",
                "selection": Selection(mode="first", n=8),
                "max_new_tokens": 48,
                "max_turns": 1,
                "top_k": 3,
                "max_obs_tokens": 128,
                "reward_stages": (RewardStage(start_step=0, reward="smoke"),),
                "aux_models": {"judge": BackendSpec(kind="transformers", model="default")},
                "seed": 0,
                "save_every": 0,
                "sources": {
                    **sources,
                    "algo.group_size": "ours: smallest group with a spread of rewards (CPU)",
                    "algo.train_batch_size": "ours: 2 prompts per step (CPU)",
                    "algo.mini_batch_size": "ours: one update per step",
                    "algo.lr": "ours: 1e-5 so that three steps move the weights",
                    "algo.lr_warmup_ratio": "ours: no warm-up in a 3-step run",
                    "algo.dynamic_sampling": (
                        "ours: off; an untrained 135M policy almost never reaches F1 > 0.1, so the paper's filter "
                        "would drop every group and skip every update (the filter is tested in tests/methods2)"
                    ),
                    "steps": "ours: 3 steps (T of a_t = 3)",
                    "bench": "ours: packaged multi-hop questions whose gold paragraphs are in the closed corpus",
                    "selection": "ours: the first 8 questions of each dataset",
                    "max_new_tokens": "ours: 48 tokens per segment (CPU budget)",
                    "max_turns": "ours: 1 retrieval (CPU budget)",
                    "top_k": "ours: top-3 (CPU budget)",
                    "max_obs_tokens": "ours: 128 tokens per observation (CPU budget)",
                    "reward_stages": "ours: the recommended reward with a 32-token judge budget",
                    "aux_models": "ours: the packaged SmolLM2-135M-Instruct as judge (no server)",
                    "seed": "ours",
                    "save_every": "ours: only the final checkpoint",
                },
            }
        )
        return out

    def reported(self) -> list[Any]:
        from pathlib import Path

        from harness.reported import load_reported

        return load_reported(Path(__file__).with_name("reported.yaml"))
