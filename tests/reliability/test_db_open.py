"""Issue 33, item 6: opening a results file tells apart, each in one line, a file it cannot write
(read-only filesystem), a file another process holds locked, a damaged file and a file that is not
a DuckDB database; and DuckDB never reaches the network (no extension autoload/autoinstall).

An intact file on a read-only filesystem must not be called damaged (that invites a user to throw
a good file away). The read-only mount is a bind mount in a user namespace (``unshare -rm``); the
test is skipped where the kernel does not allow one.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys

import duckdb
import pytest

from harness.errors import StoreError
from harness.results.store import Store
from tests.reliability.helpers import one_line


def _userns_ok() -> bool:
    if shutil.which("unshare") is None:
        return False
    r = subprocess.run(["unshare", "-rm", "true"], capture_output=True, check=False)
    return r.returncode == 0


@pytest.mark.integration
def test_an_intact_file_on_a_read_only_filesystem_is_not_called_damaged(tmp_path):
    if not _userns_ok():
        pytest.skip("no user namespaces here (unshare -rm)")
    db = tmp_path / "ro" / "r.duckdb"
    Store(db)  # a good, empty results file
    before = db.read_bytes()
    script = (
        "from harness.cli import main; import sys; "
        f"sys.exit(main(['export', '--format', 'csv', '--db', {str(db)!r}])) if sys.argv[1] == 'read' else "
        f"sys.exit(main(['judge', '--run', 'x', '--db', {str(db)!r}, '--judge-url', 'http://127.0.0.1:9/v1', "
        "'--judge-model', 'm']))"
    )
    mount = f"mount -o bind,ro {db.parent} {db.parent}"
    out = {}
    for mode in ("write", "read"):
        r = subprocess.run(
            ["unshare", "-rm", "sh", "-c", f'{mount} && exec "$0" -c "$1" {mode}', sys.executable, script],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        out[mode] = r
    w = out["write"]
    assert w.returncode != 0
    line = one_line(w.stderr)
    assert "cannot be written" in line and "read-only filesystem" in line, line
    assert "damaged" not in line
    # reading it works on the read-only filesystem: no protocols yet is its own one line, not "damaged"
    assert "damaged" not in out["read"].stderr and "Traceback" not in out["read"].stderr
    assert db.read_bytes() == before


def test_a_sqlite_file_is_not_a_duckdb_file_and_no_extension_is_fetched(tmp_path):
    lite = tmp_path / "results.db"
    with sqlite3.connect(lite) as con:
        con.execute("CREATE TABLE t (x)")
    before = lite.read_bytes()
    for ro in (False, True):
        with pytest.raises(StoreError) as e:
            Store(lite, read_only=ro)
        msg = str(e.value)
        assert "not a DuckDB results database (a SQLite database)" in msg and "\n" not in msg
        assert "damaged" not in msg and "download" not in msg.lower()
    assert lite.read_bytes() == before
    # and no connection the store opens may load or install an extension on its own
    store = Store(tmp_path / "r.duckdb")
    with store.connect() as con, pytest.raises(duckdb.Error) as e:
        con.execute(f"SELECT * FROM sqlite_scan('{lite}', 't')").fetchall()
    assert "download" not in str(e.value).lower() and "http" not in str(e.value).lower()


def test_a_text_file_is_not_a_duckdb_file(tmp_path):
    junk = tmp_path / "r.duckdb"
    junk.write_text("hello world\n" * 1000)
    with pytest.raises(StoreError, match=r"not a DuckDB results database \(a file starting"):
        Store(junk)


def test_a_damaged_file_is_still_called_damaged(tmp_path):
    db = tmp_path / "r.duckdb"
    Store(db)
    data = bytearray(db.read_bytes())
    db.write_bytes(bytes(data[: len(data) // 3]))  # the magic survives, the blocks do not
    with pytest.raises(StoreError, match="damaged or truncated"):
        Store(db)


@pytest.mark.integration
def test_a_locked_file_is_said_to_be_locked(tmp_path):
    db = tmp_path / "r.duckdb"
    Store(db)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import duckdb,time; c=duckdb.connect({str(db)!r}); print('held', flush=True); time.sleep(30)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(StoreError) as e:
            Store(db, lock_timeout=0.3)
        assert "another process holds the database lock" in str(e.value)
        assert "damaged" not in str(e.value)
    finally:
        holder.kill()
        holder.wait()
