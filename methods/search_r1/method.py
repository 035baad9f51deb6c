"""Search-R1 (Jin et al., "Search-R1: Training LLMs to Reason and Leverage Search Engines with
Reinforcement Learning", arXiv 2503.09516 v5 / COLM 2025).

Everything paper-specific lives here: the prompt (verbatim), the tag dialect, the document
renderer, the answer extractor, the reward, the training recipes and the published numbers.
Sources: the paper, and the released code (PeterGriffinJin/Search-R1@a14dc3a: ``scripts/data_process/
nq_search.py`` for the prompt, ``search_r1/llm_agent/generation.py`` for the rollout,
``verl/utils/reward_score/qa_em.py`` for the reward, ``train_grpo.sh`` and
``verl/trainer/config/ppo_trainer.yaml`` for the hyperparameters; paper App. B.2).

Eval-RAR and R-Search are built on this code base (the same verl fork); they share its
observation function (:func:`harness.rollout.render.stripped_observations`) and use its document
renderer by name (``"search_r1"``). The training recipes are data: ``recipes.yaml`` beside this
module (read by :func:`harness.rl.recipe_files.method_recipes`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict

from harness.api import (
    RENDERERS,
    MethodSpec,
    Protocol,
    QAExample,
    RewardBreakdown,
    RewardContext,
    TagRolloutConfig,
    TrainableMethod,
    Trajectory,
    extract_tagged,
    format_question,
    reward_fn,
    stripped_observations,
)
from methods.search_r1.render import SEARCH_R1_DIALECT

# The "base" template of nq_search.py, used for base and instruct models alike; verbatim,
# including the original "as your want" (nq_search.py line 35 at a14dc3a).
PROMPT = (
    "Answer the given question. You must conduct reasoning inside <think> and </think> first every time you "
    "get new information. After reasoning, if you find you lack some knowledge, you can call a search engine "
    "by <search> query </search> and it will return the top searched results between <information> and "
    "</information>. You can search as many times as your want. If you find no further external knowledge "
    "needed, you can directly provide the answer inside <answer> and </answer>, without detailed "
    "illustrations. For example, <answer> Beijing </answer>. Question: {question}\n"
)
RENDERER = "search_r1"  # Doc {i}(Title: "...") text   (generation.py _passages2string)
TOP_K = 3  # paper §4 / Table 2: top-3 passages
MAX_TURNS = 4  # paper scripts v0.2/v0.3 and evaluate.sh: max_turns=4
MAX_OBS_TOKENS = 500  # max_obs_length=500
PAPER = "search_r1"  # the ``paper`` key of the reported rows


def make_prompt(question: str) -> list[dict[str, str]]:
    """The chat messages of one Search-R1 prompt (a single user turn, as the parquet ``prompt`` field)."""
    return [{"role": "user", "content": PROMPT.format(question=format_question(question))}]


def em_reward(trajectory: Trajectory) -> float:
    """Outcome reward: exact match of the **last** ``<answer>`` in the model's own response
    (``qa_em.compute_score_em``; we read the response only, so the prompt's example answer can
    never count, which is what the original's "at least two matches" rule was working around).
    No answer -> 0."""
    from harness.api import exact_match

    pred = extract_tagged(trajectory.model_text, "<answer>", "</answer>").prediction
    if not pred:
        return 0.0
    return exact_match(pred, trajectory.answers)


# -- the format-aware reward of the released code (scripts/nq_hotpotqa/v0.3/train_*_format.sh) ----

# verl/utils/reward_score/qa_em_format.py with the values train_grpo_format.sh passes
# (reward_model.structure_format_score=0.2, final_format_score=0.1, retrieval_score=0).
STRUCTURE_FORMAT_SCORE = 0.2
FINAL_FORMAT_SCORE = 0.1
RETRIEVAL_SCORE = 0.0
_FORMAT_TAGS = ("think", "search", "information", "answer")
_TAG_RE = re.compile(r"(</?(?:think|search|information|answer)>)")
# (state, tag) -> next state: think first, then any number of search -> information -> think
# rounds, and one answer right after a think block (is_valid_sequence's state machine).
_FORMAT_MOVES = {
    ("start", "<think>"): "in_think",
    ("information", "<think>"): "in_think",
    ("in_think", "</think>"): "after_think",
    ("after_think", "<search>"): "in_search",
    ("in_search", "</search>"): "after_search",
    ("after_search", "<information>"): "in_information",
    ("in_information", "</information>"): "information",
    ("after_think", "<answer>"): "in_answer",
    ("in_answer", "</answer>"): "end",
}
_INSIDE = {"in_think", "in_search", "in_information", "in_answer"}


def valid_format(response: str) -> bool:
    """Search-R1's ``is_valid_sequence`` on the whole response (model text and observations, as
    decoded after the assistant marker): every tag balanced; ``<think>`` first; then any number of
    ``<search>`` -> ``<information>`` -> ``<think>`` rounds; then one ``<answer>``; nothing but
    whitespace outside the tags; nothing after ``</answer>``."""
    for tag in _FORMAT_TAGS:
        if response.count(f"<{tag}>") != response.count(f"</{tag}>"):
            return False
    state = "start"
    for part in _TAG_RE.split(response):
        if not part.strip():
            continue
        if _TAG_RE.fullmatch(part):
            nxt = _FORMAT_MOVES.get((state, part))
            if nxt is None:
                return False
            state = nxt
        elif state not in _INSIDE:
            return False  # text between tags, or after the answer
    return state == "end"


def retrieval_correct(response: str, answers: Sequence[str]) -> bool:
    """Some gold answer occurs (normalised substring) in some ``<information>`` block."""
    from harness.api import normalize_answer

    blocks = [
        normalize_answer(b) for b in re.findall(r"<information>(.*?)</information>", response, re.DOTALL)
    ]
    golds = [normalize_answer(a) for a in answers]
    return any(g in b for b in blocks for g in golds)


def _format_total(trajectory: Trajectory, em: float, valid: bool, answered: bool) -> float:
    """``qa_em_format.compute_score_em``'s branches, shared by :func:`format_reward` and
    :func:`format_reward_upstream` (they differ only in how the answer is read): a correct answer
    scores 1 (less the structure score when the format is invalid); otherwise a valid format scores
    the structure score (plus the retrieval score when a gold answer was retrieved), an invalid one
    the final-format score if it answered, else 0."""
    if em:
        return 1.0 if valid else 1.0 - STRUCTURE_FORMAT_SCORE
    if valid:
        total = STRUCTURE_FORMAT_SCORE
        if RETRIEVAL_SCORE and retrieval_correct(trajectory.response, trajectory.answers):
            total += RETRIEVAL_SCORE
        return total
    return FINAL_FORMAT_SCORE if answered else 0.0


def format_reward(trajectory: Trajectory) -> tuple[float, dict[str, float]]:
    """``qa_em_format.compute_score_em`` with the v0.3 format scripts' values: EM with a valid
    format 1; EM with an invalid format 1 - 0.2; a wrong or missing answer with a valid format 0.2
    (+ ``retrieval_score`` when an observation holds the answer; 0 in those scripts); a wrong answer
    with an invalid format 0.1; no answer and an invalid format 0.

    The format is checked on the full response (observations and correction messages included, as
    the original decodes them). The answer is read from the model's own text, like :func:`em_reward`.
    The original (``qa_em_format.extract_solution``, lines 124-136 at a14dc3a) reads the last
    ``<answer>`` of prompt + response (``main_ppo_format.py`` lines 69-73 decode both) and only when
    there are at least two matches; the prompt itself supplies two, its "inside <answer> and
    </answer>" and its example "<answer> Beijing </answer>", so a trajectory without an answer is
    scored on "Beijing": 0.1 (invalid format, wrong answer), 0.8 when a gold answer is "Beijing".
    We give it 0; upstream's rule is the reward ``em_format_upstream`` (:func:`format_reward_upstream`)."""
    from harness.api import exact_match

    valid = valid_format(trajectory.response)
    ex = extract_tagged(trajectory.model_text, "<answer>", "</answer>")
    answered = ex.status in ("ok", "multiple_answers", "empty_answer")  # a complete span, even blank
    em = exact_match(ex.prediction, trajectory.answers) if ex.prediction else 0.0
    return _format_total(trajectory, em, valid, answered), {
        "outcome": em,
        "valid_format": float(valid),
        "answered": float(answered),
    }


def format_reward_upstream(trajectory: Trajectory) -> tuple[float, dict[str, float]]:
    """:func:`format_reward` with the released answer rule (``qa_em_format.extract_solution`` over
    prompt + response, PeterGriffinJin/Search-R1@a14dc3a ``verl/utils/reward_score/qa_em_format.py``
    lines 124-136, ``verl/trainer/main_ppo_format.py`` lines 69-73): the last ``<answer>`` span of
    the prompt's user text followed by the response, read only when there are at least two. The
    prompt supplies two, so a trajectory without an answer of its own is scored on the example's
    "Beijing" (0.1 with an invalid format). ``answered`` is 1 for every trajectory, as upstream."""
    from harness.api import exact_match

    valid = valid_format(trajectory.response)
    text = PROMPT.format(question=format_question(trajectory.question)) + trajectory.response
    spans = re.findall(r"<answer>(.*?)</answer>", text, re.DOTALL)
    answer = spans[-1].strip() if len(spans) >= 2 else None
    em = exact_match(answer, trajectory.answers) if answer is not None else 0.0
    answered = answer is not None
    return _format_total(trajectory, em, valid, answered), {
        "outcome": em,
        "valid_format": float(valid),
        "answered": float(answered),
    }


class SearchR1(TrainableMethod):
    name = "search_r1"
    description = "think / <search> / <information> / <answer> agent trained with outcome-EM RL"
    source = "Jin et al. 2025, arXiv 2503.09516 v5 (PeterGriffinJin/Search-R1)"

    def spec(self, protocol: Protocol) -> MethodSpec:
        return MethodSpec(
            name=self.name,
            version="2",  # v2: observations stripped as generation.py does
            prompts={"user": PROMPT},
            dialect=asdict(SEARCH_R1_DIALECT),
            renderer=RENDERER,
            extractor="last <answer> of the model's own response",
            params={
                "top_k": protocol.top_k,
                "max_turns": protocol.max_turns,
                "max_obs_tokens": protocol.max_obs_tokens,
                "max_new_tokens": protocol.decoding.max_new_tokens,
                "observation": "rendered documents stripped",
                "final_turn": True,
            },
        )

    def rollout_config(self, protocol: Protocol) -> TagRolloutConfig:
        return TagRolloutConfig.from_protocol(
            protocol,
            SEARCH_R1_DIALECT,
            RENDERERS.get(RENDERER),
            observation_fn=stripped_observations(RENDERER),
        )

    # -- training ---------------------------------------------------------------------------------

    def prompt_messages(self, example: QAExample, *, training: bool) -> list[dict[str, str]]:
        return make_prompt(example.question)

    @reward_fn("em", default=True)
    def reward_em(self, trajectory: Trajectory, ctx: RewardContext) -> RewardBreakdown:
        r = em_reward(trajectory)
        return RewardBreakdown(total=r, components={"outcome": r})

    @reward_fn("f1")
    def reward_f1(self, trajectory: Trajectory, ctx: RewardContext) -> RewardBreakdown:
        """Ours, not the paper's: token F1 of the last ``<answer>`` (partial credit, so a group whose
        rollouts are all EM-wrong still has a spread when some overlap the gold); ``em`` is logged
        beside it. No answer -> 0."""
        from harness.api import f1

        pred = extract_tagged(trajectory.model_text, "<answer>", "</answer>").prediction
        score = f1(pred, trajectory.answers) if pred else 0.0
        return RewardBreakdown(total=score, components={"f1": score, "em": em_reward(trajectory)})

    @reward_fn("em_format")
    def reward_em_format(self, trajectory: Trajectory, ctx: RewardContext) -> RewardBreakdown:
        total, parts = format_reward(trajectory)
        return RewardBreakdown(total=total, components=parts)

    @reward_fn("em_format_upstream")
    def reward_em_format_upstream(self, trajectory: Trajectory, ctx: RewardContext) -> RewardBreakdown:
        """``em_format`` as released: a trajectory without an answer earns 0.1 (see
        :func:`format_reward_upstream`)."""
        total, parts = format_reward_upstream(trajectory)
        return RewardBreakdown(total=total, components=parts)
