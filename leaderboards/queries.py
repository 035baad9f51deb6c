"""Read-only queries over the results database (``harness.store``).

Every function takes an open-nothing :class:`harness.store.Store` built with ``read_only=True``:
each query opens its own short read-only connection and closes it (a long-lived connection,
even read-only, would block the writer of a running ``harness run``).

"Latest" means: for each (method, model, protocol_id, dataset), the newest evaluation run that has
samples of that dataset. The leaderboard, ``harness regress`` and ``harness export`` all read
scores through :func:`latest_values`, so they always agree on which run a number comes from.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.store import ERROR_STATUS, Store

LATEST_RUNS_SQL = """
WITH per AS (
  SELECT r.run_id, r.method, r.model, coalesce(r.label, '') AS label, r.protocol_id, r.protocol_name,
         r.started_at, r.status, r.command, s.dataset, count(*) AS n
  FROM runs r JOIN samples s USING (run_id)
  WHERE r.kind = 'eval' {where}
  GROUP BY ALL
)
SELECT * FROM per
QUALIFY row_number() OVER (
  PARTITION BY method, model, protocol_id, dataset ORDER BY started_at DESC, run_id DESC
) = 1
"""


def open_results(path: str | Path) -> Store:
    """The results database at ``path``, read-only (a clear error when there is none)."""
    return Store(path, read_only=True, lock_timeout=15.0)


COMPLETE = "complete"
"""The one run status whose rows are finished (``failed``, ``interrupted``, ``running``,
``incomplete`` runs are partial)."""


def _protocol_filter(protocol_id: str | None, complete_only: bool = False) -> tuple[str, list[str]]:
    """The WHERE fragment of one protocol; ``complete_only`` leaves partial runs out (an older
    complete run of the same method, model and dataset is then the latest)."""
    where = f"AND r.status = '{COMPLETE}'" if complete_only else ""
    if protocol_id is None:
        return where, []
    return f"{where} AND r.protocol_id = ?", [protocol_id]


def protocols(store: Store) -> pd.DataFrame:
    """Protocols with scored evaluation runs: ``protocol_id, protocol_name, runs, methods, last``."""
    return store.query(
        """SELECT r.protocol_id, any_value(r.protocol_name) AS protocol_name,
                  count(DISTINCT r.run_id) AS runs, count(DISTINCT r.method) AS methods,
                  max(r.started_at) AS last
           FROM runs r WHERE r.kind = 'eval' AND EXISTS (SELECT 1 FROM samples s WHERE s.run_id = r.run_id)
           GROUP BY r.protocol_id ORDER BY last DESC, r.protocol_id"""
    )


def protocol_json(store: Store, protocol_id: str) -> str | None:
    df = store.query("SELECT protocol_json FROM runs WHERE protocol_id = ? LIMIT 1", [protocol_id])
    return None if df.empty else str(df.iloc[0, 0])


def latest_runs(store: Store, protocol_id: str | None = None, complete_only: bool = False) -> pd.DataFrame:
    """One row per (method, model, protocol_id, dataset): the newest run with that dataset, and n."""
    where, params = _protocol_filter(protocol_id, complete_only)
    return store.query(LATEST_RUNS_SQL.format(where=where) + " ORDER BY method, model, dataset", params)


def metrics_present(store: Store, protocol_id: str | None = None, complete_only: bool = False) -> list[str]:
    """Metric names stored for the latest runs (of one protocol, or of all)."""
    where, params = _protocol_filter(protocol_id, complete_only)
    df = store.query(
        f"""WITH latest AS ({LATEST_RUNS_SQL.format(where=where)})
            SELECT DISTINCT m.metric FROM sample_metrics m JOIN latest l USING (run_id, dataset)
            ORDER BY m.metric""",
        params,
    )
    return [str(x) for x in df["metric"]]


def latest_values(
    store: Store,
    protocol_id: str | None = None,
    metrics: list[str] | None = None,
    complete_only: bool = False,
) -> pd.DataFrame:
    """Per-question metric values of the latest runs.

    Columns: ``method, model, label, protocol_id, protocol_name, run_id, dataset, sample_id,
    metric, value``; ordered by key and sample position (so paired comparisons line up).
    """
    where, params = _protocol_filter(protocol_id, complete_only)
    metric_where = ""
    if metrics is not None:
        if not metrics:
            return _empty_values()
        metric_where = f"WHERE m.metric IN ({', '.join('?' for _ in metrics)})"
        params = [*params, *metrics]
    return store.query(
        f"""WITH latest AS ({LATEST_RUNS_SQL.format(where=where)})
            SELECT l.method, l.model, l.label, l.protocol_id, l.protocol_name, l.run_id, m.dataset,
                   m.sample_id, m.metric, m.value
            FROM sample_metrics m JOIN latest l USING (run_id, dataset)
            JOIN samples s USING (run_id, dataset, sample_id)
            {metric_where}
            ORDER BY l.method, l.model, l.protocol_id, m.dataset, m.metric, s.position, m.sample_id""",
        params,
    )


def _empty_values() -> pd.DataFrame:
    cols = ["method", "model", "label", "protocol_id", "protocol_name", "run_id", "dataset", "sample_id"]
    return pd.DataFrame(columns=[*cols, "metric", "value"])


def has_relation(store: Store, name: str) -> bool:
    """Whether the database has a table or view ``name`` (older files lack newer views)."""
    df = store.query(
        """SELECT count(*) AS n FROM (SELECT table_name AS name FROM duckdb_tables()
           UNION ALL SELECT view_name FROM duckdb_views()) WHERE name = ?""",
        [name],
    )
    return int(df.iloc[0, 0]) > 0


def latest_costs(store: Store, protocol_id: str, complete_only: bool = False) -> pd.DataFrame:
    """Per-question cost of the latest runs: retrievals, LLM calls, tokens, seconds and USD.

    Failed samples (extraction status ``error``: no answer, no metrics) are left out, as in the
    store's ``sample_costs`` view. ``tokens`` (and ``prompt_tokens`` / ``completion_tokens``) are
    NULL where a server did not report token counts (stored as -1); ``usd`` comes from the store's
    ``sample_costs`` view (NULL when the price is unknown, or the view absent); ``answered`` is 1
    when an answer was extracted."""
    costed = has_relation(store, "sample_costs")
    usd = "c.cost_usd" if costed else "CAST(NULL AS DOUBLE)"
    join = "LEFT JOIN sample_costs c USING (run_id, dataset, sample_id)" if costed else ""
    where, params = _protocol_filter(protocol_id, complete_only)
    return store.query(
        f"""WITH latest AS ({LATEST_RUNS_SQL.format(where=where)})
            SELECT l.method, l.model, l.label, l.run_id, s.dataset, s.sample_id,
                   s.n_retrievals AS retrievals, s.n_llm_calls AS llm_calls,
                   CASE WHEN s.prompt_tokens < 0 OR s.completion_tokens < 0 THEN NULL
                        ELSE s.prompt_tokens + s.completion_tokens END AS tokens,
                   CASE WHEN s.prompt_tokens < 0 THEN NULL ELSE s.prompt_tokens END AS prompt_tokens,
                   CASE WHEN s.completion_tokens < 0 THEN NULL ELSE s.completion_tokens END
                     AS completion_tokens,
                   s.latency_s AS seconds, {usd} AS usd,
                   CASE WHEN s.extraction_status IN ({ANSWERED}) THEN 1.0 ELSE 0.0 END AS answered
            FROM samples s JOIN latest l USING (run_id, dataset) {join}
            WHERE s.extraction_status IS DISTINCT FROM '{ERROR_STATUS}'  -- failed: no answer, no cost
            ORDER BY l.method, l.model, s.dataset, s.position""",
        params,
    )


ANSWERED = "'ok', 'multiple_answers'"
"""Extraction statuses of an answered question (as ``harness run``'s summary counts them)."""

# Generation turn statuses of a malformed action (harness.rollout.engine): the question's format
# is valid when none of its generations has one.
INVALID_FORMAT = "'invalid_action', 'empty_query'"


def latest_row_stats(store: Store, protocol_id: str, complete_only: bool = False) -> pd.DataFrame:
    """Per (method, model) of the latest runs: ``n, answered, valid_format, n_error, partial_runs,
    n_expected``. ``answered``: share of questions with an extracted answer; ``valid_format``: share
    whose every generation was a well-formed action; ``n_error``: failed samples (extraction status
    ``error``, never scored);
    ``partial_runs``: the row's runs that did not end ``complete`` (status and count)."""
    where, params = _protocol_filter(protocol_id, complete_only)
    return store.query(
        f"""WITH latest AS ({LATEST_RUNS_SQL.format(where=where)}),
            bad AS (
              SELECT t.run_id, t.dataset, t.sample_id FROM turns t JOIN latest l USING (run_id, dataset)
              WHERE t.kind = 'generate' AND t.status IN ({INVALID_FORMAT}) GROUP BY ALL
            ),
            per AS (
              SELECT l.method, l.model, s.run_id, s.dataset,
                     s.extraction_status IN ({ANSWERED}) AS answered,
                     b.sample_id IS NULL AS valid_format,
                     s.extraction_status = '{ERROR_STATUS}' AS errored
              FROM samples s JOIN latest l USING (run_id, dataset)
              LEFT JOIN bad b USING (run_id, dataset, sample_id)
            ),
            runs_of AS (
              SELECT l.method, l.model,
                     string_agg(DISTINCT CASE WHEN r.status <> '{COMPLETE}' THEN r.run_id || ' ' || r.status END, ', ')
                       AS partial_runs,
                     count(DISTINCT CASE WHEN r.status <> '{COMPLETE}' THEN r.run_id END) AS n_partial
              FROM latest l JOIN runs r USING (run_id) GROUP BY ALL
            )
            SELECT p.method, p.model, count(*) AS n, avg(p.answered::DOUBLE) AS answered,
                   avg(p.valid_format::DOUBLE) AS valid_format, sum(p.errored::INTEGER) AS n_error,
                   any_value(o.partial_runs) AS partial_runs, any_value(o.n_partial) AS n_partial
            FROM per p JOIN runs_of o USING (method, model)
            GROUP BY p.method, p.model ORDER BY p.method, p.model""",
        params,
    )


def reported(store: Store) -> pd.DataFrame:
    """Every published number (``reported`` table)."""
    return store.query(
        """SELECT paper, method, model, dataset, metric, value, source, setting, note FROM reported
           ORDER BY paper, setting, method, model, dataset, metric"""
    )


# -- trajectories --------------------------------------------------------------------------------
def run_questions(store: Store, run_id: str, dataset: str) -> pd.DataFrame:
    """The questions of a run on one dataset: ``sample_id, position, question, prediction, extraction_status``."""
    return store.query(
        """SELECT sample_id, position, question, prediction, extraction_status FROM samples
           WHERE run_id = ? AND dataset = ? ORDER BY position, sample_id""",
        [run_id, dataset],
    )


def metric_values_of_run(store: Store, run_id: str, dataset: str, metric: str) -> pd.DataFrame:
    """``sample_id, value`` of one metric for every question of a run on one dataset."""
    return store.query(
        "SELECT sample_id, value FROM sample_metrics WHERE run_id = ? AND dataset = ? AND metric = ?",
        [run_id, dataset, metric],
    )


def sample_row(store: Store, run_id: str, dataset: str, sample_id: str) -> pd.DataFrame:
    return store.query(
        "SELECT * FROM samples WHERE run_id = ? AND dataset = ? AND sample_id = ?",
        [run_id, dataset, sample_id],
    )


def sample_metric_rows(store: Store, run_id: str, dataset: str, sample_id: str) -> pd.DataFrame:
    return store.query(
        """SELECT metric, value FROM sample_metrics WHERE run_id = ? AND dataset = ? AND sample_id = ?
           ORDER BY metric""",
        [run_id, dataset, sample_id],
    )


def turn_rows(store: Store, run_id: str, dataset: str, sample_id: str) -> pd.DataFrame:
    return store.query(
        """SELECT turn_index, kind, text, query, doc_ids, doc_scores, prompt_tokens, completion_tokens,
                  observation_tokens, latency_s, stop_reason, status
           FROM turns WHERE run_id = ? AND dataset = ? AND sample_id = ? ORDER BY turn_index""",
        [run_id, dataset, sample_id],
    )


def judgement_rows(store: Store, question: str, texts: list[str]) -> pd.DataFrame:
    """Judge verdicts on this question for any of ``texts`` (the prediction, or the whole response
    for prompts that judge the response); a verdict depends on the judged text, not on the run."""
    if not texts:
        return pd.DataFrame()
    marks = ", ".join("?" for _ in texts)
    return store.query(
        f"""SELECT judge_model, prompt_id, prompt_hash, status, verdict, score, rationale, created_at
            FROM judgements WHERE question = ? AND prediction IN ({marks}) ORDER BY created_at""",
        [question, *texts],
    )


# -- training --------------------------------------------------------------------------------------
def train_runs(store: Store) -> pd.DataFrame:
    """Runs with logged training steps: ``run_id, method, model, label, status, started_at, steps``."""
    return store.query(
        """SELECT r.run_id, r.method, r.model, coalesce(r.label, '') AS label, r.status, r.started_at,
                  count(DISTINCT t.step) AS steps
           FROM runs r JOIN train_steps t USING (run_id)
           GROUP BY ALL ORDER BY r.started_at DESC, r.run_id"""
    )


def train_steps(store: Store, run_id: str) -> pd.DataFrame:
    """``step, metric, value`` of one training run."""
    return store.query(
        "SELECT step, metric, value FROM train_steps WHERE run_id = ? ORDER BY step, metric", [run_id]
    )
