"""Index directories: the metadata file written next to every index, and build-or-load.

Every index directory holds ``index.json`` (:class:`IndexMeta`): the index id, the retriever
spec, the corpus (id, content hash, count), the analyzer or encoder, the vector dimension,
library versions and build time. :func:`ensure_index` loads an index only when the fields in
:data:`MATCH_FIELDS` and the corpus hash/count match what the caller expects; otherwise it
rebuilds with a message (``mode="auto"``), or raises :class:`RetrievalIndexError`
(``mode="load"``). Builds go to a temporary sibling directory that is renamed into place, under a
lock file, so an interrupted build never leaves a half-written index behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.errors import RetrievalIndexError, disk_full_is_one_line
from harness.retrieval.spec import CorpusSpec, RetrieverSpec

log = logging.getLogger("harness.retrieval")

META_FILE = "index.json"
INDEX_FORMAT = 1

LoadMode = Literal["auto", "load", "rebuild"]
"""``auto``: load when it matches, else build (with a message); ``load``: never build, error
instead; ``rebuild``: build even when a matching index exists (``harness index --force``)."""


class IndexMeta(BaseModel):
    """What an index was built from; stored as ``index.json`` in the index directory."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format_version: int = INDEX_FORMAT
    index_id: str
    retriever: RetrieverSpec
    corpus: CorpusSpec
    n_docs: int
    analyzer: str | None = None
    dim: int | None = None
    encoder: str | None = None
    libraries: dict[str, str] = Field(default_factory=dict)
    created_at: str = ""
    build_seconds: float = 0.0
    imported_from: str | None = None  # `harness index import`: the user's index file or directory


MATCH_FIELDS = ("format_version", "index_id", "retriever", "n_docs", "analyzer", "dim", "encoder")


def library_versions(*names: str) -> dict[str, str]:
    out = {}
    for name in names:
        try:
            out[name] = importlib_metadata.version(name)
        except importlib_metadata.PackageNotFoundError:
            out[name] = "absent"
    return out


def mismatches(found: IndexMeta, expected: IndexMeta) -> list[str]:
    """Human-readable differences that make ``found`` unusable for ``expected``."""
    diffs = []
    for name in MATCH_FIELDS:
        a, b = getattr(found, name), getattr(expected, name)
        if a != b:
            a_s = a.model_dump_json() if isinstance(a, BaseModel) else repr(a)
            b_s = b.model_dump_json() if isinstance(b, BaseModel) else repr(b)
            diffs.append(f"{name}: index has {a_s}, expected {b_s}")
    if found.corpus.content_hash != expected.corpus.content_hash:
        diffs.append(
            f"corpus content hash: index has {found.corpus.content_hash[:12]}..., "
            f"corpus file has {expected.corpus.content_hash[:12]}..."
        )
    if found.corpus.n_passages != expected.corpus.n_passages:
        diffs.append(
            f"corpus size: index has {found.corpus.n_passages}, corpus has {expected.corpus.n_passages}"
        )
    return diffs


def read_meta(index_dir: Path) -> IndexMeta:
    path = index_dir / META_FILE
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise RetrievalIndexError(f"{path}: index metadata missing") from None
    except OSError as e:
        raise RetrievalIndexError(f"{path}: cannot read index metadata ({e})") from None
    try:
        return IndexMeta.model_validate_json(text)
    except ValidationError as e:
        first = e.errors()[0]
        raise RetrievalIndexError(
            f"{path}: corrupt index metadata ({first['msg']} at {'.'.join(map(str, first['loc']))}); "
            "rebuild it with `harness index --force`"
        ) from None


def corrupt(index_dir: Path, what: str, err: BaseException, kind: str) -> RetrievalIndexError:
    return RetrievalIndexError(
        f"{index_dir}: corrupt {what} ({type(err).__name__}: {err}); "
        f"rebuild it with `harness index --retriever {kind} --force`"
    )


@contextlib.contextmanager
def _lock(index_dir: Path) -> Iterator[None]:
    lock_path = index_dir.parent / f".{index_dir.name}.lock"
    with open(lock_path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _build(index_dir: Path, expected: IndexMeta, build: Callable[[Path], IndexMeta | None]) -> IndexMeta:
    tmp = index_dir.parent / f".{index_dir.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    what = f"the {expected.retriever.kind} index (nothing of it is kept; a previous index is left as it was)"
    try:
        with disk_full_is_one_line(index_dir, what):
            tmp.mkdir(parents=True)
            return _build_in(index_dir, tmp, expected, build)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _build_in(
    index_dir: Path, tmp: Path, expected: IndexMeta, build: Callable[[Path], IndexMeta | None]
) -> IndexMeta:
    """Build into ``tmp`` and rename it to ``index_dir`` (see :func:`_build`)."""
    t0 = time.perf_counter()
    built = build(tmp) or expected
    meta = built.model_copy(
        update={
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "build_seconds": round(time.perf_counter() - t0, 3),
        }
    )
    (tmp / META_FILE).write_text(meta.model_dump_json(indent=2))
    old = index_dir.parent / f".{index_dir.name}.old-{os.getpid()}"
    if index_dir.exists():
        index_dir.rename(old)
    tmp.rename(index_dir)
    shutil.rmtree(old, ignore_errors=True)
    return meta


def ensure_index(
    index_dir: Path,
    expected: IndexMeta,
    build: Callable[[Path], IndexMeta | None],
    *,
    mode: LoadMode = "auto",
) -> IndexMeta:
    """Return the metadata of a usable index in ``index_dir``, building it when needed.

    ``build(tmp_dir)`` writes the index files into ``tmp_dir`` and may return a refined
    :class:`IndexMeta` (e.g. with the vector dimension); the metadata file is written here.
    """
    kind = expected.retriever.kind
    how = f"`harness index --retriever {kind}`"
    if mode not in ("auto", "load", "rebuild"):
        raise ValueError(f"unknown index mode {mode!r}")
    index_dir.parent.mkdir(parents=True, exist_ok=True)
    if mode == "rebuild":
        log.warning("building %s index %s over %s", kind, index_dir, expected.corpus.id)
        with _lock(index_dir):
            return _build(index_dir, expected, build)
    if not index_dir.exists():
        if mode == "load":
            raise RetrievalIndexError(f"no {kind} index at {index_dir}; build it with {how}")
    elif not (index_dir / META_FILE).exists():
        raise RetrievalIndexError(
            f"{index_dir}: not an index (no {META_FILE}); remove it or rebuild with {how} --force"
        )
    with _lock(index_dir):
        if index_dir.exists():
            found = read_meta(index_dir)
            diffs = mismatches(found, expected)
            if not diffs:
                return found
            msg = f"{kind} index {index_dir} does not match: " + "; ".join(diffs)
            if mode == "load":
                raise RetrievalIndexError(f"{msg}. Rebuild it with {how} --force")
            log.warning("%s. Rebuilding it.", msg)
        else:
            log.warning(
                "no %s index for %s yet; building it in %s (once)", kind, expected.corpus.id, index_dir
            )
        return _build(index_dir, expected, build)
