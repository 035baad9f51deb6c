"""Retrieval metrics: exact values and their definitions' corner cases."""

from __future__ import annotations

import pytest

from harness.metrics import answer_in_docs_at_k, evidence_recall, retrieval_recall_at_k

RETRIEVED = ["d7", "g1", "d3", "d9", "g2", "d1"]
GOLD = ["g1", "g2"]


@pytest.mark.parametrize(("k", "expected"), [(1, 0.0), (2, 0.5), (4, 0.5), (5, 1.0), (100, 1.0)])
def test_retrieval_recall_at_k(k: int, expected: float) -> None:
    assert retrieval_recall_at_k(RETRIEVED, GOLD, k) == expected


def test_retrieval_recall_counts_distinct_gold_ids() -> None:
    assert retrieval_recall_at_k(["g1", "g1", "x"], ["g1", "g1", "g2"], 3) == 0.5
    assert retrieval_recall_at_k(["a", "b", "c"], ["c", "b", "a"], 3) == 1.0
    # duplicates in the retrieved list still occupy rank positions
    assert retrieval_recall_at_k(["g1", "g1", "g2"], ["g1", "g2"], 2) == 0.5
    assert retrieval_recall_at_k(["x", "y", "z"], ["g1", "g2", "g3"], 3) == 0.0
    assert retrieval_recall_at_k([], ["g1"], 3) == 0.0


def test_evidence_recall_uses_the_whole_trajectory() -> None:
    assert evidence_recall(RETRIEVED, GOLD) == 1.0
    assert evidence_recall(["g3", "x"], ["g1", "g2", "g3"]) == pytest.approx(1 / 3, abs=1e-15)
    assert evidence_recall([], ["g1"]) == 0.0


@pytest.mark.parametrize("k", [0, -1, 1.5, True])
def test_bad_k_raises(k) -> None:
    with pytest.raises(ValueError, match="k must be a positive integer"):
        retrieval_recall_at_k(RETRIEVED, GOLD, k)
    with pytest.raises(ValueError, match="k must be a positive integer"):
        answer_in_docs_at_k(["x"], ["x"], k)


def test_empty_gold_raises() -> None:
    with pytest.raises(ValueError, match="gold_ids is empty"):
        retrieval_recall_at_k(RETRIEVED, [], 3)
    with pytest.raises(ValueError, match="gold_ids is empty"):
        evidence_recall(RETRIEVED, [])
    with pytest.raises(ValueError, match="golds is empty"):
        answer_in_docs_at_k(["text"], [], 3)
    with pytest.raises(TypeError):
        evidence_recall(RETRIEVED, "g1")


DOCS = [
    '"Eiffel Tower"\nThe tower is in Paris, France.',
    '"Big Ben"\nThe clock tower in London.',
    '"Hamlet"\nA tragedy by William Shakespeare.',
]


def test_answer_in_docs_at_k() -> None:
    assert answer_in_docs_at_k(DOCS, ["London"], 1) == 0.0
    assert answer_in_docs_at_k(DOCS, ["London"], 2) == 1.0
    assert answer_in_docs_at_k(DOCS, ["Madrid", "shakespeare"], 3) == 1.0
    assert answer_in_docs_at_k(DOCS, ["Madrid"], 3) == 0.0
    # a normalised substring test, like cover_em: "are" occurs inside "shakespeare"
    assert answer_in_docs_at_k(DOCS, ["ARE."], 3) == 1.0
    # a gold that normalises to "" matches no document (upstream would match every document)
    assert answer_in_docs_at_k(DOCS, ["!!!"], 3) == 0.0
    assert answer_in_docs_at_k([], ["Paris"], 3) == 0.0
