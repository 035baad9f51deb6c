"""Naive RAG: retrieve top-k for the question once, answer from the documents.

Prompt: FlashRAG's standard RAG prompt ("Standard RAG" row of the benchmark in
RUC-NLPIR/FlashRAG@1ee5249 ``README.md``),
documents rendered as ``Doc {i}(Title: ...) ...`` (FlashRAG ``format_reference``); top-k from the
protocol (Search-R1's RAG baseline uses the same top-3 as its methods, arXiv 2503.09516 v5 Table 2).
The answer is the first line of the reply; FlashRAG's benchmark scores the whole reply
(``pred_process_fun=None``), which is the variant ``naive_rag_flashrag`` (:mod:`baselines.flashrag`).
Search-R1's own RAG prompt (think/answer tags) is the variant ``search_r1_rag``
(:mod:`baselines.search_r1_rag`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from harness.api import (
    RENDERERS,
    Hit,
    Method,
    MethodSpec,
    Protocol,
    QAExample,
    RunContext,
    Trajectory,
    Turn,
    answer_once,
    extract_first_line,
)

SYSTEM = (
    "Answer the question based on the given document. Only give me the answer and do not output any other "
    "words.\nThe following are given documents.\n\n{reference}"
)
# FlashRAG PromptTemplate.base_user_prompt (SequentialPipeline's default template), verbatim. The
# system prompt is base_system_prompt with the space after "document." that FlashRAG's adjacent
# string literals lose ("...given document.Only give me...").
USER = "Question: {question}"
MAX_NEW_TOKENS = 32  # FlashRAG uniform setting (docs/original_docs/baseline_details.md)
RENDERER = "search_r1"  # identical to FlashRAG's format_reference


class NaiveRAG(Method):
    name = "naive_rag"
    description = "retrieve top-k for the question once, answer from the documents"
    source = "FlashRAG standard RAG (Jin et al. 2024, flashrag/prompt/base_prompt.py)"

    def spec(self, protocol: Protocol) -> MethodSpec:
        return MethodSpec(
            name=self.name,
            prompts={"system": SYSTEM, "user": USER},
            renderer=RENDERER,
            extractor="first_line",
            params={"max_new_tokens": MAX_NEW_TOKENS, "top_k": protocol.top_k},
        )

    def solve(self, examples: list[QAExample], ctx: RunContext) -> list[Trajectory]:
        hits, latency = retrieve(examples, ctx, self.name)
        prompts = [rag_prompt(e, h, ctx) for e, h in zip(examples, hits, strict=True)]
        trajs = answer_once(
            prompts, examples, ctx, max_new_tokens=MAX_NEW_TOKENS, extractor=extract_first_line
        )
        add_retrieve_turns(trajs, examples, hits, latency)
        return trajs


def retrieve(examples: list[QAExample], ctx: RunContext, method: str) -> tuple[list[list[Hit]], float]:
    """Top-k for each question (one batched search) and the latency per question."""
    retriever = ctx.require_retriever(method)
    t0 = time.perf_counter()
    hits = retriever.search([e.question for e in examples], ctx.protocol.top_k)
    return hits, (time.perf_counter() - t0) / max(len(examples), 1)


def rag_prompt(example: QAExample, hits: Sequence[Hit], ctx: RunContext) -> str:
    """The chat prompt: FlashRAG's system prompt over the rendered documents, ``Question: ...``."""
    system = SYSTEM.format(reference=RENDERERS.get(RENDERER)(hits))
    return ctx.backend.chat_prompt(
        [
            {"role": "system", "content": system},
            {"role": "user", "content": USER.format(question=example.question)},
        ]
    )


def add_retrieve_turns(
    trajs: list[Trajectory], examples: list[QAExample], hits: list[list[Hit]], latency: float
) -> None:
    """Put each question's retrieval before its generation, as turn 0."""
    for t, e, h in zip(trajs, examples, hits, strict=True):
        t.turns.insert(
            0,
            Turn(
                index=0,
                kind="retrieve",
                query=e.question,
                doc_ids=[x.doc_id for x in h],
                doc_scores=[x.score for x in h],
                latency_s=latency,
            ),
        )
        for i, turn in enumerate(t.turns):
            turn.index = i
