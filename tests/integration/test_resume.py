"""Kill a run half-way with SIGKILL, resume it: the result equals an uninterrupted run's, with no
sample duplicated or lost.

The killed run is the CLI's ``main`` in a forked child: the interpreter, torch and the tiny model's
libraries are already imported, so the test costs seconds instead of three fresh `python -m harness`
start-ups (about 96 s before). The uninterrupted and the resumed runs run in this process."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
from pathlib import Path

import duckdb
import pytest

from harness.cli import main

pytestmark = pytest.mark.integration

LIMIT = 4
DATASETS = 3  # mini-multihop: hotpotqa, 2wikimultihopqa, musique


def run_cmd(model: Path, db: Path, *extra: str) -> list[str]:
    return [
        "run",
        "--method",
        "direct,naive_rag",
        "--bench",
        "mini-multihop",
        "--limit",
        str(LIMIT),
        "--batch-size",
        "2",
        "--model",
        str(model),
        "--db",
        str(db),
        "--no-progress",
        *extra,
    ]


def _child(argv: list[str]) -> None:
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - the child's only output
    os._exit(main(argv))


def count_samples(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with duckdb.connect(str(db), read_only=True) as con:
            return con.execute("SELECT count(*) FROM samples").fetchone()[0]
    except duckdb.Error:  # the writer holds the lock at this instant, or the tables are not there yet
        return -1


def table(db: Path) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(
            """SELECT r.method, s.dataset, s.sample_id, s.prediction, s.extraction_status, s.n_retrievals,
                      m.metric, m.value
               FROM samples s JOIN runs r USING (run_id)
               JOIN sample_metrics m USING (run_id, dataset, sample_id)
               ORDER BY ALL"""
        ).fetchall()


def test_kill_and_resume_equals_uninterrupted(tiny_dir: Path, tmp_path: Path, capsys):
    ref_db, db = tmp_path / "ref.duckdb", tmp_path / "killed.duckdb"
    total = 2 * LIMIT * DATASETS

    # the killed run first, so the child forks before this process has run the model
    proc = multiprocessing.get_context("fork").Process(target=_child, args=(run_cmd(tiny_dir, db),))
    proc.start()
    try:
        deadline = time.monotonic() + 300
        while count_samples(db) < 4 and time.monotonic() < deadline and proc.is_alive():
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.join(timeout=30)
    assert proc.exitcode == -signal.SIGKILL
    done_at_kill = count_samples(db)
    assert 0 < done_at_kill < total, f"the kill did not land mid-run ({done_at_kill} of {total} samples)"

    assert main(run_cmd(tiny_dir, ref_db)) == 0
    capsys.readouterr()
    assert main(run_cmd(tiny_dir, db, "--resume")) == 0
    out = capsys.readouterr().out
    assert "direct" in out and "naive_rag" in out  # the summary table is printed
    with duckdb.connect(str(db), read_only=True) as con:
        n, distinct = con.execute(
            "SELECT count(*), count(DISTINCT (run_id, dataset, sample_id)) FROM samples"
        ).fetchone()
        runs = con.execute("SELECT method, status FROM runs ORDER BY method").fetchall()
    assert n == distinct == total
    assert runs == [("direct", "complete"), ("naive_rag", "complete")]  # resumed, not restarted
    with duckdb.connect(str(db), read_only=True) as con:
        first = con.execute("SELECT run_id, method, status, seconds FROM runs ORDER BY method").fetchall()
    assert table(db) == table(ref_db)

    # once more with --resume: both runs are complete, so nothing runs and nothing is added
    assert main(run_cmd(tiny_dir, db, "--resume")) == 0
    out = capsys.readouterr().out
    assert "direct" in out and "naive_rag" in out  # the finished runs' table
    with duckdb.connect(str(db), read_only=True) as con:
        again = con.execute("SELECT run_id, method, status, seconds FROM runs ORDER BY method").fetchall()
        assert con.execute("SELECT count(*) FROM samples").fetchone()[0] == total
    assert again == first  # the same rows, untouched
    assert table(db) == table(ref_db)
