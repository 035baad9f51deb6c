"""BM25 top-k in one compiled pass with numba, where numba is installed (``pip install numba``).

bm25s's own numba backend (``BM25.retrieve(backend_selection="numba")``) is several times faster
than scoring with numpy, but sums float32 weights and orders ties its own way: its top-3 differed
from :func:`harness.retrieval.bm25.top_k_rows` on 4 of 1,000 mini-multihop queries, which the exact
regression layers would refuse. This kernel is written by hand for that reason: the same float64
additions in the same order as :meth:`~harness.retrieval.bm25.Bm25sRetriever.scores` (each term's
weight ``float64(w) * count``, terms in order of first occurrence), so the scores are bit-identical,
and the same top-k rule (positive scores, highest first, ties by lower row).
"""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np

_KERNEL: Any = None


def available() -> bool:
    """Whether numba is installed (checked without importing it)."""
    return importlib.util.find_spec("numba") is not None


def kernel() -> Any:
    """The compiled ``score_top_k`` (compiled on first use, a few seconds, and cached on disk by numba)."""
    global _KERNEL
    if _KERNEL is None:
        import numba

        @numba.njit(nogil=True, cache=True)  # compiled once per machine, then read back
        def score_top_k(indptr, indices, data, terms, counts, n_docs, k):  # pragma: no cover - compiled
            scores = np.zeros(n_docs, dtype=np.float64)
            for i in range(len(terms)):
                t = terms[i]
                c = counts[i]
                for j in range(indptr[t], indptr[t + 1]):
                    w = np.float64(data[j])
                    if c > 1:
                        w = w * c
                    scores[indices[j]] += w
            rows = np.empty(k, dtype=np.int64)
            vals = np.empty(k, dtype=np.float64)
            m = 0
            for r in range(n_docs):  # ascending rows: an equal score never displaces an earlier row
                s = scores[r]
                if s <= 0.0 or (m == k and s <= vals[k - 1]):
                    continue
                p = m if m < k else k - 1
                while p > 0 and vals[p - 1] < s:
                    rows[p] = rows[p - 1]
                    vals[p] = vals[p - 1]
                    p -= 1
                rows[p] = r
                vals[p] = s
                if m < k:
                    m += 1
            return rows[:m], vals[:m]

        _KERNEL = score_top_k
    return _KERNEL
