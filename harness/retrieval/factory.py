"""Make a retriever from a name, a spec or a URL.

    make_retriever("bm25s")                          # the embedded default, packaged closed corpus
    make_retriever("dense", "wiki18.jsonl.gz")       # MiniLM + faiss Flat over a corpus file
    make_retriever('{"kind": "dense", "index_type": "HNSW"}')   # any spec as JSON
    make_retriever("http://127.0.0.1:8000")          # a running `harness serve-retriever`

Named presets: :data:`PRESETS`. Backends are looked up in :data:`RETRIEVERS` by spec kind and
imported lazily (pyserini, torch and faiss only load when asked for).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, TypeAdapter, ValidationError

from harness.errors import ConfigError
from harness.registry import Registry
from harness.retrieval.base import Retriever
from harness.retrieval.cache import CachedRetriever, ResultCache
from harness.retrieval.corpus import Corpus, default_corpus_path, open_corpus
from harness.retrieval.index import LoadMode
from harness.retrieval.spec import Bm25sSpec, DenseSpec, HybridSpec, PyseriniSpec, RetrieverSpec

PRESETS: dict[str, BaseModel] = {
    "bm25s": Bm25sSpec(),
    "pyserini": PyseriniSpec(),
    "dense": DenseSpec(),
    "dense-hnsw": DenseSpec(index_type="HNSW"),
    "hybrid": HybridSpec(),
}

Builder = Callable[[BaseModel, Corpus, LoadMode, bool], Retriever]
RETRIEVERS: Registry[Builder] = Registry("retriever")


def _bm25s(spec, corpus, mode, progress):
    from harness.retrieval.bm25 import Bm25sRetriever

    return Bm25sRetriever(corpus, spec, mode=mode, progress=progress)


def _pyserini(spec, corpus, mode, progress):
    from harness.retrieval.lucene import PyseriniRetriever

    return PyseriniRetriever(corpus, spec, mode=mode, progress=progress)


def _dense(spec, corpus, mode, progress):
    from harness.retrieval.dense import DenseRetriever

    return DenseRetriever(corpus, spec, mode=mode, progress=progress)


def _hybrid(spec, corpus, mode, progress):
    from harness.retrieval.hybrid import HybridRetriever

    sparse = build_retriever(spec.sparse, corpus, mode=mode, progress=progress)
    dense = build_retriever(spec.dense, corpus, mode=mode, progress=progress)
    return HybridRetriever(sparse, dense, spec)


RETRIEVERS.register("bm25s", _bm25s)
RETRIEVERS.register("pyserini", _pyserini)
RETRIEVERS.register("dense", _dense)
RETRIEVERS.register("hybrid", _hybrid)

_SPEC = TypeAdapter(RetrieverSpec)


def parse_spec(value: str | BaseModel) -> BaseModel:
    """A preset name, a JSON spec, or a spec object -> a spec object."""
    if isinstance(value, BaseModel):
        return value
    text = value.strip()
    if text.startswith("{"):
        try:
            return _SPEC.validate_json(text)
        except ValidationError as e:
            raise ConfigError(f"invalid retriever spec {text!r}: {e.errors()[0]['msg']}") from None
    if text in PRESETS:
        return PRESETS[text]
    raise ConfigError(
        f"unknown retriever {text!r}; known: {', '.join(PRESETS)}, a JSON spec, or a server URL (http://...)"
    )


def as_corpus(corpus: Corpus | str | os.PathLike[str] | None, *, progress: bool = False) -> Corpus:
    if isinstance(corpus, Corpus):
        return corpus
    return open_corpus(corpus if corpus is not None else default_corpus_path(), progress=progress)


def build_retriever(
    spec: BaseModel, corpus: Corpus, *, mode: LoadMode = "auto", progress: bool = False
) -> Retriever:
    return RETRIEVERS.get(spec.kind)(spec, corpus, mode, progress)  # type: ignore[attr-defined]


def make_retriever(
    spec: str | BaseModel = "bm25s",
    corpus: Corpus | str | Path | None = None,
    *,
    mode: LoadMode = "auto",
    progress: bool = False,
    cache: ResultCache | bool = False,
) -> Retriever:
    """Build (or load) a retriever. ``corpus`` defaults to the packaged closed corpus.

    ``mode``: see :data:`harness.retrieval.index.LoadMode`. ``cache=True`` wraps the retriever
    in a :class:`CachedRetriever` over the default persistent cache; pass a
    :class:`ResultCache` to choose another.
    """
    if isinstance(spec, str) and spec.strip().startswith(("http://", "https://")):
        from harness.retrieval.client import RetrievalClient

        retriever: Retriever = RetrievalClient(spec.strip())
    else:
        retriever = build_retriever(
            parse_spec(spec), as_corpus(corpus, progress=progress), mode=mode, progress=progress
        )
    if cache is False:
        return retriever
    return CachedRetriever(retriever, ResultCache.default() if cache is True else cache)


def default_retriever(**kwargs) -> Retriever:
    """The embedded default: bm25s over the packaged closed corpus."""
    return make_retriever("bm25s", None, **kwargs)


def make_protocol_retriever(
    protocol, corpus_path: str | Path | None = None, *, mode: LoadMode = "auto", progress: bool = True
) -> Retriever:
    """The retriever a :class:`harness.protocol.Protocol` pins, over ``corpus_path`` (default: the
    packaged closed corpus). The corpus file must have the protocol's content hash and size when
    the protocol pins them, otherwise :class:`ConfigError` (scores would not be comparable)."""
    corpus = protocol_corpus(protocol, corpus_path, progress=progress)
    return build_retriever(protocol.retriever, corpus, mode=mode, progress=progress)


def protocol_corpus(protocol, corpus_path: str | Path | None = None, *, progress: bool = False) -> Corpus:
    """The corpus file ``corpus_path`` (default: the packaged closed corpus), checked against the
    content hash and size ``protocol`` pins (:class:`ConfigError` if they differ)."""
    corpus = as_corpus(corpus_path, progress=progress)
    ref = protocol.corpus
    if ref.content_hash is not None and ref.content_hash != corpus.spec.content_hash:
        raise ConfigError(
            f"corpus {corpus.path} has content hash {corpus.spec.content_hash[:12]}..., but protocol "
            f"{protocol.name!r} pins {ref.content_hash[:12]}... (corpus {ref.id!r}); use the protocol's corpus"
        )
    if ref.n_passages is not None and ref.n_passages != len(corpus):
        raise ConfigError(
            f"corpus {corpus.path} has {len(corpus)} passages, but protocol {protocol.name!r} pins "
            f"{ref.n_passages} (corpus {ref.id!r}); use the protocol's corpus"
        )
    return corpus
