"""Dense retrieval: an :class:`Encoder` + faiss (``IndexFlatIP`` exact, or ``IndexHNSWFlat``).

Passages are encoded as their whole ``contents`` (quoted title line included, as FlashRAG and
Search-R1 do) with the spec's passage prefix. Scores are inner products (cosine similarities
when the encoder normalises). faiss-gpu is used for Flat indexes when it is installed and sees a
GPU.

Passage embeddings are cached under ``$RAR_HARNESS_CACHE/embeddings/<key>/`` (key: corpus content
hash + encoder spec + weights), written in chunks so an interrupted encoding resumes where it
stopped; Flat and HNSW indexes and the hybrid retriever share them. Encoding is slow on a CPU
(MiniLM: about 20-40 passages/s on 2 cores), so ``harness index --retriever dense`` shows progress.

At load the faiss index's dimension and size must match the metadata, the encoder and the corpus,
or :class:`RetrievalIndexError` says which.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from pathlib import Path

import numpy as np

from harness.errors import RetrievalIndexError
from harness.retrieval.base import Retriever, make_index_id
from harness.retrieval.corpus import Corpus
from harness.retrieval.encoder import Encoder, load_encoder
from harness.retrieval.index import IndexMeta, LoadMode, corrupt, ensure_index, library_versions
from harness.retrieval.paths import cache_root, index_dir_for
from harness.retrieval.spec import DenseSpec
from harness.types import Hit

log = logging.getLogger("harness.retrieval")

EMBED_CHUNK = 512
INDEX_FILE = "index.faiss"


def _faiss():
    try:
        import faiss
    except ImportError:
        raise RetrievalIndexError(
            "dense retrieval needs faiss (pip install faiss-cpu, or the 'cpu' extra)"
        ) from None
    return faiss


def embeddings_dir(corpus: Corpus, encoder: Encoder) -> Path:
    key = json.dumps(
        {
            "corpus": corpus.spec.content_hash,
            "n": len(corpus),
            "encoder": encoder.spec.model_dump(mode="json"),
            "weights": encoder.fingerprint,
        },
        sort_keys=True,
    )
    return cache_root() / "embeddings" / hashlib.sha256(key.encode()).hexdigest()[:16]


def passage_embeddings(
    corpus: Corpus, encoder: Encoder, *, progress: bool = False, batch_size: int = 32
) -> np.ndarray:
    """All passage vectors (n x dim float32, memory-mapped), encoding only what is not cached."""
    from tqdm import tqdm

    n, dim = len(corpus), encoder.dim
    out = embeddings_dir(corpus, encoder)
    final = out / "embeddings.npy"
    if final.is_file():
        arr = np.load(final, mmap_mode="r")
        if arr.shape == (n, dim) and arr.dtype == np.float32:
            return arr
        log.warning(
            "cached embeddings %s have shape %s, expected %s; encoding again", final, arr.shape, (n, dim)
        )
        final.unlink()
    out.mkdir(parents=True, exist_ok=True)

    def chunk_path(start: int) -> Path:
        return out / f"chunk-{start:010d}.npy"

    def chunk_ok(start: int) -> bool:
        p = chunk_path(start)
        if not p.is_file():
            return False
        try:
            a = np.load(p, mmap_mode="r")
        except (OSError, ValueError):
            return False
        return a.shape == (min(EMBED_CHUNK, n - start), dim)

    starts = list(range(0, n, EMBED_CHUNK))
    done = sum(min(EMBED_CHUNK, n - s) for s in starts if chunk_ok(s))
    if done:
        log.warning("resuming passage encoding: %d of %d passages already encoded in %s", done, n, out)
    with tqdm(
        total=n, initial=done, desc=f"encode {corpus.spec.id}", unit=" passages", disable=not progress
    ) as bar:
        for start in starts:
            if chunk_ok(start):
                continue
            stop = min(n, start + EMBED_CHUNK)
            vecs = encoder.encode_passages([corpus.contents_at(r) for r in range(start, stop)], batch_size)
            tmp = out / f".chunk-{start:010d}.{os.getpid()}.npy"
            np.save(tmp, vecs)
            tmp.rename(chunk_path(start))
            bar.update(stop - start)
    tmp_final = out / f".embeddings.{os.getpid()}.npy"
    arr = np.lib.format.open_memmap(tmp_final, mode="w+", dtype=np.float32, shape=(n, dim))
    for start in starts:
        arr[start : min(n, start + EMBED_CHUNK)] = np.load(chunk_path(start))
    arr.flush()
    del arr
    tmp_final.rename(final)
    for start in starts:
        chunk_path(start).unlink(missing_ok=True)
    return np.load(final, mmap_mode="r")


class DenseRetriever(Retriever):
    def __init__(
        self,
        corpus: Corpus,
        spec: DenseSpec | None = None,
        *,
        encoder: Encoder | None = None,
        index_dir: str | Path | None = None,
        mode: LoadMode = "auto",
        progress: bool = False,
        batch_size: int = 32,
    ):
        faiss = _faiss()
        self.corpus = corpus
        self._spec = spec or DenseSpec()
        self.encoder = encoder if encoder is not None else load_encoder(self._spec.encoder)
        if self.encoder.spec != self._spec.encoder:
            raise RetrievalIndexError(
                f"encoder {self.encoder.spec.model_dump_json()} is not the spec's encoder "
                f"{self._spec.encoder.model_dump_json()}"
            )
        self._index_id = make_index_id(corpus.spec, self._spec)
        self.index_dir = Path(index_dir) if index_dir else index_dir_for(self._index_id)
        self.progress = progress
        self.batch_size = batch_size
        expected = IndexMeta(
            index_id=self._index_id,
            retriever=self._spec,
            corpus=corpus.spec,
            n_docs=len(corpus),
            dim=self.encoder.dim,
            encoder=self.encoder.describe(),
            libraries=library_versions(
                "faiss-cpu", "faiss-gpu-cu12", "sentence-transformers", "torch", "transformers"
            ),
        )
        self.meta = ensure_index(self.index_dir, expected, self._build, mode=mode)
        try:
            index = faiss.read_index(str(self.index_dir / INDEX_FILE))
        except (RuntimeError, OSError) as e:
            raise corrupt(self.index_dir, "faiss index", e, "dense") from None
        if index.d != self.meta.dim or index.d != self.encoder.dim:
            raise RetrievalIndexError(
                f"{self.index_dir}: dimension mismatch: faiss index has {index.d}, metadata says "
                f"{self.meta.dim}, encoder {self._spec.encoder.model} gives {self.encoder.dim}; "
                "rebuild it with `harness index --retriever dense --force`"
            )
        if index.ntotal != len(corpus):
            raise RetrievalIndexError(
                f"{self.index_dir}: the faiss index holds {index.ntotal} vectors but the corpus has "
                f"{len(corpus)} passages; rebuild it with `harness index --retriever dense --force`"
            )
        if self._spec.index_type == "HNSW":
            index.hnsw.efSearch = self._spec.ef_search
        self.index = self._maybe_gpu(index)

    def _maybe_gpu(self, index):
        faiss = _faiss()
        if self._spec.index_type == "Flat" and hasattr(faiss, "get_num_gpus") and faiss.get_num_gpus() > 0:
            log.info("faiss: using %d GPU(s)", faiss.get_num_gpus())
            return faiss.index_cpu_to_all_gpus(index)
        return index

    @property
    def spec(self) -> DenseSpec:
        return self._spec

    @property
    def index_id(self) -> str:
        return self._index_id

    @property
    def corpus_spec(self):
        return self.corpus.spec

    def _build(self, tmp: Path) -> None:
        faiss = _faiss()
        emb = passage_embeddings(
            self.corpus, self.encoder, progress=self.progress, batch_size=self.batch_size
        )
        dim = self.encoder.dim
        if self._spec.index_type == "Flat":
            index = faiss.IndexFlatIP(dim)
        else:
            index = faiss.IndexHNSWFlat(dim, self._spec.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = self._spec.ef_construction
        from tqdm import tqdm

        step = 8192
        with tqdm(
            total=len(emb), desc=f"faiss {self._spec.index_type}", unit=" vectors", disable=not self.progress
        ) as bar:
            for start in range(0, len(emb), step):
                index.add(np.ascontiguousarray(emb[start : start + step]))
                bar.update(min(step, len(emb) - start))
        faiss.write_index(index, str(tmp / INDEX_FILE))

    def _search(self, queries: list[str], k: int) -> list[list[Hit]]:
        vecs = self.encoder.encode_queries(queries)
        if self._spec.index_type == "HNSW":
            self.index.hnsw.efSearch = max(self._spec.ef_search, k)
        scores, rows = self.index.search(vecs, min(k, self.index.ntotal))
        out = []
        for srow, rrow in zip(scores, rows, strict=True):
            out.append([self.corpus.hit(int(r), float(s)) for s, r in zip(srow, rrow, strict=True) if r >= 0])
        return out


def remove_embeddings(corpus: Corpus, encoder: Encoder) -> None:
    """Delete cached passage embeddings (``harness index --force`` re-encodes)."""
    shutil.rmtree(embeddings_dir(corpus, encoder), ignore_errors=True)
