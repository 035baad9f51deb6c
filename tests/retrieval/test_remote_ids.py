"""Our client against servers that do not send our passage ids, as Search-R1's own does.

Upstream fact, ``PeterGriffinJin/Search-R1@a14dc3a4ffc6fe88c1e95038d9738e21ba3f7a06:
search_r1/search/retrieval_server.py`` (``BM25Retriever._search``, ``load_docs``): over a Lucene
index with stored raw documents a hit's document is ``{"title", "text", "contents"}`` (no id);
otherwise it is the corpus row at ``int(hit.docid)``, so the index's ids must be row numbers and
the document's ``id`` is whatever the corpus row says (a row number, in the layout upstream's
indexing builds). The stand-ins below answer in those shapes from our in-process bm25s ranking.
"""

from __future__ import annotations

import logging

import pytest

from harness.eval.remote import protocol_retriever, remote_protocol
from harness.eval.scoring import RunScoring
from harness.protocol import CorpusRef, Protocol
from harness.retrieval.bm25 import Bm25sRetriever
from harness.retrieval.client import RetrievalClient
from harness.retrieval.evaluate import recall_at_ks
from harness.types import Evidence, QAExample, Trajectory, Turn, is_unmapped_id, split_contents
from tests.retrieval.test_server import Served

pytestmark = pytest.mark.integration

QUERIES = ["capital of France", "cats and mice", "python programming", "zebra"]


def searchr1_stand_in(corpus, shape: str):
    """A FastAPI app with upstream's ``/retrieve`` reply shapes (no ``GET /health``)."""
    from fastapi import FastAPI

    local = Bm25sRetriever(corpus)
    ids = [corpus.id_at(r) for r in range(len(corpus))]
    order = list(reversed(ids))  # a server whose corpus is ours in another order

    def doc(h):
        if shape == "lucene-raw":
            title, text = split_contents(h.contents)
            return {"title": title, "text": text, "contents": h.contents}
        if shape == "rows":
            return {"id": str(ids.index(h.doc_id)), "contents": h.contents}
        if shape == "rows-reordered":
            return {"id": str(order.index(h.doc_id)), "contents": h.contents}
        if shape == "foreign":
            return {"id": str(ids.index(h.doc_id)), "contents": h.contents + " (edited)"}
        raise AssertionError(shape)

    app = FastAPI()

    @app.post("/retrieve")
    def retrieve(body: dict):
        hits = local.search(body["queries"], body["topk"])
        return {"result": [[{"document": doc(h), "score": h.score} for h in hs] for hs in hits]}

    return app


@pytest.mark.parametrize("shape", ["lucene-raw", "rows", "rows-reordered"])
def test_hits_without_our_ids_map_back_to_our_passage_ids(tiny_corpus, shape):
    s = Served(app=searchr1_stand_in(tiny_corpus, shape))
    try:
        with RetrievalClient(s.url + "/retrieve", corpus=tiny_corpus) as client:
            got = client.search(QUERIES, 3)
    finally:
        s.stop()
    want = Bm25sRetriever(tiny_corpus).search(QUERIES, 3)
    assert got == want  # ids, texts and scores
    assert [h.doc_id for h in got[0]] == ["d5", "d1", "d2"]


def test_row_ids_are_read_as_rows_only_when_the_row_has_the_hits_text(tiny_corpus):
    """Row 0 of the reordered server is our last passage: read as our row 0 it would be d1."""
    s = Served(app=searchr1_stand_in(tiny_corpus, "rows-reordered"))
    try:
        with RetrievalClient(s.url + "/retrieve", corpus=tiny_corpus) as client:
            (hits,) = client.search(["python programming"], 1)
    finally:
        s.stop()
    assert hits[0].doc_id == "d4"


def tiny_protocol(corpus) -> Protocol:
    ref = CorpusRef(id="tiny", content_hash=corpus.spec.content_hash, n_passages=len(corpus))
    return Protocol(name="tiny", corpus=ref)


def test_a_protocol_run_against_a_row_id_server_scores_recall_on_our_ids(tiny_corpus):
    s = Served(app=searchr1_stand_in(tiny_corpus, "rows"))
    try:
        with RetrievalClient(s.url) as probe:
            proto = remote_protocol(tiny_protocol(tiny_corpus), probe)
        assert proto.remote.described_by == "nobody"
        retriever = protocol_retriever(proto, tiny_corpus.path, s.url + "/retrieve")
        try:
            (hits,) = retriever.search(["capital of France"], 3)
        finally:
            retriever.close()
    finally:
        s.stop()
    assert [h.doc_id for h in hits] == ["d5", "d1", "d2"]
    t = Trajectory("q1", "tiny", "capital of France?", ["Paris"], prediction="Paris")
    t.turns.append(Turn(index=0, kind="retrieve", doc_ids=[h.doc_id for h in hits]))
    m = RunScoring.of(tiny_protocol(tiny_corpus)).score(t, ["d1"])
    assert m["retrieval_recall@3"] == 1.0 and m["evidence_recall"] == 1.0


def test_unmappable_hits_are_said_once_and_retrieval_metrics_are_not_computed(
    tiny_corpus, caplog, monkeypatch
):
    monkeypatch.setattr(logging.getLogger("harness.retrieval"), "propagate", True)
    s = Served(app=searchr1_stand_in(tiny_corpus, "foreign"))
    try:
        with (
            caplog.at_level(logging.WARNING, logger="harness.retrieval"),
            RetrievalClient(s.url + "/retrieve", corpus=tiny_corpus) as client,
        ):
            first = client.search(QUERIES, 3)
            client.search(QUERIES, 3)
            gold = (Evidence(title="Paris", passage_id="d1"),)
            examples = [QAExample("q1", "tiny", "test", "capital of France", ("Paris",), supporting=gold)]
            (rec,) = recall_at_ks(client, "tiny", examples, [3])
    finally:
        s.stop()
    warned = [r for r in caplog.records if "is no passage of corpus" in r.getMessage()]
    assert len({id(r) for r in warned}) == 1  # one record (caplog may hold it twice)
    hit = first[0][0]
    assert is_unmapped_id(hit.doc_id) and hit.contents.endswith(" (edited)")  # the text is kept
    assert rec.recall != rec.recall and rec.n == 1  # NaN: not computable, not 0.0
    t = Trajectory("q1", "tiny", "capital of France?", ["Paris"], prediction="Paris")
    t.turns.append(Turn(index=0, kind="retrieve", doc_ids=[h.doc_id for h in first[0]]))
    m = RunScoring.of(tiny_protocol(tiny_corpus)).score(t, ["d1"])
    assert "retrieval_recall@3" not in m and "evidence_recall" not in m and m["em"] == 1.0


def test_without_a_corpus_an_id_less_hit_is_unmapped_not_an_error(tiny_corpus):
    s = Served(app=searchr1_stand_in(tiny_corpus, "lucene-raw"))
    try:
        with RetrievalClient(s.url + "/retrieve") as client:
            (hits,) = client.search(["berlin"], 1)
    finally:
        s.stop()
    assert (
        is_unmapped_id(hits[0].doc_id) and hits[0].contents == '"Berlin"\nBerlin is the capital of Germany.'
    )
