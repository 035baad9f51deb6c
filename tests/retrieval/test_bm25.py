"""bm25s backend: exact Lucene BM25 scores on a hand-made corpus, search semantics, and the index
life cycle (built once, reused, rebuilt on mismatch, refused when corrupt)."""

from __future__ import annotations

import json
import logging
import math

import numpy as np
import pytest

from harness.errors import ConfigError, RetrievalIndexError
from harness.retrieval.base import EmptyQueryError
from harness.retrieval.bm25 import Analyzer, Bm25sRetriever, top_k_rows
from harness.retrieval.index import META_FILE
from harness.retrieval.spec import Bm25sSpec

# Terms of each TINY passage after the analyzer (lowercase, \w\w+, 33 stopwords, porter):
#   d1 [pari pari capit franc] (4)          d2 [berlin berlin capit germani] (4)
#   d3 [cat cat sat mat cat chase mice] (7)  d4 [python program languag python program languag creat guido van rossum] (10)
#   d5 [franc franc countri europ it capit citi pari franc ha presid] (11)
N, AVGDL, K1, B = 5, (4 + 4 + 7 + 10 + 11) / 5, 0.9, 0.4


def lucene_bm25(tf: int, df: int, dl: int) -> float:
    idf = math.log(1 + (N - df + 0.5) / (df + 0.5))
    return idf * tf / (tf + K1 * (1 - B + B * dl / AVGDL))


def test_analyzer_terms():
    a = Analyzer("porter", "en")
    assert a('"Paris"\nParis is the capital of France.') == ["pari", "pari", "capit", "franc"]
    assert a("The cat sat on the mat. Cats chase mice.") == ["cat", "sat", "mat", "cat", "chase", "mice"]
    assert a("the of and is") == []
    assert Analyzer(None, None)("The Cats") == ["the", "cats"]
    with pytest.raises(ConfigError, match="unknown stemmer 'klingon'"):
        Analyzer("klingon", "en")


def test_scores_match_hand_computed_bm25(tiny_corpus):
    r = Bm25sRetriever(tiny_corpus)
    hits = r.search(["capital of France"], 5)[0]
    # capit: df 3 (d1 d2 d5); franc: df 2 (d1 tf 1, d5 tf 3)
    expected = {
        "d5": lucene_bm25(1, 3, 11) + lucene_bm25(3, 2, 11),
        "d1": lucene_bm25(1, 3, 4) + lucene_bm25(1, 2, 4),
        "d2": lucene_bm25(1, 3, 4),
    }
    assert [h.doc_id for h in hits] == ["d5", "d1", "d2"]  # d3, d4 share no term: not returned
    for h in hits:
        assert h.score == pytest.approx(expected[h.doc_id], rel=1e-6)
    assert hits[0].contents == tiny_corpus.get("d5")


def test_right_document_first(tiny_corpus):
    r = Bm25sRetriever(tiny_corpus)
    top = [
        hs[0].doc_id for hs in r.search(["who created the Python language?", "cats and mice", "Berlin"], 1)
    ]
    assert top == ["d4", "d3", "d2"]


def test_repeated_query_terms_count_like_lucene(tiny_corpus):
    r = Bm25sRetriever(tiny_corpus)
    once = r.search(["germany"], 1)[0][0].score
    twice = r.search(["germany germany"], 1)[0][0].score
    assert twice == pytest.approx(2 * once)


@pytest.mark.parametrize(
    "query", ["capital of France", "France france paris capital, Paris!", "cats mice python berlin", "zebra"]
)
def test_one_bincount_and_a_term_at_a_time_give_bit_identical_scores(tiny_corpus, monkeypatch, query):
    from harness.retrieval import bm25

    r = Bm25sRetriever(tiny_corpus)
    together = r.scores(query)
    monkeypatch.setattr(bm25, "_BINCOUNT_POSTINGS", 0)  # the loop, for postings too long to hold twice
    assert np.array_equal(together, r.scores(query))
    assert together.shape == (5,) and together.dtype == np.float64


def test_no_matching_term_gives_no_hits_and_blank_query_is_an_error(tiny_corpus):
    r = Bm25sRetriever(tiny_corpus)
    assert r.search(["the of and", "zebra quantum"], 3) == [[], []]
    assert r.search([], 3) == []
    with pytest.raises(EmptyQueryError) as e:
        r.search(["paris", "  ", ""], 3)
    assert e.value.positions == [1, 2]
    assert "position(s) 1, 2" in str(e.value)
    with pytest.raises(ConfigError, match="k must be an integer >= 1"):
        r.search(["paris"], 0)
    with pytest.raises(ConfigError, match="not a single string"):
        r.search("paris", 3)  # type: ignore[arg-type]


def test_k_larger_than_corpus(tiny_corpus):
    hits = Bm25sRetriever(tiny_corpus).search(["paris"], 100)[0]
    assert [h.doc_id for h in hits] == ["d1", "d5"]


def test_top_k_is_exact_with_ties():
    scores = np.array([0.0, 2.0, 5.0, 2.0, 2.0, 1.0])
    rows, vals = top_k_rows(scores, 3)
    assert rows.tolist() == [2, 1, 3] and vals.tolist() == [5.0, 2.0, 2.0]
    rows, _ = top_k_rows(scores, 10)
    assert rows.tolist() == [2, 1, 3, 4, 5]


def test_index_is_built_once_and_described(tiny_corpus, cache_dir):
    r = Bm25sRetriever(tiny_corpus)
    meta = json.loads((r.index_dir / META_FILE).read_text())
    assert r.index_dir == cache_dir / "indexes" / r.index_id
    assert r.index_id.startswith("bm25s-") and meta["index_id"] == r.index_id
    assert meta["retriever"] == {
        "kind": "bm25s",
        "k1": 0.9,
        "b": 0.4,
        "method": "lucene",
        "stemmer": "porter",
        "stopwords": "en",
    }
    assert meta["corpus"]["content_hash"] == tiny_corpus.spec.content_hash
    assert meta["n_docs"] == 5
    assert "PyStemmer porter" in meta["analyzer"] and "stopwords en (33)" in meta["analyzer"]
    assert set(meta["libraries"]) == {"bm25s", "PyStemmer", "numpy"}
    stamp = (r.index_dir / META_FILE).stat().st_mtime_ns
    again = Bm25sRetriever(tiny_corpus, mode="load")
    assert (again.index_dir / META_FILE).stat().st_mtime_ns == stamp
    assert again.search(["paris"], 1)[0][0].doc_id == "d1"


def test_index_id_depends_on_content_and_settings(tiny_corpus):
    a = Bm25sRetriever(tiny_corpus).index_id
    b = Bm25sRetriever(tiny_corpus, Bm25sSpec(k1=1.2)).index_id
    c = Bm25sRetriever(tiny_corpus, Bm25sSpec(stemmer=None)).index_id
    assert len({a, b, c}) == 3


def test_load_only_without_index_is_an_error(tiny_corpus):
    with pytest.raises(RetrievalIndexError, match=r"no bm25s index at .*harness index --retriever bm25s"):
        Bm25sRetriever(tiny_corpus, mode="load")


def _tamper(index_dir, **changes):
    path = index_dir / META_FILE
    meta = json.loads(path.read_text())
    meta.update(changes)
    path.write_text(json.dumps(meta))


def test_mismatched_metadata_rebuilds_with_a_message_or_errors(tiny_corpus, caplog):
    r = Bm25sRetriever(tiny_corpus)
    _tamper(r.index_dir, n_docs=4)
    with pytest.raises(
        RetrievalIndexError, match=r"does not match: n_docs: index has 4, expected 5.*--force"
    ):
        Bm25sRetriever(tiny_corpus, mode="load")
    corpus_meta = dict(tiny_corpus.spec.model_dump(), content_hash="0" * 64)
    _tamper(r.index_dir, n_docs=5, corpus=corpus_meta)
    with caplog.at_level(logging.WARNING, logger="harness.retrieval"):
        rebuilt = Bm25sRetriever(tiny_corpus)
    assert "corpus content hash: index has 000000000000..." in caplog.text and "Rebuilding" in caplog.text
    assert json.loads((rebuilt.index_dir / META_FILE).read_text())["corpus"]["content_hash"] == (
        tiny_corpus.spec.content_hash
    )
    assert rebuilt.search(["paris"], 1)[0][0].doc_id == "d1"


def test_corrupt_index_is_a_clear_error(tiny_corpus):
    r = Bm25sRetriever(tiny_corpus)
    (r.index_dir / "indptr.csc.index.npy").write_bytes(b"not numpy")
    with pytest.raises(RetrievalIndexError, match=r"corrupt bm25s index .*--retriever bm25s --force"):
        Bm25sRetriever(tiny_corpus)
    (r.index_dir / META_FILE).write_text("{broken")
    with pytest.raises(RetrievalIndexError, match=r"index.json: corrupt index metadata"):
        Bm25sRetriever(tiny_corpus)
    (r.index_dir / META_FILE).unlink()
    with pytest.raises(RetrievalIndexError, match=r"not an index \(no index.json\)"):
        Bm25sRetriever(tiny_corpus)
    fixed = Bm25sRetriever(tiny_corpus, mode="rebuild")
    assert fixed.search(["berlin"], 1)[0][0].doc_id == "d2"


def test_explicit_index_dir(tiny_corpus, tmp_path):
    r = Bm25sRetriever(tiny_corpus, index_dir=tmp_path / "my-index")
    assert (tmp_path / "my-index" / META_FILE).is_file()
    assert r.search(["mice"], 1)[0][0].doc_id == "d3"


def _token_sum_scores(r, query):
    """The reference: every query token's postings summed (np.bincount), repeats included."""
    import numpy as np

    tids = r.term_ids(query)
    rows = np.concatenate([r._indices[r._indptr[t] : r._indptr[t + 1]] for t in tids])
    vals = np.concatenate([r._data[r._indptr[t] : r._indptr[t + 1]] for t in tids])
    return np.bincount(rows, weights=vals, minlength=len(r.corpus))


def test_merged_terms_score_like_the_token_sum(tiny_corpus):
    import numpy as np

    r = Bm25sRetriever(tiny_corpus)
    for q in ["capital of France", "python programming language guido", "cat mat mice"]:
        assert np.array_equal(r.scores(q), _token_sum_scores(r, q))  # no repeats: bit-identical
    q = "paris paris france capital paris " * 50
    assert r.term_counts(q) == {r._vocab["pari"]: 150, r._vocab["franc"]: 50, r._vocab["capit"]: 50}
    np.testing.assert_allclose(r.scores(q), _token_sum_scores(r, q), rtol=1e-12)


def test_a_long_query_reads_each_term_once(tiny_corpus, monkeypatch):
    """A 100k-token query of 3 distinct terms reads 3 posting lists, not 100k."""
    import numpy as np

    r = Bm25sRetriever(tiny_corpus)
    reads = []
    indices = r._indices

    class Counting:
        def __getitem__(self, key):
            reads.append(key)
            return indices[key]

    monkeypatch.setattr(r, "_indices", Counting())
    scores = r.scores("paris germany cats " * 33_334)
    assert len(reads) == 3
    assert np.argmax(scores) == 2  # d3: "cat", "cats" both stem to "cat" -> 2 occurrences


@pytest.mark.skipif(
    not __import__("harness.retrieval.bm25_numba", fromlist=["available"]).available(),
    reason="numba is not installed (pip install numba)",
)
@pytest.mark.parametrize("k", [1, 2, 3, 5, 100])
def test_the_numba_kernel_gives_the_numpy_scores_and_top_k(tiny_corpus, k):
    """harness.retrieval.bm25_numba: bit-identical scores and the same top-k rule (ties by row),
    a batch of queries in one call (a query without index terms included)."""
    from harness.retrieval.bm25_numba import top_k_many

    r = Bm25sRetriever(tiny_corpus)
    queries = ["capital of France", "France france paris capital, Paris!", "the", "cats mice python berlin"]
    got = top_k_many(r._indptr, r._indices, r._data, [r.term_counts(q) for q in queries], len(tiny_corpus), k)
    for q, (rows, vals) in zip(queries, got, strict=True):
        want_rows, want_vals = top_k_rows(r.scores(q), k)
        assert np.array_equal(rows, want_rows) and np.array_equal(vals, want_vals)
    scores = np.array([0.0, 2.0, 1.0, 2.0, 2.0, -1.0, 2.0])  # ties: lower row first; none below zero
    indptr = np.array([0, 7, 14], dtype=np.int64)  # term 1: the same postings in descending row order
    indices = np.concatenate([np.arange(7), np.arange(7)[::-1]]).astype(np.int32)
    data = np.concatenate([scores, scores[::-1]]).astype(np.float32)
    for term in (0, 1):
        ((rows, vals),) = top_k_many(indptr, indices, data, [{term: 1}], 7, 3)
        assert rows.tolist() == [1, 3, 4] and vals.tolist() == [2.0, 2.0, 2.0]
        assert rows.tolist() == top_k_rows(scores, 3)[0].tolist()
