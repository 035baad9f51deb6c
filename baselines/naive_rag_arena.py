"""``naive_rag`` in ARENA's gold-context setting: the variant ``naive_rag_arena``, scored under
``arena-gold-context`` only.

ARENA (arXiv 2505.13258) is evaluated on a reader setting, not open retrieval: each question comes
with its own 10 (HotpotQA, 2Wiki) or 20 (MuSiQue) paragraphs, gold among them (§4.1, §4.4), and
its prompt-based baselines get "the question and all references" and answer directly (§4.2, the
prompt-based rows of Table 3). Open-retrieval ``naive_rag`` is therefore no like-for-like baseline
for ARENA: its paired comparison would mix two protocols, which
``harness.rl.heldout_eval.compare`` refuses. This variant is ``naive_rag`` (FlashRAG's
standard RAG prompt, documents as ``Doc i(Title: ...) text``, the first line of at most 32 new
tokens as the answer; :mod:`baselines.naive_rag`) whose documents are ARENA's references for the
question, exactly those ARENA's prompt numbers and in that order
(ARENA's context provider, ``methods.arena.method.ClosedCorpusContexts``: the question's own paragraphs, or the labelled
gold + BM25 substitute where it has none). It never calls the retriever, and records per
trajectory which references it read, as ARENA does.
"""

from __future__ import annotations

from typing import ClassVar

from baselines.naive_rag import MAX_NEW_TOKENS, NaiveRAG, rag_prompt
from harness.api import (
    ConfigError,
    Hit,
    MethodSpec,
    Protocol,
    QAExample,
    RunContext,
    Trajectory,
    answer_once,
    extract_first_line,
    join_contents,
)
from methods.arena.method import PROTOCOL_NAME, Arena, ContextProvider


class NaiveRAGArena(NaiveRAG):
    name = "naive_rag_arena"
    description = "naive RAG over ARENA's references (each question's own paragraphs), no retrieval"
    source = (
        "FlashRAG standard RAG prompt (flashrag/prompt/base_prompt.py) over the references of ARENA's "
        "gold-context setting (Ren et al. 2025, arXiv 2505.13258 §4.2 prompt-based baselines)"
    )
    uses_retrieval: ClassVar[bool] = False
    own_protocols: ClassVar[tuple[str, ...]] = (PROTOCOL_NAME,)
    reference_source_key: ClassVar[str] = Arena.reference_source_key

    def __init__(self, contexts: ContextProvider | None = None):
        # ARENA itself supplies the references (its context provider) and says which questions it
        # cannot answer, so both arms read the same paragraphs by one code path
        self._arena = Arena(contexts=contexts)

    def _require_protocol(self, protocol: Protocol) -> None:
        if protocol.name != PROTOCOL_NAME:
            raise ConfigError(
                f"method {self.name!r} reads ARENA's references and is scored only under --protocol "
                f"{PROTOCOL_NAME} (got {protocol.name!r}); open-retrieval naive RAG is `naive_rag`"
            )

    def spec(self, protocol: Protocol) -> MethodSpec:
        self._require_protocol(protocol)
        base = super().spec(protocol)
        params = {
            **base.params,
            "top_k": None,
            "documents": "ARENA's references for the question (methods.arena ClosedCorpusContexts), "
            "in their order; no retrieval",
        }
        return base.model_copy(update={"name": self.name, "params": params})

    def cannot_answer(self, example: QAExample) -> str | None:
        return self._arena.cannot_answer(example)

    def solve(self, examples: list[QAExample], ctx: RunContext) -> list[Trajectory]:
        self._require_protocol(ctx.protocol)
        contexts = self._arena.context_provider.contexts(examples, ctx.protocol)
        docs = [
            [Hit(r.passage_id or "", join_contents(r.title, r.text), 0.0) for r in c.references]
            for c in contexts
        ]
        prompts = [rag_prompt(e, d, ctx) for e, d in zip(examples, docs, strict=True)]
        trajs = answer_once(
            prompts, examples, ctx, max_new_tokens=MAX_NEW_TOKENS, extractor=extract_first_line
        )
        for t, c in zip(trajs, contexts, strict=True):
            t.meta.update(
                {
                    "arena_reference_ids": [r.passage_id for r in c.references],
                    self.reference_source_key: c.source,
                }
            )
        return trajs
