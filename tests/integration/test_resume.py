"""Kill a run half-way with SIGKILL, resume it: the result equals an uninterrupted run's, with no
sample duplicated or lost."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

pytestmark = pytest.mark.integration

LIMIT = 6
DATASETS = 3  # mini-multihop: hotpotqa, 2wikimultihopqa, musique


def run_cmd(model: Path, db: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "harness",
        "run",
        "--method",
        "direct,naive_rag",
        "--bench",
        "mini-multihop",
        "--limit",
        str(LIMIT),
        "--batch-size",
        "1",
        "--model",
        str(model),
        "--db",
        str(db),
        "--no-progress",
        *extra,
    ]


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


def test_kill_and_resume_equals_uninterrupted(tiny_dir: Path, tmp_path: Path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    ref_db, db = tmp_path / "ref.duckdb", tmp_path / "killed.duckdb"
    subprocess.run(run_cmd(tiny_dir, ref_db), check=True, env=env, capture_output=True, timeout=600)
    total = 2 * LIMIT * DATASETS

    proc = subprocess.Popen(run_cmd(tiny_dir, db), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 300
        while count_samples(db) < 3 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    done_at_kill = count_samples(db)
    assert 0 < done_at_kill < total, f"the kill did not land mid-run ({done_at_kill} of {total} samples)"

    out = subprocess.run(
        run_cmd(tiny_dir, db, "--resume"), check=True, env=env, capture_output=True, text=True, timeout=600
    )
    assert "direct" in out.stdout and "naive_rag" in out.stdout  # the summary table is printed
    with duckdb.connect(str(db), read_only=True) as con:
        n, distinct = con.execute(
            "SELECT count(*), count(DISTINCT (run_id, dataset, sample_id)) FROM samples"
        ).fetchone()
        runs = con.execute("SELECT method, status FROM runs ORDER BY method").fetchall()
    assert n == distinct == total
    assert runs == [("direct", "complete"), ("naive_rag", "complete")]  # resumed, not restarted
    assert table(db) == table(ref_db)
