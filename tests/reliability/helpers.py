"""Shared pieces of the fault-injection tests: the `harness run` command line against the fake
server, and the result table two runs are compared by."""

from __future__ import annotations

from pathlib import Path

import duckdb

LIMIT = 2
DATASETS = 3  # mini-multihop: hotpotqa, 2wikimultihopqa, musique
TOTAL = LIMIT * DATASETS


def run_args(url: str, tok: Path, db: Path, *extra: str, limit: int = LIMIT) -> list[str]:
    """``harness run`` of the direct baseline over the fake server: one request per question,
    short timeouts, no retry back-off worth waiting for."""
    return [
        "run",
        "--method",
        "direct",
        "--bench",
        "mini-multihop",
        "--limit",
        str(limit),
        "--backend",
        "openai",
        "--model",
        "fake-model",
        "--base-url",
        url,
        "--tokenizer",
        str(tok),
        "--request-timeout",
        "0.5",
        "--retries",
        "1",
        "--db",
        str(db),
        "--no-progress",
        *extra,
    ]


def table(db: Path) -> list[tuple]:
    """Every scored value with its question and prediction (run ids left out: they differ)."""
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(
            """SELECT r.method, s.dataset, s.sample_id, s.prediction, s.extraction_status, m.metric, m.value
               FROM samples s JOIN runs r USING (run_id)
               JOIN sample_metrics m USING (run_id, dataset, sample_id)
               ORDER BY ALL"""
        ).fetchall()


def rows(db: Path, sql: str, params: list | None = None) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql, params or []).fetchall()


def one_line(err: str) -> str:
    """The single line a failure printed (asserts there is exactly one and no traceback)."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err, err
    assert len(lines) == 1, err
    return lines[0]


def questions(limit: int = LIMIT) -> list[tuple[str, str, str]]:
    """(dataset, sample id, question) of the questions `run_args` selects, in bench order."""
    from harness.data.benches import Selection, get_bench, load_bench

    out = []
    for _entry, examples in load_bench(get_bench("mini-multihop"), Selection(mode="first", n=limit)):
        out += [(e.dataset, e.id, e.question) for e in examples]
    return out
