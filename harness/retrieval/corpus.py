"""Wiki-18 style corpora: streaming reader, validation, content hash and compact lookup.

A corpus file is jsonl (optionally gzip-compressed), one passage per line, in either form::

    {"id": "0", "contents": "\\"Evan Morris\\"\\nEvan L. Morris (January 26, 1977 ..."}
    {"id": "0", "title": "Evan Morris", "text": "Evan L. Morris (January 26, 1977 ..."}

The second form is turned into the first with :func:`harness.types.join_contents`. Extra keys
are allowed and ignored. Blank lines are skipped. Every other problem (bad JSON, a missing or
non-string field, an empty passage, a duplicate id) is a :class:`DataError` naming ``file:line``.

**Content hash.** sha256 over the rows in file order, each row contributing the UTF-8 bytes of
``json.dumps([id, contents], ensure_ascii=False, separators=(",", ":")) + "\\n"``. It depends only
on what retrieval sees (ids and contents, in order), not on compression, key order, whitespace or
extra keys, so ``closed.jsonl`` and ``closed.jsonl.gz`` hash the same.

**Compact form.** :func:`open_corpus` reads the file once (streaming; 21M rows are never held as
Python objects) into ``$RAR_HARNESS_CACHE/corpora/<name>-<key>/``: the concatenated UTF-8
contents and ids with int64 offset arrays, plus a sorted array of 64-bit id hashes for lookup.
Everything is memory-mapped; the prepared form is reused while the file's size and mtime are
unchanged.
"""

from __future__ import annotations

import bisect
import gzip
import hashlib
import json
import logging
import mmap
import os
import shutil
import zlib
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

import numpy as np
from pydantic import BaseModel, ValidationError

from harness.errors import ConfigError, DataError, disk_full_is_one_line
from harness.retrieval.paths import corpora_dir
from harness.retrieval.spec import CorpusSpec
from harness.types import Hit, join_contents

log = logging.getLogger("harness.retrieval")

PREPARED_FORMAT = 1


@dataclass(frozen=True)
class CorpusRow:
    """One validated passage and the 1-based line it came from."""

    line: int
    id: str
    contents: str


@dataclass(frozen=True)
class CorpusBatch:
    """Consecutive passages ``start .. start+len(ids)-1`` (row numbers in file order)."""

    start: int
    ids: list[str]
    contents: list[str]


def row_bytes(doc_id: str, contents: str) -> bytes:
    """The bytes a row contributes to the content hash (see the module docstring)."""
    return (json.dumps([doc_id, contents], ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def _open_binary(path: Path) -> IO[bytes]:
    with open(path, "rb") as f:
        magic = f.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rb")
    return open(path, "rb")


# A retrieval corpus holds passages (wiki-18: ~600 bytes each); a row beyond this is a whole
# document or a damaged file, and one hit of it would outgrow any reply (issue 45: a 100 MB passage
# was indexed). Ids: wiki-18's are short numbers, so 256 characters is ample.
MAX_PASSAGE_CHARS = 2**20
MAX_ID_CHARS = 256


def parse_row(raw: bytes, path: Path | str, line: int) -> CorpusRow | None:
    """Validate one jsonl line; ``None`` for a blank line."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataError(path, f"not valid UTF-8 ({e.reason} at byte {e.start})", line) from None
    if not text.strip():
        return None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(path, f"invalid JSON ({e.msg} at column {e.colno})", line) from None
    except ValueError as e:  # an integer of more than 4,300 digits (Python's conversion limit)
        raise DataError(path, f"unreadable JSON number ({e})", line) from None
    except RecursionError:
        raise DataError(
            path, "JSON nested too deeply to read; a corpus row is one flat object", line
        ) from None
    if not isinstance(obj, dict):
        raise DataError(path, f"expected a JSON object, got {type(obj).__name__}", line)
    if "id" not in obj:
        raise DataError(path, "missing 'id'", line)
    doc_id = obj["id"]
    if isinstance(doc_id, bool) or not isinstance(doc_id, str | int):
        raise DataError(path, f"'id' must be a string or an integer, got {type(doc_id).__name__}", line)
    doc_id = str(doc_id)
    if not doc_id.strip():
        raise DataError(path, "empty 'id'", line)
    if "contents" in obj:
        contents = obj["contents"]
        if not isinstance(contents, str):
            raise DataError(path, f"'contents' must be a string, got {type(contents).__name__}", line)
    elif "title" in obj and "text" in obj:
        title, body = obj["title"], obj["text"]
        if not isinstance(title, str) or not isinstance(body, str):
            raise DataError(path, "'title' and 'text' must be strings", line)
        contents = join_contents(title, body)
    else:
        raise DataError(path, "missing 'contents' (or 'title' and 'text')", line)
    if not contents.strip():
        raise DataError(path, "empty passage", line)
    if len(contents) > MAX_PASSAGE_CHARS:
        raise DataError(
            path,
            f"a passage of {len(contents)} characters is over the limit of {MAX_PASSAGE_CHARS} "
            "(harness.retrieval.corpus.MAX_PASSAGE_CHARS); split the document into passages",
            line,
        )
    if len(doc_id) > MAX_ID_CHARS:
        raise DataError(
            path, f"an 'id' of {len(doc_id)} characters is over the limit of {MAX_ID_CHARS}", line
        )
    return CorpusRow(line=line, id=doc_id, contents=contents)


def iter_rows(path: str | os.PathLike[str]) -> Iterator[CorpusRow]:
    """Stream the validated rows of a corpus file (no uniqueness check; :func:`open_corpus` does it)."""
    p = Path(path)
    if not p.is_file():
        raise DataError(p, "corpus file not found")
    line = 0
    try:
        with _open_binary(p) as f:
            for line, raw in enumerate(f, 1):  # noqa: B007 - line is used in the error below
                row = parse_row(raw, p, line)
                if row is not None:
                    yield row
    except (OSError, EOFError, zlib.error) as e:
        raise DataError(p, f"cannot read the file ({e})", line + 1) from None


def _id_hash(doc_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(doc_id.encode(), digest_size=8).digest(), "little")


def _int_view(path: Path, arr: np.ndarray, code: Literal["q", "Q"]) -> memoryview:
    """``arr`` (a memmap of ``path``) as a memoryview of Python ints (``code``: "q" int64, "Q" uint64)."""
    if not arr.dtype.isnative or arr.dtype.kind not in "iu" or arr.dtype.itemsize != 8:
        raise ValueError(f"prepared corpus file {path} holds {arr.dtype}, not native 8-byte integers")
    return memoryview(np.asarray(arr)).cast("B").cast(code)


class _PreparedMeta(BaseModel):
    format: int
    source: str
    size: int
    mtime_ns: int
    spec: CorpusSpec


def default_corpus_id(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".jsonl", ".json"):
        name = name.removesuffix(suffix)
    return name or "corpus"


class Corpus:
    """A prepared corpus: ``len``, ``get(doc_id)``, row access and batched iteration.

    Thread-safe for reading. Use :func:`open_corpus` to get one.
    """

    def __init__(self, path: Path, spec: CorpusSpec, store: Path):
        self.path = path
        self.spec = spec
        self.store = store
        self._off = np.load(store / "contents.off.npy", mmap_mode="r")
        self._id_off = np.load(store / "ids.off.npy", mmap_mode="r")
        self._hashes = np.load(store / "idhash.npy", mmap_mode="r")
        self._hash_rows = np.load(store / "idrow.npy", mmap_mode="r")
        n = spec.n_passages
        sizes_ok = (
            len(self._off) == n + 1
            and len(self._id_off) == n + 1
            and len(self._hashes) == n
            and len(self._hash_rows) == n
            and int(self._off[-1]) == (store / "contents.bin").stat().st_size
            and int(self._id_off[-1]) == (store / "ids.bin").stat().st_size
        )
        if not sizes_ok:
            raise ValueError(f"prepared corpus {store} is inconsistent")
        # Scalar lookups (row_of, id_at, contents_at) read the arrays through memoryviews: a numpy
        # scalar read or searchsorted on a memmap cost 7-12 us a row_of, and searchsorted releases
        # the GIL, which a search thread of serve-retriever then waited to get back behind the
        # others (15% of the server's samples under 16 clients); bisect on the memoryview is 2.8 us
        # and holds the GIL. The .npy files are native little-endian int64/uint64 (_prepare).
        self._off_mv = _int_view(store / "contents.off.npy", self._off, "q")
        self._id_off_mv = _int_view(store / "ids.off.npy", self._id_off, "q")
        self._hashes_mv = _int_view(store / "idhash.npy", self._hashes, "Q")
        self._hash_rows_mv = _int_view(store / "idrow.npy", self._hash_rows, "q")
        self._cf = open(store / "contents.bin", "rb")  # noqa: SIM115 - kept open for the mmap
        self._if = open(store / "ids.bin", "rb")  # noqa: SIM115
        self._contents = mmap.mmap(self._cf.fileno(), 0, access=mmap.ACCESS_READ)
        self._ids = mmap.mmap(self._if.fileno(), 0, access=mmap.ACCESS_READ)

    def __len__(self) -> int:
        return self.spec.n_passages

    def __repr__(self) -> str:
        return f"Corpus({self.spec.id!r}, {len(self)} passages, {self.path})"

    def id_at(self, row: int) -> str:
        row = int(row)
        return self._ids[self._id_off_mv[row] : self._id_off_mv[row + 1]].decode()

    def contents_at(self, row: int) -> str:
        row = int(row)
        return self._contents[self._off_mv[row] : self._off_mv[row + 1]].decode()

    def contents_sizes(self, rows: np.ndarray) -> np.ndarray:
        """UTF-8 bytes of the ``contents`` at each of ``rows`` (read from the offsets, no text)."""
        rows = np.asarray(rows, dtype=np.int64)
        return np.asarray(self._off[rows + 1], dtype=np.int64) - np.asarray(self._off[rows], dtype=np.int64)

    def row_of(self, doc_id: str) -> int | None:
        """The row number of ``doc_id`` or ``None``."""
        h = _id_hash(doc_id)
        hashes = self._hashes_mv
        j = bisect.bisect_left(hashes, h)
        while j < len(hashes) and hashes[j] == h:  # more than one only on a 64-bit hash collision
            r = self._hash_rows_mv[j]
            if self.id_at(r) == doc_id:
                return r
            j += 1
        return None

    def __contains__(self, doc_id: object) -> bool:
        return isinstance(doc_id, str) and self.row_of(doc_id) is not None

    def get(self, doc_id: str) -> str:
        """The ``contents`` of ``doc_id``; ``KeyError`` if the corpus has no such id."""
        row = self.row_of(doc_id)
        if row is None:
            raise KeyError(doc_id)
        return self.contents_at(row)

    def hit(self, row: int, score: float) -> Hit:
        return Hit(doc_id=self.id_at(row), contents=self.contents_at(row), score=float(score))

    def iter_batches(self, batch_size: int = 1024) -> Iterator[CorpusBatch]:
        n = len(self)
        for start in range(0, n, batch_size):
            stop = min(n, start + batch_size)
            rows = range(start, stop)
            yield CorpusBatch(start, [self.id_at(r) for r in rows], [self.contents_at(r) for r in rows])

    def close(self) -> None:
        self._contents.close()
        self._ids.close()
        self._cf.close()
        self._if.close()


def _lines_of_rows(path: Path, rows: Iterable[int]) -> dict[int, int]:
    wanted = set(rows)
    found: dict[int, int] = {}
    for i, row in enumerate(iter_rows(path)):
        if i in wanted:
            found[i] = row.line
            if len(found) == len(wanted):
                break
    return found


def _prepare(src: Path, corpus_id: str, out: Path, progress: bool) -> None:
    from tqdm import tqdm

    st = src.stat()
    tmp = out.with_name(f"{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        sha = hashlib.sha256()
        offsets, id_offsets, hashes = array("q", [0]), array("q", [0]), array("Q")
        pos = ipos = 0
        with (
            open(tmp / "contents.bin", "wb") as fc,
            open(tmp / "ids.bin", "wb") as fi,
            tqdm(desc=f"reading {src.name}", unit=" passages", disable=not progress) as bar,
        ):
            for row in iter_rows(src):
                sha.update(row_bytes(row.id, row.contents))
                cb, ib = row.contents.encode(), row.id.encode()
                fc.write(cb)
                fi.write(ib)
                pos += len(cb)
                ipos += len(ib)
                offsets.append(pos)
                id_offsets.append(ipos)
                hashes.append(_id_hash(row.id))
                bar.update(1)
        n = len(hashes)
        if n == 0:
            raise DataError(src, "the corpus has no passages")
        h = np.frombuffer(hashes, dtype=np.uint64)
        order = np.argsort(h, kind="stable")
        h_sorted = h[order]
        np.save(tmp / "contents.off.npy", np.frombuffer(offsets, dtype=np.int64))
        np.save(tmp / "ids.off.npy", np.frombuffer(id_offsets, dtype=np.int64))
        np.save(tmp / "idhash.npy", h_sorted)
        np.save(tmp / "idrow.npy", order.astype(np.int64))
        spec = CorpusSpec(id=corpus_id, content_hash=sha.hexdigest(), n_passages=n)
        same = np.nonzero(h_sorted[1:] == h_sorted[:-1])[0]
        if len(same):
            reader = Corpus(src, spec, tmp)
            try:
                for j in same:
                    a, b = int(order[j]), int(order[j + 1])
                    if reader.id_at(a) == reader.id_at(b):
                        lines = _lines_of_rows(src, (a, b))
                        raise DataError(
                            src,
                            f"duplicate id {reader.id_at(a)!r} (first on line {lines[a]}); ids must be unique",
                            lines[b],
                        )
            finally:
                reader.close()
        meta = _PreparedMeta(
            format=PREPARED_FORMAT, source=str(src), size=st.st_size, mtime_ns=st.st_mtime_ns, spec=spec
        )
        (tmp / "meta.json").write_text(meta.model_dump_json(indent=2))
        shutil.rmtree(out, ignore_errors=True)
        try:
            tmp.rename(out)
        except OSError:
            if not (out / "meta.json").is_file():  # not another process finishing the same work
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _load_prepared(src: Path, out: Path) -> Corpus | None:
    meta_path = out / "meta.json"
    if not meta_path.is_file():
        return None
    try:
        meta = _PreparedMeta.model_validate_json(meta_path.read_text())
    except (ValidationError, OSError):
        return None
    st = src.stat()
    if (meta.format, meta.source, meta.size, meta.mtime_ns) != (
        PREPARED_FORMAT,
        str(src),
        st.st_size,
        st.st_mtime_ns,
    ):
        return None
    try:
        return Corpus(src, meta.spec, out)
    except (OSError, ValueError) as e:
        log.warning("prepared corpus %s is damaged (%s); preparing it again", out, e)
        return None


def open_corpus(
    path: str | os.PathLike[str], corpus_id: str | None = None, *, progress: bool = False
) -> Corpus:
    """Validate, hash and prepare a corpus file once, then open its memory-mapped form.

    ``corpus_id`` names the corpus in the protocol (default: the file name without extensions);
    it is not part of the content hash or of index ids.
    """
    src = Path(path).expanduser().resolve()
    if not src.is_file():
        raise DataError(src, "corpus file not found")
    name = default_corpus_id(src)
    key = hashlib.sha256(str(src).encode()).hexdigest()[:16]
    out = corpora_dir() / f"{name}-{key}"
    corpus = _load_prepared(src, out)
    if corpus is None:
        if progress:
            log.info("preparing corpus %s (validate, hash, compact form) in %s", src, out)
        out.parent.mkdir(parents=True, exist_ok=True)
        with disk_full_is_one_line(out, f"the prepared form of {src} (nothing of it is kept)"):
            _prepare(src, name, out, progress)
        corpus = _load_prepared(src, out)
        if corpus is None:
            raise DataError(src, f"the corpus changed while it was being prepared in {out}; try again")
    if corpus_id is not None and corpus_id != corpus.spec.id:
        corpus.spec = corpus.spec.model_copy(update={"id": corpus_id})
    return corpus


def corpus_spec(
    path: str | os.PathLike[str], corpus_id: str | None = None, *, progress: bool = False
) -> CorpusSpec:
    """The :class:`CorpusSpec` (id, content hash, size) of a corpus file; validates it, and
    prepares its compact form once (later calls are instant while the file is unchanged)."""
    c = open_corpus(path, corpus_id, progress=progress)
    try:
        return c.spec
    finally:
        c.close()


def default_corpus_path() -> Path:
    """The packaged closed corpus (about 28k real passages)."""
    try:
        from harness.data.packaged import closed_corpus_path
    except ImportError as e:
        raise ConfigError(
            f"the packaged closed corpus is not available ({e}); pass a corpus file with --corpus"
        ) from None
    return Path(closed_corpus_path())
