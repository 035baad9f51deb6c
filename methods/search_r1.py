"""Search-R1 (Jin et al., "Search-R1: Training LLMs to Reason and Leverage Search Engines with
Reinforcement Learning", arXiv 2503.09516 v5 / COLM 2025).

Everything paper-specific lives here: the prompt (verbatim), the tag dialect, the document
renderer, the answer extractor, the reward. Sources: the paper, and the released code
(PeterGriffinJin/Search-R1: ``scripts/data_process/nq_search.py`` for the prompt,
``search_r1/llm_agent/generation.py`` for the rollout, ``verl/utils/reward_score/qa_em.py`` for
the reward), as summarised in anchors.md §1.2, §4.3, §5.2.
"""

from __future__ import annotations

from dataclasses import asdict

from harness.method import Method, MethodSpec, RunContext, format_question
from harness.protocol import Protocol
from harness.rollout.dialect import SEARCH_R1_DIALECT
from harness.rollout.engine import TagRolloutConfig, run_tag_rollouts
from harness.rollout.extract import extract_tagged
from harness.rollout.render import RENDERERS
from harness.types import QAExample, Trajectory

# The "base" template of nq_search.py, used for base and instruct models alike; verbatim,
# including the original "as your want" (anchors.md §4.3).
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


def make_prompt(question: str) -> list[dict[str, str]]:
    """The chat messages of one Search-R1 prompt (a single user turn, as the parquet ``prompt`` field)."""
    return [{"role": "user", "content": PROMPT.format(question=format_question(question))}]


def reward(trajectory: Trajectory) -> float:
    """Outcome reward: exact match of the **last** ``<answer>`` in the model's own response
    (``qa_em.compute_score_em``; we read the response only, so the prompt's example answer can
    never count, which is what the original's "at least two matches" rule was working around).
    No answer -> 0."""
    from harness.metrics.answer import exact_match

    if not trajectory.prediction:
        return 0.0
    return exact_match(trajectory.prediction, trajectory.answers)


class SearchR1(Method):
    name = "search_r1"
    description = "think / <search> / <information> / <answer> agent trained with outcome-EM RL"
    source = "Jin et al. 2025, arXiv 2503.09516 v5 (PeterGriffinJin/Search-R1)"
    trained = True

    def spec(self, protocol: Protocol) -> MethodSpec:
        return MethodSpec(
            name=self.name,
            prompts={"user": PROMPT},
            dialect=asdict(SEARCH_R1_DIALECT),
            renderer=RENDERER,
            extractor="last <answer> of the model's own response",
            params={
                "top_k": protocol.top_k,
                "max_turns": protocol.max_turns,
                "max_obs_tokens": protocol.max_obs_tokens,
                "max_new_tokens": protocol.decoding.max_new_tokens,
            },
        )

    def rollout_config(self, protocol: Protocol) -> TagRolloutConfig:
        return TagRolloutConfig(
            dialect=SEARCH_R1_DIALECT,
            renderer=RENDERERS.get(RENDERER),
            top_k=protocol.top_k,
            max_turns=protocol.max_turns,
            max_obs_tokens=protocol.max_obs_tokens,
            max_new_tokens=protocol.decoding.max_new_tokens,
            extractor=lambda text: extract_tagged(text, "<answer>", "</answer>"),
        )

    def solve(self, examples: list[QAExample], ctx: RunContext) -> list[Trajectory]:
        prompts = [ctx.backend.chat_prompt(make_prompt(e.question)) for e in examples]
        return run_tag_rollouts(prompts, examples, ctx, self.rollout_config(ctx.protocol))
