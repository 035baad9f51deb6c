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
