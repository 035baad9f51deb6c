"""Hybrid retrieval: reciprocal rank fusion (RRF) of a sparse and a dense retriever.

Each retriever returns its top ``depth`` hits; a passage's fused score is
``sum over retrievers of 1 / (rrf_k + rank)`` with 1-based ranks (Cormack et al., 2009;
``rrf_k=60``). Passages missing from one list get nothing from it. Ties are broken by the best
rank in any list, then by the order of the retrievers (sparse first), then by doc id.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.errors import ConfigError
from harness.retrieval.base import Retriever, make_index_id
from harness.retrieval.spec import CorpusSpec, HybridSpec
from harness.types import Hit


def rrf_fuse(rankings: Sequence[Sequence[Hit]], k: int, rrf_k: int = 60) -> list[Hit]:
    """Fuse ranked hit lists; returns at most ``k`` hits whose ``score`` is the RRF score."""
    score: dict[str, float] = {}
    best: dict[str, tuple[int, int]] = {}
    contents: dict[str, str] = {}
    for li, ranking in enumerate(rankings):
        for rank, hit in enumerate(ranking, 1):
            score[hit.doc_id] = score.get(hit.doc_id, 0.0) + 1.0 / (rrf_k + rank)
            best[hit.doc_id] = min(best.get(hit.doc_id, (rank, li)), (rank, li))
            contents.setdefault(hit.doc_id, hit.contents)
    order = sorted(score, key=lambda d: (-score[d], best[d], d))[:k]
    return [Hit(doc_id=d, contents=contents[d], score=score[d]) for d in order]


class HybridRetriever(Retriever):
    def __init__(self, sparse: Retriever, dense: Retriever, spec: HybridSpec | None = None):
        self._spec = spec or HybridSpec(sparse=sparse.spec, dense=dense.spec)  # type: ignore[arg-type]
        if sparse.spec != self._spec.sparse or dense.spec != self._spec.dense:
            raise ConfigError("the hybrid spec's sparse/dense settings differ from the retrievers given")
        a, b = sparse.corpus_spec, dense.corpus_spec
        if a is None or b is None or (a.content_hash, a.n_passages) != (b.content_hash, b.n_passages):
            raise ConfigError("hybrid retrieval needs a sparse and a dense retriever over the same corpus")
        self.sparse, self.dense = sparse, dense
        self._corpus: CorpusSpec = a
        self._index_id = make_index_id(a, self._spec)

    @property
    def spec(self) -> HybridSpec:
        return self._spec

    @property
    def index_id(self) -> str:
        return self._index_id

    @property
    def corpus_spec(self) -> CorpusSpec:
        return self._corpus

    def _search(self, queries: list[str], k: int) -> list[list[Hit]]:
        depth = max(self._spec.depth, k)
        s = self.sparse.search(queries, depth)
        d = self.dense.search(queries, depth)
        return [rrf_fuse((hs, hd), k, self._spec.rrf_k) for hs, hd in zip(s, d, strict=True)]

    def close(self) -> None:
        self.sparse.close()
        self.dense.close()
