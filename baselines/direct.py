"""Direct answering from parametric knowledge (no retrieval).

Prompt: FlashRAG's naive-generation prompt (``flashrag/prompt/base_prompt.py``, the prompt of the
"Naive Generation" row of the benchmark in FlashRAG@1ee5249 ``README.md``), applied with the model's chat
template; the answer is the first line of the reply. FlashRAG's benchmark scores the whole reply
(``pred_process_fun=None``); that setting is the variant ``direct_flashrag`` (:mod:`baselines.flashrag`).
"""

from __future__ import annotations

from harness.api import (
    Method,
    MethodSpec,
    Protocol,
    QAExample,
    RunContext,
    Trajectory,
    answer_once,
    extract_first_line,
)

SYSTEM = "Answer the question based on your own knowledge. Only give me the answer and do not output any other words."
# FlashRAG's user prompt has no "Answer:" line: examples/methods/run_exp.py zero_shot() uses
# user_prompt="Question: {question}" (= PromptTemplate.base_user_prompt).
USER = "Question: {question}"
# FlashRAG's uniform setting: 32 output tokens (FlashRAG@1ee5249 docs/original_docs/baseline_details.md)
MAX_NEW_TOKENS = 32


def direct_prompt(example: QAExample, ctx: RunContext) -> str:
    """The chat prompt of one question: FlashRAG's system prompt and ``Question: {question}``."""
    return ctx.backend.chat_prompt(
        [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": USER.format(question=example.question)},
        ]
    )


class Direct(Method):
    name = "direct"
    description = "answer from parametric knowledge, no retrieval"
    source = "FlashRAG naive generation prompt (Jin et al. 2024, flashrag/prompt/base_prompt.py)"
    uses_retrieval = False

    def spec(self, protocol: Protocol) -> MethodSpec:
        return MethodSpec(
            name=self.name,
            prompts={"system": SYSTEM, "user": USER},
            extractor="first_line",
            params={"max_new_tokens": MAX_NEW_TOKENS},
        )

    def solve(self, examples: list[QAExample], ctx: RunContext) -> list[Trajectory]:
        prompts = [direct_prompt(e, ctx) for e in examples]
        return answer_once(
            prompts, examples, ctx, max_new_tokens=MAX_NEW_TOKENS, extractor=extract_first_line
        )
