"""``harness index --retriever pyserini --export-row-ids DIR``: the layout and id scheme of
Search-R1's BM25 server (PeterGriffinJin/Search-R1@a14dc3a4ffc6fe88c1e95038d9738e21ba3f7a06):
``search_r1/search/index_builder.py`` (``build_bm25_index``: JsonCollection,
DefaultLuceneDocumentGenerator, one thread, no stored documents, into ``<dir>/bm25``) and
``search_r1/search/retrieval_server.py`` (``BM25Retriever``: ``searcher.doc(0).raw() is None``
selects the corpus branch, whose hit is ``corpus[int(hit.docid)]``)."""

from __future__ import annotations

import json

import pytest

from harness.errors import ConfigError

pytestmark = pytest.mark.pyserini


def test_export_is_upstreams_layout_and_ranks_as_our_pyserini(tiny_corpus, tmp_path):
    from harness.retrieval.lucene import PyseriniRetriever, export_row_id_lucene, start_jvm

    path, index = export_row_id_lucene(tiny_corpus, tmp_path / "sr1")
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert rows == [{"id": str(r), "contents": tiny_corpus.contents_at(r)} for r in range(len(tiny_corpus))]
    assert index == tmp_path / "sr1" / "bm25"
    start_jvm()
    from pyserini.search.lucene import LuceneSearcher

    searcher = LuceneSearcher(str(index))
    assert searcher.doc(0).raw() is None  # upstream's corpus branch
    ours = PyseriniRetriever(tiny_corpus)
    for q in ["capital of France", "cats and mice", "python programming"]:
        hits = searcher.search(q, 3)
        (want,) = ours.search([q], 3)
        got = [(rows[int(h.docid)]["contents"], float(h.score)) for h in hits]
        assert got == [(h.contents, h.score) for h in want]
    with pytest.raises(ConfigError, match="not empty"):
        export_row_id_lucene(tiny_corpus, tmp_path / "sr1")
