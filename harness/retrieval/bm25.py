"""BM25 with bm25s: the embedded default retriever (no Java, no torch).

Scoring is Lucene's BM25 (``method="lucene"``, k1=0.9, b=0.4: Anserini's defaults). The analyzer
is the same at index and query time and is recorded in the index metadata, since bm25s itself
does not save it: lowercase, tokens ``(?u)\\b\\w\\w+\\b``, stopwords (bm25s's English list, which is
Lucene's 33 words), PyStemmer ``porter`` (Lucene's PorterStemFilter; ``english`` is Porter2).

Search semantics follow Lucene: only passages sharing at least one term with the query are
returned (so a query of stopwords only returns no hits), and ties are broken by corpus row (file
order). A query term repeated n times counts n times, as in Anserini (pyserini's searcher): its
``BagOfWordsQueryGenerator`` merges repeated terms into one clause boosted by the count
(``BoostQuery(TermQuery(t), n)``), so the term's BM25 weight is multiplied by n. :meth:`scores`
does the same: it merges repeated terms first and reads each distinct term's postings once.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np

from harness.errors import ConfigError
from harness.retrieval.base import Retriever, make_index_id
from harness.retrieval.corpus import Corpus
from harness.retrieval.index import IndexMeta, LoadMode, corrupt, ensure_index, library_versions
from harness.retrieval.paths import index_dir_for
from harness.retrieval.spec import Bm25sSpec
from harness.types import Hit

log = logging.getLogger("harness.retrieval")

TOKEN_PATTERN = r"(?u)\b\w\w+\b"


class Analyzer:
    """Text -> index terms: lowercase, regex tokens, stopword removal, stemming."""

    def __init__(self, stemmer: str | None, stopwords: str | None):
        import bm25s.tokenization
        import Stemmer

        try:
            self.stopwords = frozenset(bm25s.tokenization.Tokenizer(stopwords=stopwords).stopwords)
        except ValueError as e:
            raise ConfigError(f"unknown stopword list {stopwords!r} ({e})") from None
        self.stemmer_name = stemmer
        self._stem: Callable[[list[str]], list[str]] | None = None
        if stemmer is not None:
            if stemmer not in Stemmer.algorithms():
                raise ConfigError(
                    f"unknown stemmer {stemmer!r}; PyStemmer has: {', '.join(Stemmer.algorithms())}"
                )
            self._stem = Stemmer.Stemmer(stemmer).stemWords
        self._stem_lock = threading.Lock()  # a PyStemmer object is not safe across threads
        self._split = re.compile(TOKEN_PATTERN).findall
        self.stopwords_name = stopwords

    def describe(self) -> str:
        return (
            f"lowercase; tokens {TOKEN_PATTERN}; stopwords {self.stopwords_name} ({len(self.stopwords)}); "
            f"stemmer PyStemmer {self.stemmer_name}"
        )

    def __call__(self, text: str) -> list[str]:
        tokens = [t for t in self._split(text.lower()) if t not in self.stopwords]
        if self._stem is None:
            return tokens
        with self._stem_lock:
            return self._stem(tokens)


def top_k_rows(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows with the ``k`` highest positive scores, best first, ties by lower row.

    Exact and deterministic (unlike a bare argpartition, whose choice among tied scores at the
    cut-off is arbitrary).
    """
    rows = np.flatnonzero(scores > 0)
    if len(rows) > k:
        cand = scores[rows]
        kth = np.partition(cand, len(cand) - k)[len(cand) - k]
        rows = rows[cand >= kth]
    vals = scores[rows]
    order = np.lexsort((rows, -vals))[:k]
    return rows[order], vals[order]


_BINCOUNT_POSTINGS = 4_000_000  # postings (48 MB as rows and weights) scored in one np.bincount


class Bm25sRetriever(Retriever):
    """bm25s over a :class:`Corpus`; the index is built once and reused (see ``index.py``)."""

    def __init__(
        self,
        corpus: Corpus,
        spec: Bm25sSpec | None = None,
        *,
        index_dir: str | Path | None = None,
        mode: LoadMode = "auto",
        progress: bool = False,
    ):
        import bm25s

        self.corpus = corpus
        self._spec = spec or Bm25sSpec()
        self._index_id = make_index_id(corpus.spec, self._spec)
        self.index_dir = Path(index_dir) if index_dir else index_dir_for(self._index_id)
        self.analyzer = Analyzer(self._spec.stemmer, self._spec.stopwords)
        self.progress = progress
        expected = IndexMeta(
            index_id=self._index_id,
            retriever=self._spec,
            corpus=corpus.spec,
            n_docs=len(corpus),
            analyzer=self.analyzer.describe(),
            libraries=library_versions("bm25s", "PyStemmer", "numpy"),
        )
        self.meta = ensure_index(self.index_dir, expected, self._build, mode=mode)
        try:
            self._bm25 = bm25s.BM25.load(str(self.index_dir), mmap=True, load_vocab=True, show_progress=False)
            self._data = np.asarray(self._bm25.scores["data"])
            self._indices = np.asarray(self._bm25.scores["indices"])
            self._indptr = np.asarray(self._bm25.scores["indptr"])
            n_docs = int(self._bm25.scores["num_docs"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise corrupt(self.index_dir, "bm25s index", e, "bm25s") from None
        if n_docs != len(corpus) or len(self._indptr) < 2:
            raise corrupt(
                self.index_dir,
                "bm25s index",
                ValueError(f"index has {n_docs} documents, corpus has {len(corpus)}"),
                "bm25s",
            )
        self._vocab: dict[str, int] = self._bm25.vocab_dict

    @property
    def spec(self) -> Bm25sSpec:
        return self._spec

    @property
    def index_id(self) -> str:
        return self._index_id

    @property
    def corpus_spec(self):
        return self.corpus.spec

    def _build(self, tmp: Path) -> None:
        import bm25s
        from tqdm import tqdm

        vocab: dict[str, int] = {}
        ids: list[list[int]] = []
        with tqdm(
            total=len(self.corpus), desc="bm25s: tokenize", unit=" passages", disable=not self.progress
        ) as bar:
            for batch in self.corpus.iter_batches(4096):
                for text in batch.contents:
                    ids.append([vocab.setdefault(t, len(vocab)) for t in self.analyzer(text)])
                bar.update(len(batch.ids))
        model = bm25s.BM25(k1=self._spec.k1, b=self._spec.b, method=self._spec.method)
        model.index((ids, vocab), show_progress=self.progress)
        model.save(str(tmp))

    def term_ids(self, query: str) -> list[int]:
        return [self._vocab[t] for t in self.analyzer(query) if t in self._vocab]

    def term_counts(self, query: str) -> dict[int, int]:
        """The query's distinct index terms -> how often each occurs, in order of first occurrence."""
        counts: dict[int, int] = {}
        for tid in self.term_ids(query):
            counts[tid] = counts.get(tid, 0) + 1
        return counts

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every passage for ``query`` (float64, length ``len(corpus)``).

        Each distinct term's postings are read once and added into one score array, weighted by
        the term's count in the query (Anserini's boost, see the module docstring). Memory is the
        score array plus one posting list, whatever the query's length. (Concatenating the postings
        of every query token, repeats included, grew by ~8 MB per KB of query text.) For a query
        without repeated terms the additions happen in the same order as a sum over the tokens, so
        the scores are bit-identical to it; a term repeated n times adds ``n * w`` once instead of
        ``w`` n times, equal up to float rounding.
        """
        spans = [
            (int(self._indptr[tid]), int(self._indptr[tid + 1]), count)
            for tid, count in self.term_counts(query).items()
        ]
        if sum(end - start for start, end, _ in spans) <= _BINCOUNT_POSTINGS:
            # one np.bincount over the terms' postings in term order: each row's weights are added
            # in the same order as the loop below, so the scores are bit-identical, 4-5x faster
            # than a fancy-index add per term (1,000 mini-multihop queries: 0.43 -> 0.10 s)
            if not spans:
                return np.zeros(len(self.corpus))
            rows = np.concatenate([self._indices[start:end] for start, end, _ in spans])
            weights = np.concatenate([self._weights(start, end, count) for start, end, count in spans])
            return np.bincount(rows, weights=weights, minlength=len(self.corpus))
        out = np.zeros(len(self.corpus))
        for start, end, count in spans:  # postings too long to hold twice: one term at a time
            # rows are unique within one term's postings, so a fancy-index add is exact
            out[self._indices[start:end]] += self._weights(start, end, count)
        return out

    def _weights(self, start: int, end: int, count: int) -> np.ndarray:
        """One term's posting weights as float64, times its count in the query."""
        weights = self._data[start:end].astype(np.float64)
        if count > 1:
            weights *= count
        return weights

    def _search(self, queries: list[str], k: int) -> list[list[Hit]]:
        from harness.retrieval import bm25_numba

        if bm25_numba.available():  # the same scores and top-k, compiled (harness.retrieval.bm25_numba)
            counts = [self.term_counts(q) for q in queries]
            found = bm25_numba.top_k_many(
                self._indptr, self._indices, self._data, counts, len(self.corpus), k
            )
        else:
            found = [top_k_rows(self.scores(q), k) for q in queries]
        return [
            [self.corpus.hit(int(r), float(v)) for r, v in zip(rows, vals, strict=True)]
            for rows, vals in found
        ]
