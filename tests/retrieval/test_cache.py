"""Result cache: keyed by (index id, query, k), persistent across instances, thread-safe, counted."""

from __future__ import annotations

import threading

import pytest

from harness.retrieval.cache import CachedRetriever, ResultCache
from harness.types import Hit
from tests.retrieval.helpers import FakeRetriever

RANKS = {"q1": [("a", 3.0), ("b", 2.0)], "q2": [("c", 1.5)], "q3": []}


def test_second_search_is_served_from_the_cache():
    inner = FakeRetriever.make(RANKS)
    r = CachedRetriever(inner, ResultCache())
    first = r.search(["q1", "q2"], 2)
    again = r.search(["q2", "q1"], 2)
    assert inner.calls == [(["q1", "q2"], 2)]
    assert again == [first[1], first[0]]
    assert (r.cache.hits, r.cache.misses) == (2, 2)
    assert r.cache.stats().hit_rate == 0.5


def test_key_includes_k_and_index_id_and_duplicates_are_searched_once():
    inner = FakeRetriever.make(RANKS)
    cache = ResultCache()
    r = CachedRetriever(inner, cache)
    r.search(["q1"], 2)
    r.search(["q1"], 1)
    assert inner.calls == [(["q1"], 2), (["q1"], 1)]
    out = r.search(["q3", "q2", "q3"], 2)
    assert out == [[], [Hit("c", '"c"\ntext of c', 1.5)], []]
    assert inner.calls[-1] == (["q3", "q2"], 2)
    assert cache.get_many("other-index", ["q1"], 2) == [None]


def test_persistent_cache_survives_a_new_instance(tmp_path):
    path = tmp_path / "results.sqlite"
    inner = FakeRetriever.make(RANKS)
    CachedRetriever(inner, ResultCache(path)).search(["q1", "q3"], 2)
    fresh_inner = FakeRetriever.make({})
    r = CachedRetriever(fresh_inner, ResultCache(path))
    out = r.search(["q1", "q3"], 2)
    assert fresh_inner.calls == []
    assert [[h.doc_id for h in hs] for hs in out] == [["a", "b"], []]
    assert out[0][0].score == 3.0 and out[0][0].contents == '"a"\ntext of a'
    assert r.cache.hits == 2


def test_memory_lru_is_bounded(tmp_path):
    cache = ResultCache(max_memory=2)
    for q in ("x", "y", "z"):
        cache.put_many("i", 1, [(q, [])])
    assert cache.get_many("i", ["x", "y", "z"], 1) == [None, [], []]


def test_threads_share_one_cache(tmp_path):
    inner = FakeRetriever.make({f"q{i}": [(f"d{i}", float(i))] for i in range(50)})
    r = CachedRetriever(inner, ResultCache(tmp_path / "c.sqlite"))
    errors: list[BaseException] = []

    def work():
        try:
            for i in range(50):
                assert r.search([f"q{i}"], 1)[0][0].doc_id == f"d{i}"
        except BaseException as e:  # noqa: BLE001 - collected and re-raised in the main thread
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert r.cache.hits + r.cache.misses == 200
    assert r.cache.misses >= 50


def test_wrapper_keeps_identity_and_validation():
    inner = FakeRetriever.make(RANKS)
    r = CachedRetriever(inner)
    assert (r.index_id, r.spec, r.name) == (inner.index_id, inner.spec, "bm25s")
    from harness.retrieval.base import EmptyQueryError

    with pytest.raises(EmptyQueryError):
        r.search([" "], 1)
