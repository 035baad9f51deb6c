"""Issue 33, item 7: a full disk is one line naming the file and what to do (the data written
before it is safe), not a traceback. The disk is a 3 MiB tmpfs mounted in a user namespace
(``unshare -rm``); skipped where the kernel does not allow one."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

SCRIPT = """
import os, sys
from harness.errors import StoreError
from harness.results.store import Store
d = sys.argv[1]
s = Store(os.path.join(d, "r.duckdb"))
with s.connect() as con:
    con.execute("CREATE TABLE kept AS SELECT 1 AS x")
free = os.statvfs(d).f_bavail * os.statvfs(d).f_frsize
with open(os.path.join(d, "fill"), "wb") as f:
    f.write(b"x" * max(0, free - 4096))
try:
    with s.connect() as con:
        con.execute("CREATE TABLE big AS SELECT range AS i, repeat('x', 100) AS t FROM range(200000)")
except StoreError as e:
    print("StoreError:", e)
os.remove(os.path.join(d, "fill"))
with Store(os.path.join(d, "r.duckdb"), read_only=True).connect() as con:
    print("kept:", con.execute("SELECT x FROM kept").fetchone()[0])
"""


@pytest.mark.integration
def test_a_full_disk_is_one_line_and_keeps_what_was_written(tmp_path):
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-rm", "true"], check=False).returncode:
        pytest.skip("no user namespaces here (unshare -rm)")
    d = tmp_path / "disk"
    d.mkdir()
    r = subprocess.run(
        [
            "unshare",
            "-rm",
            "sh",
            "-c",
            f'mount -t tmpfs -o size=3m tmpfs {d} && exec "$0" -c "$1" {d}',
            sys.executable,
            SCRIPT,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "Traceback" not in r.stderr, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2, r.stdout + r.stderr
    assert lines[0] == (
        f"StoreError: {d}/r.duckdb: the disk is full; this batch was not written, everything before it is "
        "saved. Free space (or pass --db on another disk) and rerun with --resume"
    )
    assert lines[1] == "kept: 1"


RETRIEVAL_SCRIPT = """
import json, os, sys
d, src = sys.argv[1], sys.argv[2]
os.environ["RAR_HARNESS_CACHE"] = os.path.join(d, "cache")
from harness.errors import DiskFullError
from harness.retrieval.bm25 import Bm25sRetriever
from harness.retrieval.cache import ResultCache
from harness.retrieval.corpus import open_corpus
from harness.types import Hit


def corpus(name, n, words):
    path = os.path.join(src, name)
    with open(path, "w") as f:
        for i in range(n):
            text = " ".join(f"w{i}x{j}" for j in range(words))
            f.write(json.dumps({"id": str(i), "contents": f"Title {i}\\n{text}"}) + "\\n")
    return path


def fill(keep):
    st = os.statvfs(d)
    with open(os.path.join(d, "fill"), "wb") as f:
        f.write(b"x" * max(0, st.f_bavail * st.f_frsize - keep))


def left(folder):
    # the build's lock file stays, as after any build; a temporary or half-built folder must not
    return sorted(n for n in os.listdir(folder) if not n.endswith(".lock")) if os.path.isdir(folder) else []


def try_(what, fn):
    try:
        fn()
        print(what, "written")
    except DiskFullError as e:
        print(what, "|", str(e).replace(d, "<disk>").replace(src, "<src>"))


try_("corpus", lambda: open_corpus(corpus("big.jsonl", 2000, 200)))  # ~4 MB of passages, a 3 MiB disk
print("corpora left:", left(os.path.join(d, "cache", "corpora")))
small = open_corpus(corpus("small.jsonl", 400, 60))
fill(keep=8192)
try_("bm25s", lambda: Bm25sRetriever(small))
print("indexes left:", left(os.path.join(d, "cache", "indexes")))
os.remove(os.path.join(d, "fill"))
cache = ResultCache(os.path.join(d, "cache", "results.sqlite"))
cache.put_many("idx", 3, [("q0", [Hit(doc_id="1", contents="x", score=1.0)])])
fill(keep=0)
hits = [Hit(doc_id=str(i), contents="y" * 2000, score=1.0) for i in range(50)]
try_("cache", lambda: cache.put_many("idx", 3, [(f"q{i}", hits) for i in range(1, 200)]))
os.remove(os.path.join(d, "fill"))
cache.close()
again = ResultCache(os.path.join(d, "cache", "results.sqlite"))  # what the file holds
print("cache kept:", [hits[0].doc_id for hits in again.get_many("idx", ["q0", "q1"], 3) if hits])
"""


@pytest.mark.integration
def test_a_full_disk_while_writing_the_corpus_index_or_cache_is_one_line(tmp_path):
    """Issue 61: a full disk while preparing the corpus, building the bm25s index or adding to the
    retrieval cache was a traceback (OSError, sqlite3.OperationalError); now one line naming the
    path and what to do, with nothing half-written left behind and the cache's earlier rows kept."""
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-rm", "true"], check=False).returncode:
        pytest.skip("no user namespaces here (unshare -rm)")
    d, src = tmp_path / "disk", tmp_path / "src"
    d.mkdir()
    src.mkdir()
    r = subprocess.run(
        [
            "unshare",
            "-rm",
            "sh",
            "-c",
            f'mount -t tmpfs -o size=3m tmpfs {d} && exec "$0" -c "$1" {d} {src}',
            sys.executable,
            RETRIEVAL_SCRIPT,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert "Traceback" not in r.stderr, r.stderr
    advice = "free space (or set RAR_HARNESS_CACHE to a folder on another disk) and rerun"
    lines = r.stdout.splitlines()
    assert lines[0].startswith("corpus | <disk>/cache/corpora/big-"), lines
    assert lines[0].endswith(
        ": the disk is full while writing the prepared form of <src>/big.jsonl (nothing of it is kept); "
        + advice
    )
    assert lines[1] == "corpora left: []"
    assert lines[2].startswith("bm25s | <disk>/cache/indexes/"), lines
    assert lines[2].endswith(
        ": the disk is full while writing the bm25s index (nothing of it is kept; a previous index is "
        "left as it was); " + advice
    )
    assert lines[3] == "indexes left: []"
    assert lines[4] == (
        "cache | <disk>/cache/results.sqlite: the disk is full while writing the retrieval result cache "
        "(this batch was not added); " + advice
    )
    assert lines[5:] == ["cache kept: ['1']"]
