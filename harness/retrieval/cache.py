"""A result cache keyed by (index id, query, k), so repeated evaluation and training never re-search.

:class:`ResultCache` keeps an in-memory LRU in front of an optional SQLite file (default
``$RAR_HARNESS_CACHE/results.sqlite``; WAL mode, so several processes can share it). It is
thread-safe and counts hits and misses. :class:`CachedRetriever` wraps any retriever
transparently. The index id pins the corpus content and every retriever setting, so a cached
result is never served for a different index. Queries are matched exactly (no normalisation).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from harness.errors import CACHE_ADVICE, DiskFullError, HarnessError, disk_full_is_one_line, is_disk_full
from harness.retrieval.base import Retriever
from harness.retrieval.paths import result_cache_path
from harness.retrieval.spec import CorpusSpec
from harness.types import Hit

Key = tuple[str, int, str]


@dataclass(frozen=True)
class CacheStats:
    hits: int
    misses: int

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0


def _encode(hits: list[Hit]) -> str:
    return json.dumps([[h.doc_id, h.contents, h.score] for h in hits], ensure_ascii=False)


def _decode(text: str) -> list[Hit]:
    return [Hit(doc_id=d, contents=c, score=float(s)) for d, c, s in json.loads(text)]


class ResultCache:
    """In-memory LRU (``max_memory`` entries) plus an optional persistent SQLite file."""

    def __init__(self, path: str | Path | None = None, *, max_memory: int = 100_000):
        self.path = Path(path) if path is not None else None
        self.max_memory = max_memory
        self._mem: OrderedDict[Key, list[Hit]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self._db: sqlite3.Connection | None = None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                self._db = sqlite3.connect(
                    self.path, timeout=30, check_same_thread=False, isolation_level=None
                )
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute(
                    "CREATE TABLE IF NOT EXISTS results (index_id TEXT, k INTEGER, query TEXT, hits TEXT, "
                    "PRIMARY KEY (index_id, k, query))"
                )
            except sqlite3.DatabaseError as e:
                if is_disk_full(e):
                    raise DiskFullError(
                        f"{self.path}: the disk is full while opening the retrieval result cache; {CACHE_ADVICE}"
                    ) from None
                raise HarnessError(
                    f"{self.path}: cannot open the retrieval result cache ({e}); delete the file to reset it"
                ) from None

    @classmethod
    def default(cls) -> ResultCache:
        return cls(result_cache_path())

    def stats(self) -> CacheStats:
        return CacheStats(self.hits, self.misses)

    def _remember(self, key: Key, hits: list[Hit]) -> None:
        self._mem[key] = hits
        self._mem.move_to_end(key)
        while len(self._mem) > self.max_memory:
            self._mem.popitem(last=False)

    def get_many(self, index_id: str, queries: list[str], k: int) -> list[list[Hit] | None]:
        out: list[list[Hit] | None] = []
        with self._lock:
            for q in queries:
                key = (index_id, k, q)
                found = self._mem.get(key)
                if found is not None:
                    self._mem.move_to_end(key)
                elif self._db is not None:
                    row = self._db.execute(
                        "SELECT hits FROM results WHERE index_id=? AND k=? AND query=?", key
                    ).fetchone()
                    if row is not None:
                        found = _decode(row[0])
                        self._remember(key, found)
                if found is None:
                    self.misses += 1
                else:
                    self.hits += 1
                out.append(found)
        return out

    def put_many(self, index_id: str, k: int, results: list[tuple[str, list[Hit]]]) -> None:
        with self._lock:
            for q, hits in results:
                self._remember((index_id, k, q), hits)
            if self._db is not None and results:
                where = str(self.path)
                with disk_full_is_one_line(where, "the retrieval result cache (this batch was not added)"):
                    self._db.execute("BEGIN")
                    try:
                        self._db.executemany(
                            "INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?)",
                            [(index_id, k, q, _encode(h)) for q, h in results],
                        )
                        self._db.execute("COMMIT")
                    except BaseException:
                        if self._db.in_transaction:
                            self._db.execute("ROLLBACK")
                        raise

    def clear(self) -> None:
        with self._lock:
            self._mem.clear()
            if self._db is not None:
                self._db.execute("DELETE FROM results")

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


class CachedRetriever(Retriever):
    """Any retriever, answering repeated (query, k) from a :class:`ResultCache`."""

    def __init__(self, inner: Retriever, cache: ResultCache | None = None):
        self.inner = inner
        self.cache = cache if cache is not None else ResultCache()

    @property
    def spec(self) -> BaseModel:
        return self.inner.spec

    @property
    def index_id(self) -> str:
        return self.inner.index_id

    @property
    def corpus_spec(self) -> CorpusSpec | None:
        return self.inner.corpus_spec

    @property
    def name(self) -> str:
        return self.inner.name

    def _search(self, queries: list[str], k: int) -> list[list[Hit]]:
        found = self.cache.get_many(self.index_id, queries, k)
        missing = list(dict.fromkeys(q for q, f in zip(queries, found, strict=True) if f is None))
        if missing:
            fresh = dict(zip(missing, self.inner.search(missing, k), strict=True))
            self.cache.put_many(self.index_id, k, list(fresh.items()))
            found = [f if f is not None else fresh[q] for q, f in zip(queries, found, strict=True)]
        return [list(f) for f in found if f is not None]

    def close(self) -> None:
        self.inner.close()
