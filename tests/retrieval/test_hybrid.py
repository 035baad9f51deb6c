"""Reciprocal rank fusion: exact fused scores and tie-breaking, and the hybrid retriever."""

from __future__ import annotations

import pytest

from harness.errors import ConfigError
from harness.retrieval.hybrid import HybridRetriever, rrf_fuse
from harness.retrieval.spec import CorpusSpec, HybridSpec
from harness.types import Hit
from tests.retrieval.helpers import FakeRetriever


def hits(*ids: str) -> list[Hit]:
    return [Hit(doc_id=d, contents=f"c-{d}", score=10.0 - i) for i, d in enumerate(ids)]


def test_rrf_exact_scores():
    fused = rrf_fuse([hits("a", "b", "c"), hits("c", "a", "d")], k=10, rrf_k=60)
    expected = {
        "a": 1 / 61 + 1 / 62,
        "c": 1 / 63 + 1 / 61,
        "b": 1 / 62,
        "d": 1 / 63,
    }
    assert [h.doc_id for h in fused] == ["a", "c", "b", "d"]
    for h in fused:
        assert h.score == pytest.approx(expected[h.doc_id], abs=1e-15)
    assert fused[0].contents == "c-a"


def test_rrf_ties_break_by_best_rank_then_list_order():
    # b and x both score 1/61 (rank 1 in one list); b wins, it is first in the first (sparse) list
    fused = rrf_fuse([hits("b"), hits("x")], k=5, rrf_k=60)
    assert [h.doc_id for h in fused] == ["b", "x"]
    assert fused[0].score == fused[1].score == pytest.approx(1 / 61)
    # p and s tie (ranks 1+4), and beat q and r (ranks 2+3: 1/62+1/63 < 1/61+1/64); p's rank 1 is in
    # the first list, so p comes before s
    fused = rrf_fuse([hits("p", "q", "r", "s"), hits("s", "r", "q", "p")], k=4, rrf_k=60)
    assert [h.doc_id for h in fused] == ["p", "s", "q", "r"]
    assert fused[0].score == pytest.approx(1 / 61 + 1 / 64)
    assert fused[2].score == pytest.approx(1 / 62 + 1 / 63)


def test_rrf_k_and_cutoff():
    fused = rrf_fuse([hits("a", "b"), hits("b")], k=1, rrf_k=0)
    assert [(h.doc_id, h.score) for h in fused] == [("b", pytest.approx(1 / 2 + 1 / 1))]
    assert rrf_fuse([[], []], k=3) == []


def test_hybrid_retriever_fuses_its_two_retrievers():
    sparse = FakeRetriever.make({"q": [("a", 9.0), ("b", 8.0), ("c", 7.0)]}, kind="bm25s")
    dense = FakeRetriever.make({"q": [("c", 0.9), ("d", 0.8)]}, kind="dense")
    h = HybridRetriever(sparse, dense, HybridSpec(rrf_k=60, depth=20))
    out = h.search(["q"], 2)[0]
    assert [x.doc_id for x in out] == ["c", "a"]
    assert out[0].score == pytest.approx(1 / 63 + 1 / 61)
    assert sparse.calls == [(["q"], 20)] and dense.calls == [(["q"], 20)]
    assert (
        h.index_id.startswith("hybrid-")
        and h.index_id != HybridRetriever(sparse, dense, HybridSpec(rrf_k=10)).index_id
    )


def test_hybrid_needs_one_corpus():
    sparse = FakeRetriever.make({}, kind="bm25s")
    other = CorpusSpec(id="other", content_hash="0" * 64, n_passages=100)
    dense = FakeRetriever.make({}, kind="dense", corpus=other)
    with pytest.raises(ConfigError, match="same corpus"):
        HybridRetriever(sparse, dense)
