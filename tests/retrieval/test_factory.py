"""make_retriever / parse_spec / make_protocol_retriever."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from harness.errors import ConfigError
from harness.retrieval.bm25 import Bm25sRetriever
from harness.retrieval.cache import CachedRetriever, ResultCache
from harness.retrieval.client import RetrievalClient
from harness.retrieval.factory import PRESETS, make_protocol_retriever, make_retriever, parse_spec
from harness.retrieval.spec import Bm25sSpec, DenseSpec, HybridSpec, PyseriniSpec


def test_parse_spec():
    assert parse_spec("bm25s") == Bm25sSpec()
    assert parse_spec("dense-hnsw") == DenseSpec(index_type="HNSW")
    assert parse_spec("hybrid") == HybridSpec()
    assert parse_spec('{"kind": "bm25s", "k1": 1.2}') == Bm25sSpec(k1=1.2)
    assert parse_spec(PyseriniSpec(b=0.75)) == PyseriniSpec(b=0.75)
    assert set(PRESETS) == {"bm25s", "pyserini", "dense", "dense-hnsw", "hybrid"}
    with pytest.raises(ConfigError, match="unknown retriever 'bm26'; known: bm25s, pyserini"):
        parse_spec("bm26")
    with pytest.raises(ConfigError, match="invalid retriever spec"):
        parse_spec('{"kind": "bm25s", "k1": "high"}')


def test_make_retriever_from_a_path_with_cache(tiny_path, tmp_path):
    r = make_retriever("bm25s", tiny_path, cache=ResultCache(tmp_path / "c.sqlite"))
    assert isinstance(r, CachedRetriever) and isinstance(r.inner, Bm25sRetriever)
    assert r.search(["berlin"], 1)[0][0].doc_id == "d2"
    assert r.search(["berlin"], 1)[0][0].doc_id == "d2"
    assert (r.cache.hits, r.cache.misses) == (1, 1)


def test_make_retriever_url_gives_a_client():
    r = make_retriever("http://127.0.0.1:9/retrieve")
    assert isinstance(r, RetrievalClient) and r.base_url == "http://127.0.0.1:9"


def test_protocol_retriever_checks_the_corpus(tiny_path, tiny_corpus):
    ok = SimpleNamespace(
        name="t",
        corpus=SimpleNamespace(id="tiny", content_hash=tiny_corpus.spec.content_hash, n_passages=5),
        retriever=Bm25sSpec(),
    )
    assert make_protocol_retriever(ok, tiny_path).search(["mice"], 1)[0][0].doc_id == "d3"
    bad_hash = SimpleNamespace(
        name="t", corpus=SimpleNamespace(id="x", content_hash="0" * 64, n_passages=5), retriever=Bm25sSpec()
    )
    with pytest.raises(ConfigError, match=r"but protocol 't' pins 000000000000"):
        make_protocol_retriever(bad_hash, tiny_path)
    bad_n = SimpleNamespace(
        name="t", corpus=SimpleNamespace(id="x", content_hash=None, n_passages=9), retriever=Bm25sSpec()
    )
    with pytest.raises(ConfigError, match=r"has 5 passages, but protocol 't' pins 9"):
        make_protocol_retriever(bad_n, tiny_path)


def test_missing_pyserini_names_the_extra(tiny_corpus, monkeypatch):
    from harness.retrieval import lucene

    monkeypatch.setattr(lucene, "pyserini_available", lambda: False)
    with pytest.raises(ConfigError, match=r"pip install 'rar-harness\[pyserini\]'"):
        make_retriever("pyserini", tiny_corpus)
