"""``naive_rag_arena``: naive RAG (FlashRAG's standard RAG prompt, first line) over exactly the
references ARENA reads (arXiv 2505.13258 §4.2, the prompt-based baselines: "the question and all
references"), so that ARENA's held-out evaluation pairs with a naive reader under one protocol.
The model is a scripted backend and the retriever records its calls (none are allowed)."""

from __future__ import annotations

import re

import pytest

from baselines.naive_rag import NaiveRAG, rag_prompt
from baselines.naive_rag_arena import NaiveRAGArena
from harness.data import load_dataset
from harness.errors import ConfigError
from harness.eval.protocol import preset
from harness.eval.runner import check_protocol
from harness.methods_registry import VARIANTS, get_method
from harness.rollout.base import RunContext
from harness.types import Hit, QAExample
from methods.arena.method import PROTOCOL_NAME, Arena, dataset_context
from tests.support.scripted import RecordingRetriever, ScriptedBackend


def _hotpot() -> QAExample:
    return load_dataset("hotpotqa")[0]  # Scott Derrickson / Ed Wood: gold paragraphs 2 and 5 of 10


def _ctx(script: dict[str, list[str]], protocol_name: str = PROTOCOL_NAME):
    backend, retriever = ScriptedBackend(script), RecordingRetriever()
    return (
        RunContext(backend=backend, protocol=preset(protocol_name), retriever=retriever),
        backend,
        retriever,
    )


def test_reads_arenas_references_in_order_and_never_retrieves():
    e = _hotpot()
    ctx, backend, retriever = _ctx({e.question: ["yes\nthey were both American."]})
    (t,) = NaiveRAGArena().solve([e], ctx)
    refs = dataset_context(e).references
    prompt = backend.calls[0][0]
    # naive_rag's own prompt, over ARENA's ten paragraphs as its documents
    hits = [Hit(r.passage_id or "", f'"{r.title}"\n{r.text}', 0.0) for r in refs]
    assert prompt == rag_prompt(e, hits, ctx)
    # the title in its wiki-18 quotes, as FlashRAG's format_reference and Search-R1 render it
    titles = re.findall(r'Doc (\d+)\(Title: "(.*?)"\) ', prompt)
    assert titles == [(str(i), r.title) for i, r in enumerate(refs, 1)]
    assert [titles[i - 1][1] for i in dataset_context(e).gold_ids] == ["Scott Derrickson", "Ed Wood"]
    assert retriever.calls == [] and t.n_retrievals == 0 and not NaiveRAGArena.uses_retrieval
    assert t.prediction == "yes" and t.extraction_status == "ok"  # the first line, as naive_rag
    assert t.meta["arena_reference_ids"] == [f"closed-{i:06d}" for i in range(1, 11)]
    assert t.meta["arena_context"] == "dataset"


def test_same_references_as_arena_on_the_same_question():
    e = _hotpot()
    a_ctx, _b, _r = _ctx({e.question: ["<answer>yes</answer>"]})
    n_ctx, _b2, _r2 = _ctx({e.question: ["yes"]})
    (a,) = Arena().solve([e], a_ctx)
    (n,) = NaiveRAGArena().solve([e], n_ctx)
    assert n.meta["arena_reference_ids"] == a.meta["arena_reference_ids"]
    assert n.meta["arena_context"] == a.meta["arena_context"]


def test_scored_only_under_arenas_protocol():
    m = get_method("naive_rag_arena")
    assert VARIANTS["naive_rag_arena"] == "naive_rag" and m.own_protocols == (PROTOCOL_NAME,)
    check_protocol(m, preset(PROTOCOL_NAME))
    with pytest.raises(ConfigError, match=f"scored only under its own protocol {PROTOCOL_NAME}"):
        check_protocol(m, preset("mini"))
    with pytest.raises(ConfigError, match=f"--protocol {PROTOCOL_NAME}"):
        m.spec(preset("mini"))
    ctx, _b, _r = _ctx({"x": ["y"]}, "mini")
    with pytest.raises(ConfigError, match=f"--protocol {PROTOCOL_NAME}"):
        m.solve([_hotpot()], ctx)
    # open-retrieval naive_rag stays refused there: a protocol holds one kind of row
    with pytest.raises(ConfigError, match="is the own setting of method arena, naive_rag_arena"):
        check_protocol(get_method("naive_rag"), preset(PROTOCOL_NAME))


def test_spec_is_naive_rags_with_arenas_documents():
    proto = preset(PROTOCOL_NAME)
    spec, base = NaiveRAGArena().spec(proto), NaiveRAG().spec(proto)
    assert spec.name == "naive_rag_arena" and spec.prompts == base.prompts
    assert (spec.renderer, spec.extractor) == (base.renderer, base.extractor)
    assert spec.params["max_new_tokens"] == 32 and spec.params["top_k"] is None
    assert spec.spec_hash != base.spec_hash


def test_questions_without_gold_paragraphs_cannot_be_answered():
    nq = QAExample(id="n", dataset="nq", split="test", question="q", answers=("a",))
    assert "no gold supporting paragraphs" in NaiveRAGArena().cannot_answer(nq)
    assert NaiveRAGArena().cannot_answer(_hotpot()) is None
