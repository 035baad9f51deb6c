"""The results store: one DuckDB file.

Tables
- ``runs``: one row per (method, model, protocol, bench) evaluation or training run.
- ``samples``: one row per finished question of a run (prediction, extraction status, counts).
- ``sample_metrics``: long format ``(run, dataset, sample, metric, value)``; judge scores land here too.
- ``turns``: one row per generation / retrieval / auxiliary LLM call of a sample.
- ``judgements``: LLM-judge verdicts, keyed so that no verdict is ever asked twice.
- ``prices``: USD per 1M tokens per model and GPU-hour per backend; views ``sample_costs``,
  ``run_costs`` and ``judge_costs`` price every question, run and judge (see :mod:`harness.results.cost`).
- ``reported``: published numbers with their citation.
- ``retrieval_evals``: recall@k of retrievers on benches.
- ``train_steps``: per-step training metrics.

Samples that failed (a generation or judge request that still failed after the backend's
retries) are stored with ``extraction_status = 'error'`` and the reason in ``error``, and with no
metric rows: they are never scored as answers. ``--resume`` retries them (:meth:`Store.finished_samples`
leaves them out, and :meth:`Store.add_samples` replaces an errored row by its retry).

Ownership: the process running a run records itself in ``runs`` (``owner_pid``, ``owner_host``,
``heartbeat_at``, refreshed after every batch); :meth:`Store.claim_run` refuses to hand a run to a
second process while its owner is alive (same host: the pid exists; another host: a heartbeat
younger than ``OWNER_STALE_S``). Credentials in URLs are redacted (:func:`harness.secrets.redact`)
in every run record before it is written.

Run rows are created, resumed and finished through :mod:`harness.results.lifecycle` (``harness run``,
``train``, ``sft``); reports read through :mod:`harness.results.queries`, where every read query over these
tables lives, with values passed as parameters.

Opening checks the file first, and tells apart, each in its own one-line :class:`StoreError`
naming the file and what to do, before any work starts: a file that is not a DuckDB database (a
SQLite file, text; DuckDB is never asked to read it, so it never fetches an extension), a file or
folder that cannot be written (a read-only filesystem, no permission: the file is intact), a file
another process holds locked, and a truncated or damaged file. DuckDB never reaches the network:
every connection turns extension autoloading and autoinstalling off (:data:`DUCKDB_CONFIG`).

Concurrency: DuckDB allows one writing process per file. Every operation opens a short-lived
connection around one transaction and retries on the lock error with backoff until
``lock_timeout`` seconds, then raises :class:`StoreError` naming the file and the holder. Writes of a
batch (its samples, metrics and turns) are one transaction, so an interrupted run loses at most the
batch in flight and never leaves a half-written sample; ``--resume`` skips finished samples.
"""

from __future__ import annotations

import json
import os
import random
import socket
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from harness.errors import StoreError
from harness.secrets import redact
from harness.types import Trajectory

DEFAULT_DB = Path("results") / "harness.duckdb"
SCHEMA_VERSION = 1
# a run owned by a process on another host counts as abandoned once its heartbeat is this old
OWNER_STALE_S = 15 * 60
# the marker of a sample whose generation failed (never scored, retried by --resume)
ERROR_STATUS = "error"

# Cost views (harness.results.cost explains the rules). A cost is NULL, never 0, when it is unknown: an
# unpriced model, or token counts a server did not report (-1). Aggregates are NULL when any
# sample's cost is; usd_per_correct is NULL when no answer is correct (by EM).
COST_VIEWS = [
    """CREATE OR REPLACE VIEW sample_costs AS
    SELECT s.run_id, s.dataset, s.sample_id, r.method, r.model, r.backend,
           s.prompt_tokens, s.completion_tokens, s.n_retrievals, s.n_llm_calls, s.latency_s,
           em.value AS em,
           CASE WHEN b.token_priced = false THEN 0.0
                WHEN s.prompt_tokens < 0 OR s.completion_tokens < 0 THEN NULL
                ELSE (s.prompt_tokens * m.input_usd_per_1m + s.completion_tokens * m.output_usd_per_1m) / 1e6
           END AS token_usd,
           CASE WHEN b.gpu_hourly_usd IS NULL THEN NULL ELSE s.latency_s END AS gpu_seconds,
           coalesce(b.gpu_hourly_usd, 0.0) * s.latency_s / 3600.0 AS gpu_usd,
           token_usd + gpu_usd AS cost_usd
    FROM samples s JOIN runs r USING (run_id)
    LEFT JOIN prices b ON b.kind = 'backend' AND b.name = r.backend
    LEFT JOIN prices m ON m.kind = 'model' AND m.name = r.model
    LEFT JOIN sample_metrics em
      ON em.run_id = s.run_id AND em.dataset = s.dataset AND em.sample_id = s.sample_id AND em.metric = 'em'
    WHERE s.extraction_status IS DISTINCT FROM 'error'
    """,
    """CREATE OR REPLACE VIEW run_costs AS
    SELECT run_id, method, model, backend, count(*) AS n,
           CASE WHEN count(cost_usd) = count(*) THEN sum(cost_usd) END AS cost_usd,
           CASE WHEN count(cost_usd) = count(*) THEN avg(cost_usd) END AS cost_usd_per_q,
           sum(em) AS n_correct_em,
           CASE WHEN count(cost_usd) = count(*) AND sum(em) > 0 THEN sum(cost_usd) / sum(em) END
             AS usd_per_correct,
           avg(n_retrievals) AS retrievals_per_q, avg(n_llm_calls) AS llm_calls_per_q,
           sum(prompt_tokens) AS prompt_tokens, sum(completion_tokens) AS completion_tokens,
           sum(gpu_seconds) AS gpu_seconds, count(*) - count(cost_usd) AS n_unpriced
    FROM sample_costs GROUP BY run_id, method, model, backend
    """,
    """CREATE OR REPLACE VIEW judge_costs AS
    SELECT j.judge_model, j.prompt_id, j.prompt_hash, count(*) AS n,
           sum(j.prompt_tokens) AS prompt_tokens, sum(j.completion_tokens) AS completion_tokens,
           CASE WHEN bool_and(j.prompt_tokens >= 0 AND j.completion_tokens >= 0)
                THEN (sum(j.prompt_tokens) * any_value(m.input_usd_per_1m)
                      + sum(j.completion_tokens) * any_value(m.output_usd_per_1m)) / 1e6 END AS cost_usd
    FROM judgements j LEFT JOIN prices m ON m.kind = 'model' AND m.name = j.judge_model
    WHERE j.status NOT IN ('timeout', 'error')
    GROUP BY j.judge_model, j.prompt_id, j.prompt_hash
    """,
]

SCHEMA = [
    """CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)""",
    """CREATE TABLE IF NOT EXISTS runs (
        run_id VARCHAR PRIMARY KEY,
        kind VARCHAR,               -- eval | train
        method VARCHAR, model VARCHAR, backend VARCHAR,
        protocol_id VARCHAR, protocol_name VARCHAR, protocol_json VARCHAR,
        method_spec_hash VARCHAR, method_spec_json VARCHAR,
        bench VARCHAR, label VARCHAR,
        git_commit VARCHAR, versions_json VARCHAR, command VARCHAR,
        started_at TIMESTAMP, ended_at TIMESTAMP, status VARCHAR,
        n_expected INTEGER, seconds DOUBLE,
        owner_pid INTEGER, owner_host VARCHAR, heartbeat_at TIMESTAMP
    )""",
    """CREATE TABLE IF NOT EXISTS samples (
        run_id VARCHAR, dataset VARCHAR, sample_id VARCHAR,
        position INTEGER, question VARCHAR, answers VARCHAR[],
        prediction VARCHAR, extraction_status VARCHAR, error VARCHAR, response VARCHAR,
        n_retrievals INTEGER, n_llm_calls INTEGER, prompt_tokens BIGINT, completion_tokens BIGINT,
        retrieved_ids VARCHAR[], gold_ids VARCHAR[], latency_s DOUBLE, meta_json VARCHAR,
        created_at TIMESTAMP,
        PRIMARY KEY (run_id, dataset, sample_id)
    )""",
    """CREATE TABLE IF NOT EXISTS sample_metrics (
        run_id VARCHAR, dataset VARCHAR, sample_id VARCHAR, metric VARCHAR, value DOUBLE,
        PRIMARY KEY (run_id, dataset, sample_id, metric)
    )""",
    """CREATE TABLE IF NOT EXISTS turns (
        run_id VARCHAR, dataset VARCHAR, sample_id VARCHAR, turn_index INTEGER, kind VARCHAR,
        text VARCHAR, query VARCHAR, doc_ids VARCHAR[], doc_scores DOUBLE[],
        prompt_tokens INTEGER, completion_tokens INTEGER, observation_tokens INTEGER,
        latency_s DOUBLE, stop_reason VARCHAR, status VARCHAR, prefill_tokens INTEGER,
        PRIMARY KEY (run_id, dataset, sample_id, turn_index)
    )""",
    """CREATE TABLE IF NOT EXISTS judgements (
        key VARCHAR PRIMARY KEY, judge_model VARCHAR, prompt_id VARCHAR, prompt_hash VARCHAR,
        question VARCHAR, golds VARCHAR[], prediction VARCHAR,
        status VARCHAR, verdict VARCHAR, score DOUBLE, rationale VARCHAR, raw VARCHAR,
        prompt_tokens INTEGER, completion_tokens INTEGER, latency_s DOUBLE, created_at TIMESTAMP
    )""",
    """CREATE TABLE IF NOT EXISTS reported (
        paper VARCHAR, method VARCHAR, model VARCHAR, dataset VARCHAR, metric VARCHAR,
        value DOUBLE, source VARCHAR, setting VARCHAR, note VARCHAR,
        PRIMARY KEY (paper, method, model, dataset, metric, setting)
    )""",
    """CREATE TABLE IF NOT EXISTS retrieval_evals (
        created_at TIMESTAMP, bench VARCHAR, dataset VARCHAR, retriever VARCHAR, retriever_spec VARCHAR,
        corpus_id VARCHAR, corpus_hash VARCHAR, k INTEGER, recall DOUBLE, n INTEGER, seconds DOUBLE
    )""",
    """CREATE TABLE IF NOT EXISTS train_steps (
        run_id VARCHAR, step INTEGER, metric VARCHAR, value DOUBLE, created_at TIMESTAMP,
        PRIMARY KEY (run_id, step, metric)
    )""",
    # prices (synced from harness.results.cost: presets overridden by results/prices.json):
    # kind 'model' rows price tokens; kind 'backend' rows say whether the backend's tokens are
    # billed (token_priced; false for in-process models) and what an hour of its GPU costs
    """CREATE TABLE IF NOT EXISTS prices (
        kind VARCHAR, name VARCHAR,
        input_usd_per_1m DOUBLE, output_usd_per_1m DOUBLE,
        token_priced BOOLEAN, gpu_hourly_usd DOUBLE,
        source VARCHAR, updated_at TIMESTAMP,
        PRIMARY KEY (kind, name)
    )""",
    *COST_VIEWS,
]

# Columns added after a table was first released: older files get them when opened for writing.
MIGRATIONS = [
    "ALTER TABLE runs ADD COLUMN IF NOT EXISTS owner_pid INTEGER",
    "ALTER TABLE runs ADD COLUMN IF NOT EXISTS owner_host VARCHAR",
    "ALTER TABLE runs ADD COLUMN IF NOT EXISTS heartbeat_at TIMESTAMP",
    # prompt tokens the backend computed (the rest came from its prefix cache); NULL = unknown
    "ALTER TABLE turns ADD COLUMN IF NOT EXISTS prefill_tokens INTEGER",
]


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


@dataclass
class RunRecord:
    run_id: str
    kind: str
    method: str
    model: str
    backend: str
    protocol_id: str
    protocol_name: str
    protocol_json: str
    method_spec_hash: str
    method_spec_json: str
    bench: str
    label: str = ""
    git_commit: str = ""
    versions_json: str = "{}"
    command: str = ""
    started_at: datetime = field(default_factory=_now)
    ended_at: datetime | None = None
    status: str = "running"
    n_expected: int = 0
    seconds: float = 0.0
    owner_pid: int | None = None
    owner_host: str | None = None
    heartbeat_at: datetime | None = None


def this_owner() -> tuple[int, str]:
    """(pid, hostname) of this process, as recorded in ``runs.owner_pid`` / ``owner_host``."""
    return os.getpid(), socket.gethostname()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        return True
    try:  # a killed child its parent has not reaped yet is a zombie: dead
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rpartition(")")[2].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def owner_alive(run: RunRecord, *, now: datetime | None = None) -> bool:
    """Whether another live process owns ``run`` (a ``running`` run whose owner still runs)."""
    if run.status != "running" or run.owner_pid is None:
        return False
    pid, host = this_owner()
    if run.owner_host == host:
        return run.owner_pid != pid and _pid_alive(int(run.owner_pid))
    beat = run.heartbeat_at or run.started_at
    return ((now or _now()) - beat).total_seconds() < OWNER_STALE_S


@dataclass
class RetrievalEvalRow:
    bench: str
    dataset: str
    retriever: str
    retriever_spec: str
    corpus_id: str
    corpus_hash: str
    k: int
    recall: float
    n: int
    seconds: float


@dataclass
class ReportedRow:
    """A number published in a paper, with where it comes from (e.g. ``"Table 2"``)."""

    paper: str
    method: str
    model: str
    dataset: str
    metric: str
    value: float
    source: str
    setting: str = ""
    note: str = ""


@dataclass
class ScoredSample:
    """A finished trajectory with its position in the bench and its metric values."""

    trajectory: Trajectory
    metrics: dict[str, float]
    position: int
    gold_ids: list[str] = field(default_factory=list)
    latency_s: float = 0.0


# every connection: no extension is ever loaded or installed behind our back (a SQLite file, a
# function name, would make DuckDB download one)
DUCKDB_CONFIG = {"autoload_known_extensions": False, "autoinstall_known_extensions": False}
# a DuckDB file's magic bytes, at offset 8 of its first header block
DUCKDB_MAGIC = b"DUCK"


def _is_lock_error(e: Exception) -> bool:
    msg = str(e)
    return "Could not set lock" in msg or "Conflicting lock" in msg


class DamagedStoreError(StoreError):
    """The results file exists but cannot be read as a DuckDB database (truncated, overwritten)."""


class Store:
    """A DuckDB results file. Cheap to construct; every call opens its own connection."""

    def __init__(
        self,
        path: str | Path = DEFAULT_DB,
        *,
        read_only: bool = False,
        create: bool = True,
        lock_timeout: float = 60.0,
    ):
        """``read_only``: for reports (never creates the file); ``create=False``: a file to add to
        (e.g. judge stored runs) that must already exist."""
        self.path = Path(path)
        self.read_only = read_only
        self.lock_timeout = lock_timeout
        if (read_only or not create) and not self.path.exists():
            raise StoreError(f"{self.path}: no results database here (run `harness run` first or pass --db)")
        if self.path.is_dir():
            raise StoreError(f"{self.path}: is a directory, not a results database; pass a file to --db")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._check_kind()
        self._check_writable()
        self._check_file()
        if not read_only:
            try:
                with self.connect() as con:
                    for stmt in SCHEMA + MIGRATIONS:
                        con.execute(stmt)
                    con.execute(
                        "INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)]
                    )
            except duckdb.Error as e:
                raise self._damaged(e) from e

    def _damaged(self, e: Exception) -> DamagedStoreError:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        return DamagedStoreError(
            f"{self.path}: the results database is damaged or truncated ({first}); move it aside "
            "(its finished runs cannot be read) and run again, or pass another --db"
        )

    def _check_kind(self) -> None:
        """A file that is not a DuckDB database is refused by its first bytes, before DuckDB opens it."""
        if not self.path.exists() or self.path.stat().st_size < 12:
            return  # new, or empty (damaged: _check_file says so)
        with self.path.open("rb") as f:
            head = f.read(16)
        if head[8:12] == DUCKDB_MAGIC:
            return
        what = (
            "a SQLite database"
            if head.startswith(b"SQLite format 3")
            else "a Parquet file"
            if head.startswith(b"PAR1")
            else f"a file starting {head[:12]!r}"
        )
        raise StoreError(
            f"{self.path}: not a DuckDB results database ({what}); it was left untouched. "
            "Pass the results file to --db (default results/harness.duckdb)"
        )

    def _check_writable(self) -> None:
        """A store that writes needs the file and its folder (for DuckDB's ``.wal``) writable; a
        read-only filesystem or a missing permission is said as such (the file is intact)."""
        if self.read_only:
            return
        for target in (self.path, self.path.parent) if self.path.exists() else (self.path.parent,):
            if not os.access(target, os.W_OK):
                raise StoreError(_unwritable(self.path, target))

    def _check_file(self) -> None:
        """Refuse a truncated or damaged file before any work starts: it must open, and every block
        its tables and metadata use must lie inside the file (a cut file opens, then fails mid-run).
        A file shorter than its blocks need is read in full before it is called damaged."""
        if not self.path.exists():
            return
        if self.path.stat().st_size == 0:
            raise self._damaged(ValueError("the file is empty"))
        wal = self.path.with_name(self.path.name + ".wal")
        try:
            with self.connect() as con:
                # measured while this connection holds the file: no other process writes meanwhile;
                # with a WAL, replayed blocks may not be on disk yet, so only opening is checked
                size, has_wal = self.path.stat().st_size, wal.exists()
                tables = [
                    str(t)
                    for (t,) in con.execute(
                        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database()"
                    ).fetchall()
                ]
                if has_wal:
                    return
                (block_size,) = con.execute(
                    "SELECT block_size FROM pragma_database_size() WHERE database_name = current_database()"
                ).fetchone()
                last = con.execute("SELECT max(block_id) FROM pragma_metadata_info()").fetchone()[0] or 0
                for table in tables:
                    used = con.execute(
                        "SELECT max(block_id) FROM pragma_storage_info(?) WHERE block_id >= 0", [table]
                    ).fetchone()[0]
                    last = max(last, used or 0)
                needed = 3 * 4096 + (int(last) + 1) * int(block_size)  # 3 header blocks, then data
                if size < needed:  # suspicious: read every column of every table to be sure
                    for table in tables:
                        con.execute(f'SELECT max(hash(COLUMNS(*))) FROM "{table}"').fetchall()
        except StoreError as e:
            if "lock" in str(e) or "ermission" in str(e) or "cannot be written" in str(e):
                raise
            raise self._damaged(e.__cause__ or e) from e
        except duckdb.Error as e:
            raise self._damaged(e) from e

    # -- connections -------------------------------------------------------------------------
    @contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A short-lived connection; one transaction; retried while another process holds the lock."""
        deadline = time.monotonic() + self.lock_timeout
        delay = 0.01
        while True:
            try:
                con = duckdb.connect(str(self.path), read_only=self.read_only, config=DUCKDB_CONFIG)
                break
            except duckdb.IOException as e:
                if "Read-only file system" in str(e) or "Permission denied" in str(e):
                    raise StoreError(_unwritable(self.path, self.path)) from e
                if not _is_lock_error(e):
                    raise StoreError(f"{self.path}: cannot open the results database: {e}") from e
                if time.monotonic() > deadline:
                    raise StoreError(
                        f"{self.path}: another process holds the database lock ({e}); "
                        f"waited {self.lock_timeout:.0f}s. Stop it, or use another --db file."
                    ) from e
                time.sleep(delay * (1 + random.random()))
                delay = min(delay * 2, 0.5)
            except duckdb.Error as e:
                raise StoreError(f"{self.path}: not a readable DuckDB results file: {e}") from e
        try:
            if not self.read_only:
                con.execute("BEGIN TRANSACTION")
            yield con
            if not self.read_only:
                con.execute("COMMIT")
        except BaseException as e:
            if not self.read_only:
                with suppress(duckdb.Error):
                    con.execute("ROLLBACK")
            if isinstance(e, duckdb.Error | OSError) and "No space left on device" in str(e):
                raise StoreError(
                    f"{self.path}: the disk is full; this batch was not written, everything before it "
                    "is saved. Free space (or pass --db on another disk) and rerun with --resume"
                ) from e
            if isinstance(e, duckdb.InterruptException) or (
                isinstance(e, RuntimeError) and str(e) == "Query interrupted"
            ):
                # DuckDB checks for Ctrl-C (SIGINT, or SIGTERM's handler in the CLI) while it runs
                # and raises its own error instead: the caller sees the interrupt it was
                raise KeyboardInterrupt(f"{self.path}: interrupted; this batch was not written") from e
            raise
        finally:
            con.close()

    def query(self, sql: str, params: Sequence[Any] | Mapping[str, Any] | None = None) -> pd.DataFrame:
        """The result of one read ``sql`` (values only as parameters: ``?`` with a sequence, ``$name``
        with a mapping); the reports' queries live in :mod:`harness.results.queries`."""
        with self.connect() as con:
            return con.execute(sql, params if params is not None else []).df()

    # -- runs --------------------------------------------------------------------------------
    def create_run(self, run: RunRecord, *, only_one: bool = False) -> None:
        """Insert ``run``; every text field passes through :func:`harness.secrets.redact`.
        ``only_one``: refuse (one-line :class:`StoreError`) when an evaluation run with the same
        settings exists, checked in the insert's transaction (DuckDB lets one process write at a
        time), so two ``--resume`` that found nothing cannot both create the run."""
        row = {k: redact(v) if isinstance(v, str) else v for k, v in run.__dict__.items()}
        with self.connect() as con:
            if only_one:
                other = con.execute(
                    """SELECT run_id, owner_pid, owner_host, status FROM runs WHERE kind='eval' AND method=?
                       AND model=? AND protocol_id=? AND method_spec_hash=? AND bench=?
                       ORDER BY started_at DESC LIMIT 1""",
                    [run.method, run.model, run.protocol_id, run.method_spec_hash, run.bench],
                ).fetchone()
                if other is not None:
                    raise StoreError(
                        f"{self.path}: run {other[0]} with the same settings was started by process "
                        f"{other[1]} on {other[2]} while this --resume was starting (it is {other[3]}); "
                        "wait for it to finish, then --resume again (or drop --resume to start a new run)"
                    )
            df = pd.DataFrame([row])
            _insert(con, "runs", df)

    def get_run(self, run_id: str) -> RunRecord | None:
        with self.connect() as con:
            cur = con.execute("SELECT * FROM runs WHERE run_id = ?", [run_id])
            row = cur.fetchone()
            cols = [d[0] for d in cur.description]
        return None if row is None else RunRecord(**dict(zip(cols, row, strict=True)))

    def find_resumable(
        self, *, method: str, model: str, protocol_id: str, method_spec_hash: str, bench: str
    ) -> tuple[str, str] | None:
        """The newest evaluation run with exactly these settings, as ``(run_id, status)``; None when
        there is none. A ``complete`` one is finished work (``--resume`` reuses it); any other
        status is work to continue."""
        df = self.query(
            """SELECT run_id, status FROM runs WHERE kind='eval' AND method=? AND model=?
               AND protocol_id=? AND method_spec_hash=? AND bench=?
               ORDER BY started_at DESC LIMIT 1""",
            [method, model, protocol_id, method_spec_hash, bench],
        )
        return None if df.empty else (str(df.iloc[0, 0]), str(df.iloc[0, 1]))

    def finish_run(self, run_id: str, status: str, seconds: float) -> None:
        with self.connect() as con:
            con.execute(
                "UPDATE runs SET status=?, ended_at=?, seconds=? WHERE run_id=?",
                [status, _now(), seconds, run_id],
            )

    def claim_run(self, run_id: str) -> None:
        """Make this process the owner of ``run_id`` and mark it ``running``; a :class:`StoreError`
        (one line) when another live process owns it. Read and write are one transaction, and
        DuckDB lets one process write at a time, so two claimants cannot both win."""
        pid, host = this_owner()
        with self.connect() as con:
            cur = con.execute("SELECT * FROM runs WHERE run_id = ?", [run_id])
            row = cur.fetchone()
            if row is None:
                raise StoreError(f"{self.path}: no run {run_id}")
            run = RunRecord(**dict(zip([d[0] for d in cur.description], row, strict=True)))
            if owner_alive(run):
                beat = run.heartbeat_at or run.started_at
                age = (_now() - beat).total_seconds()
                raise StoreError(
                    f"{self.path}: run {run_id} is being written by process {run.owner_pid} on "
                    f"{run.owner_host} (last heartbeat {age:.0f} s ago); wait for it to finish or stop "
                    "it, then --resume (or drop --resume to start a new run)"
                )
            con.execute(
                "UPDATE runs SET status='running', owner_pid=?, owner_host=?, heartbeat_at=? WHERE run_id=?",
                [pid, host, _now(), run_id],
            )

    def finished_samples(self, run_id: str) -> set[tuple[str, str]]:
        """Samples of ``run_id`` that are done; errored samples are not (``--resume`` retries them)."""
        df = self.query(
            "SELECT dataset, sample_id FROM samples WHERE run_id = ? "
            "AND extraction_status IS DISTINCT FROM 'error'",
            [run_id],
        )
        return set(zip(df["dataset"], df["sample_id"], strict=True))

    # -- samples -----------------------------------------------------------------------------
    # long: one transaction: the sample, metric and turn rows of a batch built and written together
    # (with the heartbeat), so a crash never leaves a sample without its metrics or turns
    def add_samples(self, run_id: str, scored: Sequence[ScoredSample], *, heartbeat: bool = False) -> None:
        """Write finished samples with their metrics and turns in one transaction (with
        ``heartbeat``, the run's owner heartbeat is refreshed in the same transaction).

        A sample stored earlier as an error is replaced by its retry; any other sample already
        stored for this run is an error (it would mean a duplicate)."""
        if not scored:
            return
        now = _now()
        sample_rows, metric_rows, turn_rows = [], [], []
        for s in scored:
            t = s.trajectory
            sample_rows.append(
                {
                    "run_id": run_id,
                    "dataset": t.dataset,
                    "sample_id": t.example_id,
                    "position": s.position,
                    "question": t.question,
                    "answers": list(t.answers),
                    "prediction": t.prediction,
                    "extraction_status": t.extraction_status,
                    "error": redact(t.error) if t.error else t.error,  # reasons may quote URLs
                    "response": t.response,
                    "n_retrievals": t.n_retrievals,
                    "n_llm_calls": t.n_llm_calls,
                    "prompt_tokens": t.prompt_tokens,
                    "completion_tokens": t.completion_tokens,
                    "retrieved_ids": t.retrieved_doc_ids,
                    "gold_ids": list(s.gold_ids),
                    "latency_s": s.latency_s,
                    # the texts of the alternative predictions scored as metric[name] go with the meta
                    "meta_json": json.dumps(
                        {**t.meta, "alt_predictions": t.alt_predictions} if t.alt_predictions else t.meta,
                        sort_keys=True,
                        default=str,
                    ),
                    "created_at": now,
                }
            )
            for name, value in s.metrics.items():
                metric_rows.append(
                    {
                        "run_id": run_id,
                        "dataset": t.dataset,
                        "sample_id": t.example_id,
                        "metric": name,
                        "value": float(value),
                    }
                )
            for turn in t.turns:
                turn_rows.append(
                    {
                        "run_id": run_id,
                        "dataset": t.dataset,
                        "sample_id": t.example_id,
                        "turn_index": turn.index,
                        "kind": turn.kind,
                        "text": turn.text,
                        "query": turn.query,
                        "doc_ids": list(turn.doc_ids),
                        "doc_scores": [float(x) for x in turn.doc_scores],
                        "prompt_tokens": turn.prompt_tokens,
                        "prefill_tokens": turn.prefill_tokens,
                        "completion_tokens": turn.completion_tokens,
                        "observation_tokens": turn.observation_tokens,
                        "latency_s": turn.latency_s,
                        "stop_reason": turn.stop_reason,
                        "status": turn.status,
                    }
                )
        samples_df = _frame(sample_rows, {"answers": "list", "retrieved_ids": "list", "gold_ids": "list"})
        metrics_df = pd.DataFrame(metric_rows, columns=["run_id", "dataset", "sample_id", "metric", "value"])
        turns_df = _frame(turn_rows, {"doc_ids": "list", "doc_scores": "list"})
        keys = pd.DataFrame(
            {
                "dataset": [r["dataset"] for r in sample_rows],
                "sample_id": [r["sample_id"] for r in sample_rows],
            }
        )
        try:
            with self.connect() as con:
                con.register("_retried", keys)
                try:
                    for table in ("sample_metrics", "turns", "samples"):
                        con.execute(
                            f"""DELETE FROM {table} t WHERE t.run_id = ? AND EXISTS (
                                  SELECT 1 FROM samples s JOIN _retried k USING (dataset, sample_id)
                                  WHERE s.run_id = t.run_id AND s.dataset = t.dataset
                                    AND s.sample_id = t.sample_id AND s.extraction_status = 'error')""",
                            [run_id],
                        )
                finally:
                    con.unregister("_retried")
                _insert(con, "samples", samples_df)
                if heartbeat:
                    con.execute("UPDATE runs SET heartbeat_at=? WHERE run_id=?", [_now(), run_id])
                if len(metrics_df):
                    _insert(con, "sample_metrics", metrics_df)
                if len(turns_df):
                    _insert(con, "turns", turns_df)
        except duckdb.ConstraintException as e:
            raise StoreError(f"{self.path}: run {run_id} already has one of these samples ({e})") from e

    def add_sample_metrics(self, rows: Sequence[tuple[str, str, str, str, float]]) -> None:
        """Add or replace metric values ``(run_id, dataset, sample_id, metric, value)`` (e.g. judge scores)."""
        if not rows:
            return
        df = pd.DataFrame(rows, columns=["run_id", "dataset", "sample_id", "metric", "value"])
        with self.connect() as con:
            _insert(con, "sample_metrics", df, replace=True)

    # -- judgements ---------------------------------------------------------------------------
    def add_judgements(self, rows: Sequence[Any]) -> None:
        """Insert or replace LLM-judge verdicts: objects whose attributes are the judgements columns
        (:class:`harness.judge.core.Judgement`), in one transaction."""
        if not rows:
            return
        df = _frame([dict(r.__dict__) for r in rows], {"golds": "list"})
        with self.connect() as con:
            _insert(con, "judgements", df, replace=True)

    def get_judgements(self, keys: Sequence[str]) -> list[dict[str, Any]]:
        """The stored verdicts among ``keys`` (as column dicts; absent keys are left out)."""
        if not keys:
            return []
        with self.connect() as con:
            con.register("_keys", pd.DataFrame({"key": list(keys)}))
            try:
                cur = con.execute("SELECT j.* FROM judgements j JOIN _keys USING (key)")
                cols = [d[0] for d in cur.description]
                rows = cur.fetchall()
            finally:
                con.unregister("_keys")
        return [dict(zip(cols, r, strict=True)) for r in rows]

    def replace_prices(self, rows: Sequence[Any]) -> None:
        """Replace the ``prices`` table with ``rows`` (objects with its columns; see harness.results.cost)."""
        df = pd.DataFrame([dict(r.__dict__) for r in rows]) if rows else None
        with self.connect() as con:
            con.execute("DELETE FROM prices")
            if df is not None:
                _insert(con, "prices", df)

    # -- other tables -------------------------------------------------------------------------
    def add_retrieval_evals(self, rows: Sequence[RetrievalEvalRow]) -> None:
        if not rows:
            return
        now = _now()
        df = pd.DataFrame([{**r.__dict__, "created_at": now} for r in rows])
        with self.connect() as con:
            _insert(con, "retrieval_evals", df)

    def replace_reported(self, paper: str, rows: Sequence[ReportedRow]) -> None:
        """Replace every reported number of ``paper`` with ``rows``."""
        df = pd.DataFrame([r.__dict__ for r in rows])
        with self.connect() as con:
            con.execute("DELETE FROM reported WHERE paper = ?", [paper])
            if len(df):
                _insert(con, "reported", df)

    def add_train_steps(self, run_id: str, step: int, metrics: dict[str, float]) -> None:
        now = _now()
        df = pd.DataFrame(
            [
                {"run_id": run_id, "step": step, "metric": k, "value": float(v), "created_at": now}
                for k, v in metrics.items()
            ]
        )
        with self.connect() as con:
            _insert(con, "train_steps", df, replace=True)
            con.execute("UPDATE runs SET heartbeat_at=? WHERE run_id=?", [now, run_id])  # its owner lives


def _frame(rows: list[dict[str, Any]], list_cols: dict[str, str]) -> pd.DataFrame:
    """A DataFrame whose list columns stay Python lists (DuckDB maps them to LIST types)."""
    df = pd.DataFrame(rows)
    for col in list_cols:
        if col in df.columns:
            df[col] = df[col].astype(object)
    return df


def _insert(con: duckdb.DuckDBPyConnection, table: str, df: pd.DataFrame, *, replace: bool = False) -> None:
    """Insert a DataFrame by column name (one vectorised statement)."""
    con.register("_incoming", df)
    try:
        verb = "INSERT OR REPLACE" if replace else "INSERT"
        con.execute(f"{verb} INTO {table} BY NAME SELECT * FROM _incoming")
    finally:
        # after a failed insert the transaction is aborted and unregistering fails too; that
        # error would hide the insert's own (e.g. a duplicate key); connect() rolls back anyway
        with suppress(duckdb.TransactionException):
            con.unregister("_incoming")


def _unwritable(path: Path, target: Path) -> str:
    where = "the file" if target == path else f"its folder {target}"
    return (
        f"{path}: cannot be written ({where} is on a read-only filesystem or lacks write permission); "
        "nothing was changed: read it with the read-only commands (export, leaderboard), or copy it "
        "somewhere writable and pass that to --db"
    )
