"""Search-R1 (Jin et al., "Search-R1: Training LLMs to Reason and Leverage Search Engines with
Reinforcement Learning", arXiv 2503.09516 v5 / COLM 2025).

Everything paper-specific lives here: the prompt (verbatim), the tag dialect, the document
renderer, the answer extractor, the reward, the training recipes and the published numbers.
Sources: the paper, and the released code (PeterGriffinJin/Search-R1@a14dc3a: ``scripts/data_process/
nq_search.py`` for the prompt, ``search_r1/llm_agent/generation.py`` for the rollout,
``verl/utils/reward_score/qa_em.py`` for the reward, ``train_grpo.sh`` and
``verl/trainer/config/ppo_trainer.yaml`` for the hyperparameters; paper App. B.2).

Eval-RAR and R-Search are built on this code base (the same verl fork); they reuse the helpers
here: :func:`stripped_observations`, :func:`searchr1_grpo` with
:data:`SEARCH_R1_GRPO_SOURCES`, and :func:`cpu_smoke_recipe`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from harness.data.benches import Selection
from harness.llm.base import BackendSpec
from harness.method import (
    MethodSpec,
    RewardBreakdown,
    RewardContext,
    RunContext,
    TrainableMethod,
    format_question,
)
from harness.protocol import Protocol
from harness.rl.config import AlgoConfig, DynamicSamplingConfig, GroupFilterConfig, grpo
from harness.rl.recipe import LoraConfig, Recipe, RewardStage, SftConfig
from harness.rollout.dialect import SEARCH_R1_DIALECT
from harness.rollout.engine import ObservationFn, TagRolloutConfig, run_tag_rollouts
from harness.rollout.extract import extract_tagged
from harness.rollout.render import RENDERERS
from harness.types import Hit, QAExample, Trajectory

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
MAX_RESPONSE_TOKENS = 500  # max_response_length=500 per turn
PAPER = "search_r1"  # the ``paper`` key of the reported rows


def make_prompt(question: str) -> list[dict[str, str]]:
    """The chat messages of one Search-R1 prompt (a single user turn, as the parquet ``prompt`` field)."""
    return [{"role": "user", "content": PROMPT.format(question=format_question(question))}]


def stripped_observations(renderer: str) -> ObservationFn:
    """Render the hits with ``renderer`` and strip the result, as Search-R1's
    ``execute_predictions`` does before wrapping it (``f"\\n\\n<information>{docs.strip()}</information>\\n\\n"``):
    the last document's trailing newline is not shown. Eval-RAR and R-Search (training) inherit it."""
    render = RENDERERS.get(renderer)

    def observe(
        _states: Sequence[Any], _queries: list[str], hits: list[list[Hit]], _ctx: RunContext
    ) -> list[str]:
        return [render(h).strip() for h in hits]

    return observe


def reward(trajectory: Trajectory) -> float:
    """Outcome reward: exact match of the **last** ``<answer>`` in the model's own response
    (``qa_em.compute_score_em``; we read the response only, so the prompt's example answer can
    never count, which is what the original's "at least two matches" rule was working around).
    No answer -> 0."""
    from harness.metrics.answer import exact_match

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
    from harness.metrics.normalize import normalize_answer

    blocks = [
        normalize_answer(b) for b in re.findall(r"<information>(.*?)</information>", response, re.DOTALL)
    ]
    golds = [normalize_answer(a) for a in answers]
    return any(g in b for b in blocks for g in golds)


def format_reward(trajectory: Trajectory) -> tuple[float, dict[str, float]]:
    """``qa_em_format.compute_score_em`` with the v0.3 format scripts' values: EM with a valid
    format 1; EM with an invalid format 1 - 0.2; a wrong or missing answer with a valid format 0.2
    (+ ``retrieval_score`` when an observation holds the answer; 0 in those scripts); a wrong answer
    with an invalid format 0.1; no answer and an invalid format 0.

    The format is checked on the full response (observations and correction messages included, as
    the original decodes them). The answer is read from the model's own text, like :func:`reward`:
    the original reads the last ``<answer>`` of prompt + response, where the correction message's
    "between <answer> and </answer>" counts as an answer (``"and"``), so every trajectory with an
    invalid action earned 0.1 there. That rewards invalid actions; we do not reproduce it."""
    from harness.metrics.answer import exact_match

    valid = valid_format(trajectory.response)
    ex = extract_tagged(trajectory.model_text, "<answer>", "</answer>")
    answered = ex.status in ("ok", "multiple_answers", "empty_answer")  # a complete span, even blank
    em = exact_match(ex.prediction, trajectory.answers) if ex.prediction else 0.0
    if em:
        total = 1.0 if valid else 1.0 - STRUCTURE_FORMAT_SCORE
    elif valid:
        total = STRUCTURE_FORMAT_SCORE
        if RETRIEVAL_SCORE and retrieval_correct(trajectory.response, trajectory.answers):
            total += RETRIEVAL_SCORE
    else:
        total = FINAL_FORMAT_SCORE if answered else 0.0
    return total, {"outcome": em, "valid_format": float(valid), "answered": float(answered)}


# -- training: the GRPO configuration of the Search-R1 verl fork --------------------------------


def searchr1_grpo(**changes: object) -> AlgoConfig:
    """GRPO as Search-R1's released ``train_grpo.sh`` runs it on its verl fork (every value in
    :data:`SEARCH_R1_GRPO_SOURCES`); ``changes`` override fields (validated)."""
    base = grpo().replace(
        group_size=5,
        kl_placement="loss",
        kl_estimator="low_var_kl",
        kl_coef=0.001,
        loss_agg_mode="token-mean",
        entropy_coef=0.001,
        train_batch_size=512,
        mini_batch_size=64,
        ppo_epochs=1,
        lr=1e-6,
        lr_schedule="constant",
        lr_warmup_steps=None,
        lr_warmup_ratio=0.285,
        min_lr_ratio=0.0,
        temperature=1.0,
        top_p=0.95,
        adam_betas=(0.9, 0.999),
        weight_decay=0.01,
        grad_clip=1.0,
    )
    return base.replace(**changes) if changes else base


SEARCH_R1_GRPO_SOURCES: dict[str, str] = {
    "algo.adv_estimator": "code: train_grpo.sh algorithm.adv_estimator=grpo",
    "algo.group_size": "paper App. B.2 / code: train_grpo.sh rollout.n_agent=5",
    "algo.norm_adv_by_std": "code: verl fork core_algos.compute_grpo_outcome_advantage ((r-mean)/(std+eps))",
    "algo.adv_std_unbiased": "code: same function (torch.std, unbiased)",
    "algo.adv_eps": "code: same function (epsilon=1e-6)",
    "algo.gamma": "code: ppo_trainer.yaml algorithm.gamma=1.0 (not read by grpo)",
    "algo.clip_low": "paper App. B.2 / code: ppo_trainer.yaml actor.clip_ratio=0.2",
    "algo.clip_high": "code: symmetric clip_ratio=0.2",
    "algo.dual_clip_c": "code: the fork's compute_policy_loss has no dual clip",
    "algo.loss_agg_mode": "code: the fork's compute_policy_loss takes masked_mean over all response tokens",
    "algo.loss_norm_length": "n/a (token-mean)",
    "algo.kl_placement": "code: train_grpo.sh actor.use_kl_loss=true",
    "algo.kl_estimator": "code: train_grpo.sh actor.kl_loss_type=low_var_kl",
    "algo.kl_coef": "paper App. B.2 (beta 0.001) / code: actor.kl_loss_coef=0.001",
    "algo.entropy_coef": "code: ppo_trainer.yaml actor.entropy_coeff=0.001 (not overridden)",
    "algo.overlong": "code: none in the fork",
    "algo.dynamic_sampling": "code: none in the fork",
    "algo.train_batch_size": "paper App. B.2 / code: data.train_batch_size=512",
    "algo.mini_batch_size": (
        "ours: code ppo_mini_batch_size=256 counts trajectories (51.2 groups of 5; 10 updates per step); "
        "AlgoConfig counts prompts and must divide 512, so 64 prompts = 320 trajectories, 8 updates per step"
    ),
    "algo.ppo_epochs": "code: ppo_trainer.yaml actor.ppo_epochs=1",
    "algo.lr": "paper App. B.2 / code: actor.optim.lr=1e-6",
    "algo.lr_schedule": "code: ppo_trainer.yaml optim.warmup_style=constant",
    "algo.lr_warmup_steps": "n/a (a warm-up ratio is given)",
    "algo.lr_warmup_ratio": "paper App. B.2 / code: actor.optim.lr_warmup_steps_ratio=0.285",
    "algo.min_lr_ratio": "n/a (constant schedule)",
    "algo.adam_betas": "code: verl fork AdamW defaults (0.9, 0.999)",
    "algo.weight_decay": "code: verl fork AdamW weight_decay default 1e-2",
    "algo.grad_clip": "code: ppo_trainer.yaml actor.grad_clip=1.0",
    "algo.temperature": "paper App. B.2 / code: train_grpo.sh rollout.temperature=1",
    "algo.top_p": "code: ppo_trainer.yaml rollout.top_p=0.95 (passed to vLLM SamplingParams)",
}

# The training data of every paper here: NQ + HotpotQA train (Search-R1, Eval-RAR) or 2Wiki train
# (R-Search). These benches are not packaged (only dev/test questions are); they need the real
# train splits via --data-dir and a bench of train entries.
SEARCH_R1_TRAIN_BENCH = "searchr1-train"


def cpu_smoke_recipe(
    method: str,
    *,
    reward: str,
    max_turns: int,
    aux_models: dict[str, BackendSpec] | None = None,
    extra_sources: dict[str, str] | None = None,
) -> Recipe:
    """A few GRPO steps of ``method`` on the packaged model and the mini-multihop questions, small
    enough to finish in minutes on a laptop CPU (a smoke test of the whole training path, not a
    reproduction)."""
    algo = searchr1_grpo(
        group_size=4,
        train_batch_size=2,
        mini_batch_size=2,
        lr=1e-5,
        lr_warmup_steps=0,
        lr_warmup_ratio=None,
        top_p=1.0,
    )
    sources = {
        **SEARCH_R1_GRPO_SOURCES,
        "algo.group_size": "ours: smallest group that still has a spread of rewards",
        "algo.train_batch_size": "ours: 2 prompts per step keeps a step under a minute on CPU",
        "algo.mini_batch_size": "ours: one update per step",
        "algo.lr": "ours: 1e-5 so that three steps move the weights visibly",
        "algo.lr_warmup_steps": "ours: no warm-up in a 3-step run",
        "algo.lr_warmup_ratio": "ours: null (warm-up given in steps)",
        "algo.top_p": "ours: plain sampling",
        "steps": "ours: 3 steps",
        "bench": "ours: packaged multi-hop questions whose gold paragraphs are in the closed corpus",
        "selection": "ours: the first 8 questions of each dataset",
        "max_new_tokens": "ours: 48 tokens per turn (CPU budget)",
        "max_turns": "ours: CPU budget",
        "top_k": "paper: top-3",
        "max_obs_tokens": "ours: 128 tokens per observation (CPU budget)",
        "micro_batch_size": "ours: 4 trajectories per forward/backward",
        "reward_stages": "the method's default reward from step 0",
        "aux_models": "none" if not aux_models else "ours: the packaged model",
        "lora": "ours: full fine-tuning of the 135M model",
        "dtype": "ours: float32 on CPU",
        "seed": "ours",
        "save_every": "ours: only the final checkpoint",
        **(extra_sources or {}),
    }
    return Recipe(
        name="cpu-smoke",
        method=method,
        algo=algo,
        steps=3,
        bench="mini-multihop",
        selection=Selection(mode="first", n=8),
        max_new_tokens=48,
        max_turns=max_turns,
        top_k=3,
        max_obs_tokens=128,
        micro_batch_size=4,
        reward_stages=(RewardStage(start_step=0, reward=reward),),
        aux_models=aux_models or {},
        lora=None,
        dtype="float32",
        seed=0,
        save_every=0,
        sources=sources,
    )


def cpu_learn_recipe(method: str) -> Recipe:
    """A CPU run long enough to *learn* something (the slow learning test, README numbers):
    Search-R1's format-aware reward (``em_format``, the released v0.3 ``train_grpo_format.sh``)
    on PopQA questions whose gold paragraphs are in the closed corpus.

    The untrained 135M model closes an ``<answer>`` span in about 3% of its rollouts, so outcome
    EM alone gives GRPO no signal; the format terms do (an answer span is worth 0.1, a valid format
    0.2). With so few rewarded rollouts most groups are all zeros, so DAPO's dynamic sampling keeps
    only groups with a spread of rewards (up to 4 rounds of 2 questions) and the update is spent on
    them; learning is read from ``sampled/*`` (every rollout generated, kept or not).

    Measured (README): the reward rises from 0.011 to 0.099 in 16 steps because the policy learns
    to copy the correction message's ``<answer> and </answer>`` span, which the 0.1 final-format
    score pays: a reward hack of the format term, EM stays 0. It shows the trainer learns; it is
    not a recipe for a useful model."""
    base = cpu_smoke_recipe(method, reward="em_format", max_turns=1)
    algo = base.algo.replace(
        group_size=8,
        train_batch_size=2,
        mini_batch_size=2,
        lr=5e-5,
        kl_placement="none",
        kl_coef=0.0,
        dynamic_sampling=DynamicSamplingConfig(
            enabled=True,
            max_rounds=4,
            filters=(GroupFilterConfig(kind="zero_variance", metric="total", lower=None, upper=None),),
        ),
    )
    return base.model_copy(
        update={
            "name": "cpu-learn",
            "algo": algo,
            "steps": 16,
            "bench": "mini-singlehop",
            "selection": Selection(),
            "max_new_tokens": 40,
            "micro_batch_size": 8,
            "sources": {
                **base.sources,
                "algo.group_size": "ours: 8 rollouts per question, so a rare success lands in some group",
                "algo.train_batch_size": "ours: 2 groups with a spread of rewards per update",
                "algo.mini_batch_size": "ours: one update per step",
                "algo.lr": "ours: 5e-5, enough for 16 steps to move a 135M model",
                "algo.kl_placement": "ours: no KL (and no reference model forward) on the CPU learning run",
                "algo.kl_coef": "ours: no KL",
                "algo.dynamic_sampling": "DAPO §3.3: drop all-equal groups, up to 4 rounds (ours: cap)",
                "steps": "ours: 16 steps (the slow learning test compares the first and last 5; by then every group is all-0.1)",
                "bench": "ours: PopQA questions whose gold paragraphs are in the closed corpus",
                "selection": "ours: all 1,000 questions, shuffled by the trainer",
                "max_new_tokens": "ours: 40 tokens per turn (a PopQA answer is a few words)",
                "micro_batch_size": "ours: 8 trajectories per forward/backward",
                "reward_stages": "code: v0.3 train_grpo_format.sh (qa_em_format: 0.2 structure, 0.1 final format)",
            },
        }
    )


# The supervised warm-up's demonstration turns (ours): think, search the question itself, then read
# the answer off the real retrieved documents; a valid Search-R1 format (is_valid_sequence) by
# construction.
SFT_TURNS = (
    "<think> I need to search for this. </think>\n<search> {question} </search>",
    "<think> The information gives the answer. </think>\n<answer> {answer} </answer>",
)


def cpu_sft_rl_recipe(method: str) -> Recipe:
    """The CPU learning run (``tox -e slow``, tests/rl/test_learning_sft_rl.py): ``harness sft``
    (supervised warm-up on demonstrations in Search-R1's own dialect: search the question, answer
    with the gold string the real retrieval shows), then GRPO with DAPO dynamic sampling on outcome
    EM, on the ``train`` part of the packaged ``learning`` split of PopQA-in-the-closed-corpus;
    evaluated on its held-out part. Every choice that is ours is for a 45-minute budget on 2 CPU
    cores; the held-out questions are never trained on.

    Measured (docs/training.md): too small to learn. The warm-up teaches the first turn's template
    (search the question) but not answering from the documents; the one GRPO step finds no
    rewarded rollout and makes no update; held-out EM is 0 untrained, after SFT and after RL."""
    base = cpu_smoke_recipe(method, reward="em", max_turns=1)
    algo = base.algo.replace(
        group_size=4,
        train_batch_size=2,
        mini_batch_size=2,
        lr=1e-4,
        kl_placement="none",
        kl_coef=0.0,
        entropy_coef=0.0,
        dynamic_sampling=DynamicSamplingConfig(
            enabled=True,
            max_rounds=1,
            filters=(GroupFilterConfig(kind="zero_variance", metric="outcome", lower=None, upper=None),),
        ),
    )
    sft = SftConfig(
        turns=SFT_TURNS,
        answer_in_observation=True,
        n_questions=24,
        epochs=2,
        batch_size=4,
        micro_batch_size=4,
        lr=1e-3,
        lr_warmup_steps=2,
        weight_decay=0.01,
        adam_betas=(0.9, 0.999),
        grad_clip=1.0,
    )
    return base.model_copy(
        update={
            "name": "cpu-sft-rl",
            "algo": algo,
            "steps": 1,
            "bench": "mini-singlehop",
            "split": "learning",
            "selection": Selection(),
            "max_new_tokens": 48,
            "max_obs_tokens": 128,
            "micro_batch_size": 4,
            "lora": LoraConfig(
                rank=32,
                alpha=64.0,
                dropout=0.0,
                target_modules=("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"),
                layers=tuple(range(20, 30)),
            ),
            "sft": sft,
            "sources": {
                **base.sources,
                "algo.group_size": "ours: 4 rollouts per question (CPU budget)",
                "algo.train_batch_size": "ours: 2 groups with a spread of EM per update (CPU budget)",
                "algo.mini_batch_size": "ours: one update per step",
                "algo.lr": "ours: 1e-4 for LoRA adapters",
                "algo.kl_placement": "ours: no KL (and no reference forward) on the CPU run",
                "algo.kl_coef": "ours: no KL",
                "algo.entropy_coef": "ours: 0 (the entropy term keeps (B, T, V) activations: memory)",
                "algo.dynamic_sampling": "DAPO §3.3: drop groups whose EM is all equal (ours: 1 round, CPU budget)",
                "steps": "ours: 1 GRPO step after the warm-up (the budget of a shared 2-core machine; a smoke of the RL stage, not a learning curve)",
                "bench": "ours: PopQA questions whose gold paragraphs are in the closed corpus",
                "split": "ours: packaged split 'learning' (scripts/build_learning_split.py): 980 train, 20 held out",
                "selection": "ours: every train question of the split, shuffled by the trainer",
                "max_new_tokens": "ours: 48 tokens per turn (a demonstration turn is ~20)",
                "max_turns": "ours: one search, then the final turn (the demonstrations search once)",
                "max_obs_tokens": "ours: 128 tokens (the question's own paragraph usually ranks first; CPU budget); evaluation keeps the protocol's 500",
                "lora": "ours: rank 32 on every linear of the top 10 of 30 layers (no backward below them; CPU budget); merged into each checkpoint",
                "micro_batch_size": "ours: 4 trajectories per forward/backward",
                "reward_stages": "paper §3.2: outcome EM (after the warm-up the format is learned)",
                "sft": (
                    "ours: a supervised warm-up (the 135M model never answers correctly untrained): "
                    "SFT_TURNS (search the question, answer the gold string), only demonstrations whose "
                    "retrieval holds the answer, 24 train questions, two passes, 4 per step, lr 1e-3 for the "
                    "LoRA adapters after 2 warm-up steps (one pass at 5e-4 left the format unlearned); weight decay 0.01 "
                    "and grad clip 1.0 are verl's defaults"
                ),
            },
        }
    )


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

    def solve(self, examples: list[QAExample], ctx: RunContext) -> list[Trajectory]:
        prompts = [ctx.backend.chat_prompt(make_prompt(e.question)) for e in examples]
        return run_tag_rollouts(prompts, examples, ctx, self.rollout_config(ctx.protocol))

    # -- training ---------------------------------------------------------------------------------

    def prompt_messages(self, example: QAExample, *, training: bool) -> list[dict[str, str]]:
        return make_prompt(example.question)

    def reward_names(self) -> tuple[str, ...]:
        return ("em", "em_format")

    def reward(self, trajectory: Trajectory, *, name: str, ctx: RewardContext) -> RewardBreakdown:
        if name in ("default", "em"):
            r = reward(trajectory)
            return RewardBreakdown(total=r, components={"outcome": r})
        if name == "em_format":
            total, parts = format_reward(trajectory)
            return RewardBreakdown(total=total, components=parts)
        raise _unknown_reward(self, name)

    def recipes(self) -> dict[str, Recipe]:
        paper = Recipe(
            name="paper",
            method=self.name,
            algo=searchr1_grpo(),
            steps=500,
            bench=SEARCH_R1_TRAIN_BENCH,
            selection=Selection(),
            max_new_tokens=MAX_RESPONSE_TOKENS,
            max_turns=MAX_TURNS,
            top_k=TOP_K,
            max_obs_tokens=MAX_OBS_TOKENS,
            micro_batch_size=64,
            reward_stages=(RewardStage(start_step=0, reward="em"),),
            aux_models={},
            lora=None,
            dtype="float32",
            seed=0,
            save_every=100,
            sources={
                **SEARCH_R1_GRPO_SOURCES,
                "steps": "paper App. B.2: 500 steps (the released script runs 1005)",
                "bench": "paper §4: NQ train + HotpotQA train merged (scripts/data_process/qa_search_train_merge.py)",
                "selection": "code: all training questions, shuffled (data.shuffle_train_dataloader=True)",
                "max_new_tokens": "paper App. B.2 / code: data.max_response_length=500",
                "max_turns": "code: scripts/nq_hotpotqa v0.2/v0.3 max_turns=4 (the root train_grpo.sh uses 2)",
                "top_k": "paper §4 / code: retriever.topk=3",
                "max_obs_tokens": "paper App. B.2 / code: data.max_obs_length=500",
                "micro_batch_size": "code: actor.ppo_micro_batch_size=64",
                "reward_stages": "paper §3.2: outcome EM only, no format reward",
                "aux_models": "none: the reward is rule-based",
                "lora": "paper: full-parameter training",
                "dtype": "code: verl FSDP keeps fp32 master weights (bf16 compute)",
                "seed": "ours: not stated",
                "save_every": "code: trainer.save_freq=100",
            },
        )
        return {
            "paper": paper,
            "cpu-smoke": cpu_smoke_recipe(self.name, reward="em", max_turns=1),
            "cpu-learn": cpu_learn_recipe(self.name),
            "cpu-sft-rl": cpu_sft_rl_recipe(self.name),
        }

    def reported(self) -> list[Any]:
        from pathlib import Path

        from harness.reported import load_reported

        return load_reported(Path(__file__).with_name("reported.yaml"))


def _unknown_reward(method: TrainableMethod, name: str) -> Exception:
    from harness.errors import ConfigError

    return ConfigError(
        f"method {method.name!r} has no reward {name!r}; known: default, {', '.join(method.reward_names())}"
    )
