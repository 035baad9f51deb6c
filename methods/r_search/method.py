"""R-Search (Zhao, Wang, Xu, Zha, Liu: "R-Search: Empowering LLM Reasoning with Search via
Multi-Reward Reinforcement Learning"; code QingFei1/R-Search, a veRL + Search-R1 fork). Tags: [P] the
paper, [C] the released code at QingFei1/R-Search@ecba08d, [D] derived by us.

The policy reasons in free text, searches with ``<search>``, reads ``<observation>`` blocks, then
writes one ``<original_evidence>`` block (the relevant retrieved facts) and one ``<answer>``. The
reward is answer F1 + evidence F1 (a frozen reader of another family answers from the evidence
alone) + format rewards (paper §3.2.2, Eqs. 3-6).

Training and evaluation differ in the released code (``src/train/`` vs ``src/eval/main.py``): the
system template wording, the question preprocessing, top-k (3 vs 5), sampling (T 1.0 / top-p 0.95 vs T 0.1 /
top-p 0.9), tokens per generation (500 vs 1024), observation cap (1800 vs none) and the search cap
(4 vs none). ``solve`` picks the template and question form from ``ctx.training``; the numeric
settings come from the protocol (``r_search-eval``) or the recipe.

Evaluation under R-Search's own protocol (``r_search-eval``) follows the released evaluation loop
(:func:`authors_evaluation`): a turn that neither searches nor answers is the final turn (the
loop hook :class:`EndOnInvalid`) and a trajectory without an ``<answer>`` is scored on its whole
final turn (status ``final_turn_fallback``, counted as not answered). Under shared protocols R-Search
runs the canonical way (correction message, strict extraction), like every other method.
``r_search-eval`` keeps the training observation wrapper [D]; ``r_search-released`` also uses the
released evaluation wrapper ``\\n\\n{turn.strip()}<observation>{docs}</observation>\\n\\n``
([C] src/eval/main.py:105-110, :139; :class:`ReleasedWrapper`). What still differs from the released
code: ``methods/r_search/README.md``.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, replace

from harness.api import (
    DEFAULT_INVALID_MESSAGE,
    RENDERERS,
    ConfigError,
    MethodSpec,
    Protocol,
    QAExample,
    RewardBreakdown,
    RewardContext,
    RolloutConfig,
    RolloutState,
    RunContext,
    SamplingParams,
    TagDialect,
    TagRolloutConfig,
    TrainableMethod,
    Trajectory,
    TurnPolicy,
    f1_squad,
    format_question,
    reward_fn,
    run_tag_rollouts,
    stripped_observations,
)
from methods.r_search.protocol import EVAL_PROTOCOL_NAME, RELEASED_PROTOCOL_NAME
from methods.r_search.protocol import eval_protocol as eval_protocol  # re-exported
from methods.r_search.protocol import released_protocol as released_protocol  # re-exported

# -- prompts (paper Table 1 and [C], verbatim) -------------------------------------------------

_INTRO = (
    "You are a helpful assistant that can solve the given question step by step. For each step, start by "
    "explaining your thought process. If additional information is needed, provide a specific query enclosed "
    "in <search> and </search>. The system will return the top search results within <observation> and "
    "</observation>. You can perform multiple searches as needed."
)
_EVIDENCE = (
    "When you know the final answer, use <original_evidence> and </original_evidence> to provide all "
    "potentially relevant original information from the observations. Ensure the information is complete and "
    "preserves the original wording without modification. If no searches were conducted or observations were "
    "made, {skip}. Finally, provide the final answer within <answer> and </answer> tags."
)
# Paper Table 1 [P] (one paragraph).
SYSTEM_PAPER = _INTRO + " " + _EVIDENCE.format(skip="omit the evidence section")
# Training [C] scripts/pre_train_data.sh: the paper text with a newline after "...as needed.".
SYSTEM_TRAIN = _INTRO + "\n" + _EVIDENCE.format(skip="omit the evidence section")
# Evaluation [C] src/eval/config.yaml prompt.R-Search: "omit the evidence section" -> "you can skip the summary step".
SYSTEM_EVAL = _INTRO + "\n" + _EVIDENCE.format(skip="you can skip the summary step")

# Evidence (reader) template, the exact string used in training [C] scripts/evidence.yaml (paper App. B.2).
READER_PROMPT = (
    "Answer the question based on the given passages. Only give me the answer and do not output any other "
    "words.\n\nThe following are given passages:\n{evidence}\n\nQuestion: {query}\nAnswer:"
)

# -- protocol ----------------------------------------------------------------------------------

EVIDENCE_OPEN, EVIDENCE_CLOSE = "<original_evidence>", "</original_evidence>"
# Observation wrapper of training [C] generation.py: "\n\n<observation>{docs.strip()}</observation>\n\n";
# the invalid-action message is Search-R1's, unchanged ([C] src/train/generation.py).
R_SEARCH_DIALECT = TagDialect(
    name="r_search",
    obs_prefix="\n\n<observation>",
    obs_suffix="</observation>\n\n",
    invalid_message=DEFAULT_INVALID_MESSAGE,
)
# The released evaluation's wrapper [C] src/eval/main.py:139 '\n\n{output_text}<observation>{search_results}
# </observation>\n\n': the documents as rendered (not stripped), no newline before <observation>; the
# "\n\n" before the stripped turn is put in by ReleasedWrapper.
R_SEARCH_RELEASED_DIALECT = replace(R_SEARCH_DIALECT, obs_prefix="<observation>")
RENDERER = "r_search"  # "(Title: {title}) {text}\n", no rank numbers ([C] src/eval/main.py)

# -- reward constants (paper §3.2.2) -----------------------------------------------------------

GAMMA_E = 0.2  # [P] format reward for a well-formed evidence box
GAMMA_A = 0.2  # [P] format reward for a well-formed answer box
READER_SAMPLING = SamplingParams(temperature=0.1, top_p=0.9)  # [C] chat.completions temperature/top_p
READER_MAX_TOKENS = 512  # [C] max_tokens=512
F1_DECIMALS = 2  # [C] the reward F1 is round(score, 2); evaluation F1 is not rounded

_ANSWER_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_EVIDENCE_RE = re.compile(re.escape(EVIDENCE_OPEN) + r"(.*?)" + re.escape(EVIDENCE_CLOSE), re.DOTALL)
_OBSERVATION_RE = re.compile(r"<observation>(.*?)</observation>", re.DOTALL)


def make_prompt(question: str, *, training: bool) -> list[dict[str, str]]:
    """System template + the question as the user message ([C] src/pre_data/2wikimultihopqa.py,
    src/eval/main.py). Training: the training
    template and the question as stored; evaluation: the evaluation template and the question
    stripped with a '?' appended."""
    if training:
        return [{"role": "system", "content": SYSTEM_TRAIN}, {"role": "user", "content": question}]
    return [
        {"role": "system", "content": SYSTEM_EVAL},
        {"role": "user", "content": format_question(question)},
    ]


def f1_reward(pred: str, golds: list[str]) -> float:
    """Answer F1 as the reward computes it [C]: SQuAD normalisation, multiset token overlap, max over
    gold aliases, no yes/no special case, rounded to 2 decimals."""
    return round(f1_squad(pred, golds), F1_DECIMALS)


@dataclass(frozen=True)
class ParsedResponse:
    """What the reward reads from one response (paper Eq. 5's indicators, on the response only [D]).

    ``answer``: content of the last ``<answer>`` box (None if none); ``I_A``/``I_E``/``I_S`` the
    format indicators; ``evidence``: the evidence string sent to the reader (None: no evidence reward).
    """

    answer: str | None
    n_answers: int
    n_evidence: int
    I_S: bool
    I_A: bool
    I_E: bool
    evidence: str | None


def parse_response(generated: str, response: str) -> ParsedResponse:
    """Paper Eq. 5; [C] src/verl/utils/reward_score/qa_f1.py. Answer and evidence boxes are counted
    in the model's own text ``generated``
    (the harness never reads tags out of retrieved documents); retrieval is detected as in the code,
    by an ``<observation>…</observation>`` block anywhere in the full ``response``."""
    answers = _ANSWER_RE.findall(generated)
    boxes = _EVIDENCE_RE.findall(generated)
    searched = len(_OBSERVATION_RE.findall(response)) >= 1
    ans = answers[-1].strip() if answers else None
    i_a = (
        len(answers) == 1 and bool(ans) and ans != "and"
    )  # "and": the code's guard against the prompt's tag mention
    if not boxes:
        evidence, i_e = None, not searched  # no search and no box: well formed; search without box: not
    elif not searched:
        evidence, i_e = None, False  # a box without any search: no evidence reward, no format reward
    else:
        evidence = boxes[-1].strip()  # the last box is scored even when there are several
        i_e = len(boxes) == 1 and evidence != ""
    return ParsedResponse(
        answer=ans,
        n_answers=len(answers),
        n_evidence=len(boxes),
        I_S=searched,
        I_A=i_a,
        I_E=i_e,
        evidence=evidence or None,
    )


def reader_prompt(evidence: str, question: str) -> list[dict[str, str]]:
    """The reader's single user message: the evidence template filled with the evidence and the raw
    question, stripped ([C] src/verl/utils/reward_score/qa_f1.py)."""
    return [{"role": "user", "content": READER_PROMPT.format(evidence=evidence, query=question).strip()}]


def combine(
    parsed: ParsedResponse, golds: list[str], reader_answer: str | None, *, with_evidence: bool = True
) -> RewardBreakdown:
    """r = r_answer + r_evidence + r_format (paper Eq. 6):

    - r_answer = F1(last answer, golds) rounded to 2 decimals, 0 without an answer box (Eq. 3);
    - r_evidence = F1(reader's raw answer, golds) rounded, 0 when no evidence was sent (Eq. 4);
    - r_format = γ_α·I_A + γ_e·I_E (Eq. 5), γ_α = γ_e = 0.2.

    ``with_evidence=False`` is the "w/o Evidence" ablation (paper §5.2; its reward is [D]):
    r = F1(answer) + γ_α·I_A.
    """
    r_ans = f1_reward(parsed.answer, golds) if parsed.answer is not None else 0.0
    r_ev = f1_reward(reader_answer, golds) if (with_evidence and reader_answer) else 0.0
    r_fmt = GAMMA_A * parsed.I_A + (GAMMA_E * parsed.I_E if with_evidence else 0.0)
    return RewardBreakdown(
        total=r_ans + r_ev + r_fmt,
        components={
            "answer": r_ans,
            "evidence": r_ev,
            "format": r_fmt,
            "outcome": r_ans,
            "I_S": float(parsed.I_S),
            "I_A": float(parsed.I_A),
            "I_E": float(parsed.I_E),
        },
    )


def authors_evaluation(ctx: RunContext) -> bool:
    """Evaluation under R-Search's own protocol (``r_search-eval``) follows the released
    ``src/eval/main.py`` [C]: a turn with neither a search nor an answer is
    the final turn, and a trajectory without an ``<answer>`` is scored on its whole final turn.
    Under shared protocols every method is run the canonical way (correction message, strict
    extraction), so rows stay comparable."""
    return not ctx.training and ctx.protocol.name in (EVAL_PROTOCOL_NAME, RELEASED_PROTOCOL_NAME)


@dataclass(frozen=True)
class EndOnInvalid(TurnPolicy):
    """The released evaluation loop's turn rule [C] (QingFei1/R-Search@ecba08d
    ``src/eval/main.py``): a turn with neither a search nor an answer is the final turn; no
    correction message is appended."""

    def correction(self, dialect: TagDialect) -> str | None:
        return None


@dataclass(frozen=True)
class ReleasedWrapper(EndOnInvalid):
    """The released evaluation's context after a search [C] (src/eval/main.py:105-110, :139): the
    turn is put back stripped, after "\\n\\n" (``prompt += "\\n\\n" + output_text.strip() +
    "<observation>" …``). The engine has appended the sampled turn and the observation; this hook
    rewrites that turn's text in the context (evaluation only: there are no token ids to keep).
    The recorded ``generate`` turn keeps the sampled text."""

    def after_observation(self, ctx: RunContext, cfg: RolloutConfig, states: list[RolloutState]) -> None:
        if ctx.training:
            raise ConfigError(
                f"{RELEASED_PROTOCOL_NAME!r} is an evaluation protocol; R-Search trains with its recipe"
            )
        for s in states:
            text, own = s.parts[-2]  # the search turn, then its observation (retrieve_step)
            if not own:
                raise AssertionError(
                    "R-Search released wrapper: the part before an observation is not the model's turn"
                )
            s.parts[-2] = ("\n\n" + text.strip(), True)


def final_turn_fallback(t: Trajectory) -> Trajectory:
    """The released evaluation's answer fallback: no complete ``<answer>`` -> the whole final
    generated turn, stripped. Its status ``final_turn_fallback`` keeps it out of the answered rate
    (a "no-answer" flag) while it is scored."""
    if t.extraction_status in ("ok", "multiple_answers"):
        return t
    last = next((x.text for x in reversed(t.turns) if x.kind == "generate"), "")
    return replace(t, prediction=last.strip(), extraction_status="final_turn_fallback")


class RSearch(TrainableMethod):
    name = "r_search"
    description = "free reasoning + <search>/<observation>, an <original_evidence> box, answer-F1 + evidence-F1 + format rewards"
    source = "Zhao et al. 2025, R-Search (QingFei1/R-Search)"

    def spec(self, protocol: Protocol) -> MethodSpec:
        released = protocol.name == RELEASED_PROTOCOL_NAME
        return MethodSpec(
            name=self.name,
            prompts={"system_train": SYSTEM_TRAIN, "system_eval": SYSTEM_EVAL, "reader": READER_PROMPT},
            dialect=asdict(R_SEARCH_RELEASED_DIALECT if released else R_SEARCH_DIALECT),
            renderer=RENDERER,
            extractor=(
                "last <answer> of the model's own response; under r_search-eval, the whole final turn "
                "when there is none (status final_turn_fallback)"
            ),
            params={
                "top_k": protocol.top_k,
                "max_turns": protocol.max_turns,
                "final_turn": True,
                "max_obs_tokens": protocol.max_obs_tokens,
                "max_new_tokens": protocol.decoding.max_new_tokens,
                "observation": (
                    "released: '\\n\\n' + turn stripped + <observation> + rendered documents"
                    if released
                    else "rendered documents stripped"
                ),
                "question": "training: as stored; evaluation: stripped, '?' appended",
                "gamma_e": GAMMA_E,
                "gamma_a": GAMMA_A,
                "reader_sampling": {
                    "temperature": READER_SAMPLING.temperature,
                    "top_p": READER_SAMPLING.top_p,
                },
                "reader_max_tokens": READER_MAX_TOKENS,
                "f1_decimals": F1_DECIMALS,
            },
        )

    def rollout_config(self, protocol: Protocol) -> TagRolloutConfig:
        if protocol.name == RELEASED_PROTOCOL_NAME:
            renderer = RENDERERS.get(RENDERER)
            return TagRolloutConfig.from_protocol(
                protocol, R_SEARCH_RELEASED_DIALECT, renderer, policy=ReleasedWrapper()
            )
        return TagRolloutConfig.from_protocol(
            protocol,
            R_SEARCH_DIALECT,
            RENDERERS.get(RENDERER),
            observation_fn=stripped_observations(RENDERER),
        )

    def solve(self, examples: list[QAExample], ctx: RunContext) -> list[Trajectory]:
        prompts = [ctx.backend.chat_prompt(make_prompt(e.question, training=ctx.training)) for e in examples]
        cfg = self.rollout_config(ctx.protocol)
        authors_eval = authors_evaluation(ctx)
        if authors_eval and not isinstance(cfg.policy, ReleasedWrapper):
            cfg = replace(cfg, policy=EndOnInvalid())
        trajectories = run_tag_rollouts(prompts, examples, ctx, cfg)
        return [final_turn_fallback(t) for t in trajectories] if authors_eval else trajectories

    # -- training ---------------------------------------------------------------------------------

    def prompt_messages(self, example: QAExample, *, training: bool) -> list[dict[str, str]]:
        return make_prompt(example.question, training=training)

    # r_search: paper Eq. 6; no_evidence: the "w/o Evidence" ablation (paper §5.2) reward [D]
    @reward_fn("r_search", "no_evidence", default=True, batched=True)
    def reward_r_search(
        self, trajectories: list[Trajectory], *, name: str, ctx: RewardContext
    ) -> list[RewardBreakdown]:
        """Every reader call of the batch goes to the ``reader`` model in one ``chat_batch``."""
        with_evidence = name != "no_evidence"
        parsed = [parse_response(t.model_text, t.response) for t in trajectories]
        reader_answers: list[str | None] = [None] * len(trajectories)
        reader_errors = [0.0] * len(trajectories)
        todo = [i for i, p in enumerate(parsed) if with_evidence and p.evidence]
        if todo:
            reader = ctx.model("reader", self.name)
            outs = reader.chat_batch(
                [reader_prompt(parsed[i].evidence, trajectories[i].question) for i in todo],  # type: ignore[arg-type]
                max_new_tokens=READER_MAX_TOKENS,
                sampling=READER_SAMPLING,
            )
            for i, c in zip(todo, outs, strict=True):
                if c.finish_reason == "error":
                    reader_errors[i] = 1.0  # counted in the components; the evidence reward is 0
                else:
                    reader_answers[i] = c.text  # the raw completion is scored ([C] qa_f1.py)
        out = []
        for t, p, a, err in zip(trajectories, parsed, reader_answers, reader_errors, strict=True):
            r = combine(p, list(t.answers), a, with_evidence=with_evidence)
            out.append(RewardBreakdown(total=r.total, components={**r.components, "reader_error": err}))
        return out
