"""Chain-of-thought: reason step by step, then answer in ``<answer>`` tags (no retrieval).

The Search-R1 paper (arXiv 2503.09516 v5, §4 "Baselines") lists "Direct inference and
Chain-of-Thought (CoT) reasoning (Wei et al. 2022)" as its inference-without-retrieval baselines
and scores every baseline with the same EM over the ``<answer>`` span; the paper gives no CoT
prompt text. The released code has one reasoning-without-search template, the one its "R1"
baseline uses: ``scripts/data_process/nq.py`` ``make_prefix`` (template_type "base"), "first have
a reasoning process in mind and then provides the answer", reasoning in ``<think>``, answer in
``<answer>``. We use that template verbatim (including its "provides") as the CoT prompt: it is
Search-R1's prompt minus the search instructions, so the CoT row differs from the Search-R1 row
only by the search tool. As in Search-R1 the prompt is one user turn of the chat template, the
question is stripped and given a '?' (:func:`harness.method.format_question`), the model
generates until it stops (no stop string; max ``protocol.decoding.max_new_tokens``, Search-R1's
500) and the answer is the **last** ``<answer>`` span of the model's own text.
"""

from __future__ import annotations

from harness.api import (
    Extraction,
    Method,
    MethodSpec,
    Protocol,
    QAExample,
    RunContext,
    Trajectory,
    answer_once,
    extract_tagged,
    format_question,
)

# Search-R1 scripts/data_process/nq.py make_prefix(template_type="base"), verbatim.
PROMPT = (
    "Answer the given question. You should first have a reasoning process in mind and then provides the "
    "answer. Show your reasoning in <think> </think> tags and return the final answer in <answer> </answer> "
    "tags, for example <answer> Beijing </answer>. Question: {question}\n"
)


def extract_answer(text: str) -> Extraction:
    """The last ``<answer>`` span of the model's own text (Search-R1's rule)."""
    return extract_tagged(text, "<answer>", "</answer>")


class CoT(Method):
    name = "cot"
    description = "chain of thought in <think>, then the answer in <answer>; no retrieval"
    source = "Search-R1 CoT baseline (Jin et al. 2025 §4); prompt: Search-R1 scripts/data_process/nq.py"
    uses_retrieval = False

    def spec(self, protocol: Protocol) -> MethodSpec:
        return MethodSpec(
            name=self.name,
            prompts={"user": PROMPT},
            extractor="last <answer> of the model's own response",
            params={"max_new_tokens": protocol.decoding.max_new_tokens, "question": "format_question"},
        )

    def solve(self, examples: list[QAExample], ctx: RunContext) -> list[Trajectory]:
        prompts = [
            ctx.backend.chat_prompt(
                [{"role": "user", "content": PROMPT.format(question=format_question(e.question))}]
            )
            for e in examples
        ]
        return answer_once(
            prompts, examples, ctx, max_new_tokens=ctx.max_new_tokens, extractor=extract_answer
        )
