"""IRCoT control flow with a scripted backend: one sentence per step, each sentence the next query,
documents accumulated as FlashRAG does, stop at "So the answer is:" or after MAX_ITER thoughts."""

from __future__ import annotations

import re

import pytest

from baselines.ircot import EXAMPLE, INSTRUCTION, MAX_ITER, DocPool, IRCoT, build_prompt
from harness.types import Hit
from tests.baselines.helpers import context, example
from tests.support.scripted import ScriptedBackend

Q1 = "Which country is Zorbia in?"
Q2 = "Who founded Quuxville?"


def shown_titles(prompt: str) -> list[str]:
    """The documents of a prompt after the demonstration: (title number, query prefix)."""
    tail = prompt.split(EXAMPLE, 1)[1]
    return re.findall(r'Wikipedia Title: "(Title \d)"\nText about (.+?) number', tail)


def test_stops_at_answer_marker_and_queries_are_previous_sentences():
    be = ScriptedBackend(
        {
            Q1: [
                "Zorbia is a town in Freedonia. More",
                "Freedonia is in Europe.",
                "So the answer is: Freedonia.",
            ],
            Q2: [" So the answer is: Ann Lee\nrest"],
        }
    )
    ctx, ret = context(be)
    t1, t2 = IRCoT().solve([example(1, Q1, "Freedonia"), example(2, Q2, "Ann Lee")], ctx)
    # all active questions generate together: both, then only Q1 twice
    assert [len(c) for c in be.calls] == [2, 1, 1]
    # first the questions, then each non-final sentence without its full stop
    assert ret.calls == [
        ([Q1, Q2], 3),
        (["Zorbia is a town in Freedonia"], 3),
        (["Freedonia is in Europe"], 3),
    ]
    assert [t.kind for t in t1.turns] == [
        "retrieve", "generate", "retrieve", "generate", "retrieve", "generate",
    ]  # fmt: skip
    assert [t.query for t in t1.turns if t.kind == "retrieve"] == [
        Q1,
        "Zorbia is a town in Freedonia",
        "Freedonia is in Europe",
    ]
    assert (t1.n_retrievals, t1.n_llm_calls) == (3, 3)
    assert t1.prediction == "Freedonia" and t1.extraction_status == "ok"
    assert (
        t1.response == "Zorbia is a town in Freedonia. Freedonia is in Europe. So the answer is: Freedonia."
    )
    assert t1.meta["ended_by"] == "answer"
    assert (t2.n_retrievals, t2.n_llm_calls, t2.prediction) == (1, 1, "Ann Lee")
    # token counts: every generation counted with its prompt
    assert t1.prompt_tokens == sum(len(c[0]) for c in be.calls)
    assert t1.completion_tokens == len("Zorbia is a town in Freedonia.") + len(
        "Freedonia is in Europe."
    ) + len("So the answer is: Freedonia.")


def test_prompt_is_flashrag_plain_text_with_the_chain_appended():
    be = ScriptedBackend({Q1: ["Zorbia is in Freedonia.", "So the answer is: Freedonia."]})
    ctx, _ = context(be)
    IRCoT().solve([example(1, Q1)], ctx)
    first, second = be.calls[0][0], be.calls[1][0]
    assert first.startswith(INSTRUCTION + "\n\n" + EXAMPLE + "\n\n" + "Wikipedia Title: ")
    assert first.endswith(f"Question: {Q1}\nThought:")
    assert "<user>" not in first  # no chat template (FlashRAG enable_chat=False)
    assert second.endswith(f"Question: {Q1}\nThought: Zorbia is in Freedonia.")
    # the first prompt shows the question's hits in retriever order ...
    assert shown_titles(first) == [("Title 1", Q1[:20]), ("Title 2", Q1[:20]), ("Title 3", Q1[:20])]
    # ... then all documents by ascending best score (FlashRAG sorts with reverse=False), ties stable
    t = "Zorbia is in Freedoni"[:20]
    assert shown_titles(second) == [
        ("Title 3", Q1[:20]), ("Title 3", t), ("Title 2", Q1[:20]), ("Title 2", t), ("Title 1", Q1[:20]), ("Title 1", t),
    ]  # fmt: skip


def test_iteration_cap_without_answer():
    be = ScriptedBackend({Q1: [f"Step {i} of thinking." for i in range(10)]})
    ctx, ret = context(be)
    (t,) = IRCoT().solve([example(1, Q1)], ctx)
    assert len(be.calls) == MAX_ITER == 5
    # the question, then the first MAX_ITER - 1 sentences; no retrieval after the last one
    assert ret.n_queries == MAX_ITER
    assert (t.n_llm_calls, t.n_retrievals) == (5, 5)
    assert t.prediction == "" and t.extraction_status == "max_turns" and t.meta["ended_by"] == "max_iter"


@pytest.mark.parametrize("empty", ["\n", " .", ""])
def test_empty_thought_ends_the_chain_without_search(empty):
    be = ScriptedBackend({Q1: ["Zorbia is in Freedonia.", empty, "So the answer is: x."]})
    ctx, ret = context(be)
    (t,) = IRCoT().solve([example(1, Q1)], ctx)
    assert ret.calls == [([Q1], 3), (["Zorbia is in Freedonia"], 3)]
    assert [x.status for x in t.turns if x.kind == "generate"] == ["ok", "empty_thought"]
    assert t.prediction == "" and t.extraction_status == "no_answer" and t.meta["ended_by"] == "empty_thought"


def test_doc_pool_keeps_best_score_and_first_position():
    def hit(i: str, s: float) -> Hit:
        return Hit(doc_id=i, contents=f'"{i}"\ntext', score=s)

    pool = DocPool([hit("a", 3.0), hit("b", 2.0)])
    assert [h.doc_id for h in pool.shown] == ["a", "b"]
    pool.merge([hit("b", 5.0), hit("c", 2.0), hit("a", 1.0)])
    assert [(h.doc_id, h.score) for h in pool.shown] == [("c", 2.0), ("a", 3.0), ("b", 5.0)]
    assert build_prompt("q?", pool.shown, []).count("Wikipedia Title: ") == 3 + EXAMPLE.count(
        "Wikipedia Title: "
    )
