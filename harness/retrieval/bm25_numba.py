"""BM25 top-k in one compiled pass with numba, where numba is installed (``pip install numba``).

bm25s's own numba backend (``BM25.retrieve(backend_selection="numba")``) is fast, but sums float32
weights and orders ties its own way: its top-3 differed from :func:`harness.retrieval.bm25.top_k_rows`
on 4 of 1,000 mini-multihop queries in one count (2026-11-28), and its top-3 rows on 15 of 1,000 in
``tests/bench/test_bench_retrieval.py``'s, which the exact regression layers would refuse. This kernel is
written by hand for that reason: the same float64 additions in the same order as
:meth:`~harness.retrieval.bm25.Bm25sRetriever.scores` (each term's weight ``float64(w) * count``,
terms in order of first occurrence), so the scores are bit-identical, and the same top-k rule
(positive scores, highest first, ties by lower row).

As bm25s's does, it takes a whole batch of queries in one call (no Python between queries) and
ranks only the passages a query's terms touch (not every passage of the corpus); a passage's score
is reset after its query, so one score array serves the batch.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Sequence
from typing import Any

import numpy as np

_KERNEL: Any = None


@functools.cache
def available() -> bool:
    """Whether numba is installed (checked without importing it, once a process: ``find_spec``
    walks ``sys.path``; asked on every search of a one-query ``serve-retriever`` request it took
    0.46 ms a call under yappi's profiler, more than the BM25 scoring itself there)."""
    return importlib.util.find_spec("numba") is not None


def kernel() -> Any:
    """The compiled ``score_top_k_many`` (compiled on first use, a few seconds, and cached on disk
    by numba): ``(indptr, indices, data, terms, counts, starts, n_docs, k) -> (rows, vals, sizes)``,
    query ``q``'s distinct terms and their counts being ``terms[starts[q]:starts[q + 1]]``; row
    ``q`` of ``rows``/``vals`` holds its ``sizes[q]`` hits, best first."""
    global _KERNEL
    if _KERNEL is None:
        import numba

        @numba.njit(nogil=True, cache=True)  # compiled once per machine, then read back
        def score_top_k_many(indptr, indices, data, terms, counts, starts, n_docs, k):  # pragma: no cover
            nq = len(starts) - 1
            out_rows = np.full((nq, k), -1, dtype=np.int64)
            out_vals = np.zeros((nq, k), dtype=np.float64)
            sizes = np.zeros(nq, dtype=np.int64)
            most = 0  # the most postings one query reads: how many passages it can touch
            for q in range(nq):
                total = 0
                for i in range(starts[q], starts[q + 1]):
                    total += indptr[terms[i] + 1] - indptr[terms[i]]
                most = max(most, total)
            scores = np.zeros(n_docs, dtype=np.float64)
            touched = np.empty(most, dtype=np.int64)
            for q in range(nq):
                n_touched = 0
                for i in range(starts[q], starts[q + 1]):
                    t = terms[i]
                    c = counts[i]
                    for j in range(indptr[t], indptr[t + 1]):
                        w = np.float64(data[j])
                        if c > 1:
                            w = w * c
                        d = indices[j]
                        # listed at its first posting (a sum back at 0 lists it twice: harmless, below);
                        # written every time and counted only then, without a branch to mispredict
                        touched[n_touched] = d
                        n_touched += scores[d] == 0.0
                        scores[d] += w
                rows = out_rows[q]
                vals = out_vals[q]
                m = 0
                for ti in range(n_touched):
                    r = touched[ti]
                    s = scores[r]
                    scores[r] = 0.0  # ready for the next query (a second listing then reads 0)
                    if s <= 0.0:
                        continue
                    if m == k and (s < vals[k - 1] or (s == vals[k - 1] and r > rows[k - 1])):
                        continue
                    p = m if m < k else k - 1
                    while p > 0 and (vals[p - 1] < s or (vals[p - 1] == s and rows[p - 1] > r)):
                        rows[p] = rows[p - 1]
                        vals[p] = vals[p - 1]
                        p -= 1
                    rows[p] = r
                    vals[p] = s
                    if m < k:
                        m += 1
                sizes[q] = m
            return out_rows, out_vals, sizes

        _KERNEL = score_top_k_many
    return _KERNEL


def top_k_many(
    indptr: np.ndarray,
    indices: np.ndarray,
    data: np.ndarray,
    term_counts: Sequence[dict[int, int]],
    n_docs: int,
    k: int,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(rows, scores)`` of each query's ``k`` best passages (what ``top_k_rows(scores(q), k)``
    gives), the queries given as their term counts (``Bm25sRetriever.term_counts``), in one call."""
    lengths = np.fromiter((len(c) for c in term_counts), dtype=np.int64, count=len(term_counts))
    starts = np.zeros(len(term_counts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    total = int(starts[-1])
    terms = np.fromiter((t for c in term_counts for t in c), dtype=np.int64, count=total)
    counts = np.fromiter((n for c in term_counts for n in c.values()), dtype=np.int64, count=total)
    rows, vals, sizes = kernel()(indptr, indices, data, terms, counts, starts, n_docs, k)
    return [(rows[q, : sizes[q]], vals[q, : sizes[q]]) for q in range(len(term_counts))]
