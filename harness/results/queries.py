"""Every read query over the results database (:mod:`harness.results.store`), in one place.

Values reach DuckDB only as parameters (named ``$name``), never spliced into the SQL text: run
ids, metric names, protocol ids and status lists are data. Table and view names are written out.
The store keeps only the reads its own bookkeeping needs (a run's row, the resumable run, the
finished samples of a run, cached verdicts); everything that reports lives here and is used by
``harness run`` (summaries), :mod:`harness.results.cost`, :mod:`harness.judge.stored`, the training
report (:mod:`harness.rl.heldout`) and the leaderboard (``leaderboards`` re-exports this module).

Every function takes a :class:`harness.results.store.Store`; each query opens its own short connection
and closes it (a long-lived connection, even read-only, would block the writer of a running
``harness run``). Build a reader with :func:`open_results`.

"Latest" means: for each (method, model, protocol_id, dataset), the newest evaluation run that has
samples of that dataset, a complete one before any partial one (a partial run is the latest only
where no complete run exists). The leaderboard, ``harness regress`` and ``harness export`` all read
scores through :func:`latest_values`, so they always agree on which run a number comes from.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from harness.errors import ConfigError
from harness.results.store import ERROR_STATUS, Store

log = logging.getLogger(__name__)

COMPLETE = "complete"
"""The one run status whose rows are finished (``failed``, ``interrupted``, ``running``,
``incomplete`` runs are partial)."""

ANSWERED = ("ok", "multiple_answers")
"""Extraction statuses of an answered question (as ``harness run``'s summary counts them)."""

INVALID_FORMAT = ("invalid_action", "empty_query")
"""Generation turn statuses of a malformed action (:mod:`harness.rollout.engine`): a question's
format is valid when none of its generations has one."""


def open_results(path: str | Path) -> Store:
    """The results database at ``path``, read-only (a clear error when there is none)."""
    return Store(path, read_only=True, lock_timeout=15.0)


def _ids(run_ids: Sequence[str]) -> list[str]:
    return [str(r) for r in run_ids]


# -- runs ------------------------------------------------------------------------------------------
def newest_eval_run(store: Store, method: str, bench: str) -> str | None:
    """The id of the newest evaluation run of ``method`` on ``bench``, or None."""
    df = store.query(
        """SELECT run_id FROM runs WHERE kind = 'eval' AND method = $method AND bench = $bench
           ORDER BY started_at DESC LIMIT 1""",
        {"method": method, "bench": bench},
    )
    return None if df.empty else str(df.iloc[0, 0])


# -- the summary of `harness run` ----------------------------------------------------------------
RUN_METRICS_SQL = """
WITH m AS (
  SELECT run_id, dataset, sample_id,
         max(value) FILTER (WHERE metric = 'em') AS em,
         max(value) FILTER (WHERE metric = 'f1') AS f1,
         max(value) FILTER (WHERE metric = 'cover_em') AS cover_em,
         max(value) FILTER (WHERE metric = $primary) AS primary_value
  FROM sample_metrics WHERE list_contains($run_ids, run_id) GROUP BY ALL
)
SELECT r.method, s.dataset,
       count(*) FILTER (WHERE NOT s.failed) AS n,
       count(*) FILTER (WHERE s.failed) AS errors,
       avg(m.primary_value) AS primary, avg(m.em) AS em, avg(m.f1) AS f1, avg(m.cover_em) AS cover_em,
       avg(s.n_retrievals) FILTER (WHERE NOT s.failed) AS retrievals,
       avg(s.n_llm_calls) FILTER (WHERE NOT s.failed) AS llm_calls,
       avg(s.prompt_tokens + s.completion_tokens) FILTER (WHERE NOT s.failed) AS tokens,
       avg(s.latency_s) FILTER (WHERE NOT s.failed) AS seconds_per_q,
       avg(CASE WHEN list_contains($answered, s.extraction_status) THEN 1.0 ELSE 0.0 END)
         FILTER (WHERE NOT s.failed) AS answered
FROM (SELECT *, coalesce(extraction_status = $error, false) AS failed FROM samples) s
JOIN runs r USING (run_id) LEFT JOIN m USING (run_id, dataset, sample_id)
WHERE list_contains($run_ids, s.run_id)
GROUP BY ALL ORDER BY r.method, s.dataset
"""


def run_metrics(store: Store, run_ids: Sequence[str], primary: str = "em") -> pd.DataFrame:
    """Per method x dataset of ``run_ids``: n (scored samples), errors (failed samples: not in n
    or any mean), ``primary`` (the mean of the metric stored as ``primary``: the protocol's primary
    metric), EM, F1, cover-EM, mean retrievals / LLM calls / tokens, seconds per question, and the
    share answered."""
    return store.query(
        RUN_METRICS_SQL,
        {"run_ids": _ids(run_ids), "answered": list(ANSWERED), "error": ERROR_STATUS, "primary": primary},
    )


def prefill_summary(store: Store, run_ids: Sequence[str]) -> pd.DataFrame:
    """Per method: the prompt tokens of every generation whose backend reported its prefill, and
    the tokens it prefilled (the rest came from its prefix cache); methods with none are absent."""
    return store.query(
        """SELECT r.method, sum(t.prompt_tokens) AS prompt_tokens, sum(t.prefill_tokens) AS prefill_tokens
           FROM turns t JOIN runs r USING (run_id)
           WHERE list_contains($run_ids, t.run_id) AND t.prefill_tokens IS NOT NULL
           GROUP BY ALL ORDER BY r.method""",
        {"run_ids": _ids(run_ids)},
    )


def reference_sources(store: Store, run_ids: Sequence[str], key: str) -> pd.DataFrame:
    """Per method x dataset: how many questions a reader answered from their own paragraphs
    (``own_refs``: ``meta[key] == "dataset"``) and how many from a substitute (``substitute_refs``:
    any other value); methods that record no ``meta[key]`` count 0 and 0."""
    return store.query(
        """SELECT r.method, s.dataset,
                  count(*) FILTER (WHERE json_extract_string(s.meta_json, $path) = 'dataset') AS own_refs,
                  count(*) FILTER (WHERE json_extract_string(s.meta_json, $path) <> 'dataset')
                    AS substitute_refs
           FROM samples s JOIN runs r USING (run_id)
           WHERE list_contains($run_ids, s.run_id)
           GROUP BY ALL ORDER BY r.method, s.dataset""",
        {"run_ids": _ids(run_ids), "path": "$." + key},
    )


# -- cost (the views are defined with the store; harness.results.cost explains the rules) -----------------
def cost_rows(store: Store, run_ids: Sequence[str]) -> pd.DataFrame:
    """Per (method, dataset) of ``run_ids`` from the ``sample_costs`` view (see
    :func:`harness.results.cost.cost_summary`, which refreshes the prices first)."""
    return store.query(
        """SELECT method, dataset, count(*) AS n,
                  CASE WHEN count(cost_usd) = count(*) THEN sum(cost_usd) END AS cost_usd,
                  CASE WHEN count(cost_usd) = count(*) THEN avg(cost_usd) END AS cost_usd_per_q,
                  sum(em) AS n_correct_em,
                  CASE WHEN count(cost_usd) = count(*) AND sum(em) > 0 THEN sum(cost_usd) / sum(em) END
                    AS usd_per_correct,
                  avg(n_retrievals) AS retrievals_per_q,
                  sum(prompt_tokens) AS prompt_tokens, sum(completion_tokens) AS completion_tokens,
                  sum(gpu_seconds) AS gpu_seconds,
                  count(*) - count(cost_usd) AS n_unpriced,
                  string_agg(DISTINCT CASE WHEN cost_usd IS NULL THEN model END, ', ') AS unpriced_models
           FROM sample_costs WHERE list_contains($run_ids, run_id)
           GROUP BY method, dataset ORDER BY method, dataset""",
        {"run_ids": _ids(run_ids)},
    )


def run_costs(store: Store, run_ids: Sequence[str]) -> pd.DataFrame:
    """Rows of the ``run_costs`` view for ``run_ids``."""
    return store.query(
        "SELECT * FROM run_costs WHERE list_contains($run_ids, run_id) ORDER BY run_id",
        {"run_ids": _ids(run_ids)},
    )


# -- judging stored runs -------------------------------------------------------------------------
def judgeable_samples(store: Store, run_ids: Sequence[str]) -> list[tuple]:
    """``(run_id, method, dataset, sample_id, question, answers, prediction, response)`` of every
    stored sample of ``run_ids`` except failed ones (stored as errors: no prediction), in run and
    bench order."""
    with store.connect() as con:
        return con.execute(
            """SELECT s.run_id, r.method, s.dataset, s.sample_id, s.question, s.answers,
                      s.prediction, s.response
               FROM samples s JOIN runs r USING (run_id)
               WHERE list_contains($run_ids, s.run_id) AND s.extraction_status IS DISTINCT FROM $error
               ORDER BY s.run_id, s.position, s.dataset, s.sample_id""",
            {"run_ids": _ids(run_ids), "error": ERROR_STATUS},
        ).fetchall()


def metric_values(store: Store, run_ids: Sequence[str], metrics: Sequence[str]) -> pd.DataFrame:
    """``run_id, dataset, sample_id, metric, value`` of ``metrics`` over ``run_ids``."""
    return store.query(
        """SELECT run_id, dataset, sample_id, metric, value FROM sample_metrics
           WHERE list_contains($run_ids, run_id) AND list_contains($metrics, metric)""",
        {"run_ids": _ids(run_ids), "metrics": list(metrics)},
    )


def paired_values(store: Store, run_ids: Sequence[str], metric: str) -> pd.DataFrame:
    """``run_id, dataset, sample_id, position, question, prediction, value`` of one metric over
    ``run_ids`` (failed samples, which carry no metric, are absent): what :mod:`harness.results.
    compare` pairs question by question."""
    return store.query(
        """SELECT s.run_id, s.dataset, s.sample_id, s.position, s.question, s.prediction, m.value
           FROM sample_metrics m JOIN samples s USING (run_id, dataset, sample_id)
           WHERE list_contains($run_ids, m.run_id) AND m.metric = $metric
           ORDER BY s.dataset, s.position, s.sample_id""",
        {"run_ids": _ids(run_ids), "metric": metric},
    )


def run_records(store: Store, run_ids: Sequence[str]) -> dict[str, dict]:
    """``run_id -> versions_json`` as a dict (the run's record: package versions and, for a trained
    model, :mod:`harness.results.training_state`'s keys) of ``run_ids``."""
    import json

    df = store.query(
        "SELECT run_id, versions_json FROM runs WHERE list_contains($run_ids, run_id)",
        {"run_ids": _ids(run_ids)},
    )
    return {str(r.run_id): json.loads(r.versions_json or "{}") for r in df.itertuples()}


def run_provenance(store: Store, run_ids: Sequence[str]) -> pd.DataFrame:
    """``run_id, method, model, status, started_at, git_commit, versions_json, command`` of
    ``run_ids``: where each number of a view comes from."""
    return store.query(
        """SELECT run_id, method, model, status, started_at, git_commit, versions_json, command FROM runs
           WHERE list_contains($run_ids, run_id) ORDER BY method, model, run_id""",
        {"run_ids": _ids(run_ids)},
    )


def eval_run(store: Store, run_id: str) -> pd.DataFrame:
    """``run_id, method, model, protocol_id, protocol_name, protocol_json, status`` of one evaluation
    run (no row when there is none)."""
    return store.query(
        """SELECT run_id, method, model, protocol_id, protocol_name, protocol_json, status FROM runs
           WHERE kind = 'eval' AND run_id = $run_id""",
        {"run_id": run_id},
    )


# -- training --------------------------------------------------------------------------------------
def scored_predictions(store: Store, run_id: str) -> pd.DataFrame:
    """``sample_id, prediction, em, f1`` of every sample of one eval run scored with both."""
    return store.query(
        """SELECT s.sample_id, s.prediction, em.value AS em, f1.value AS f1 FROM samples s
           JOIN sample_metrics em ON em.run_id = s.run_id AND em.sample_id = s.sample_id
             AND em.dataset = s.dataset AND em.metric = 'em'
           JOIN sample_metrics f1 ON f1.run_id = s.run_id AND f1.sample_id = s.sample_id
             AND f1.dataset = s.dataset AND f1.metric = 'f1'
           WHERE s.run_id = $run_id ORDER BY s.dataset, s.sample_id""",
        {"run_id": run_id},
    )


def train_runs(store: Store) -> pd.DataFrame:
    """Runs with logged training steps: ``run_id, method, model, label, status, started_at, command,
    steps`` (``command``: the training page links an RL run to its SFT run by the checkpoint path)."""
    return store.query(
        """SELECT r.run_id, r.method, r.model, coalesce(r.label, '') AS label, r.status, r.started_at,
                  coalesce(r.command, '') AS command,
                  -- held-out evaluations sit at checkpoint steps (one past the last step): not steps
                  count(DISTINCT t.step) FILTER (WHERE t.metric NOT LIKE 'heldout/%') AS steps
           FROM runs r JOIN train_steps t USING (run_id)
           GROUP BY ALL ORDER BY r.started_at DESC, r.run_id"""
    )


def train_steps(store: Store, run_id: str) -> pd.DataFrame:
    """``step, metric, value`` of one training run."""
    return store.query(
        "SELECT step, metric, value FROM train_steps WHERE run_id = $run_id ORDER BY step, metric",
        {"run_id": run_id},
    )


# -- the leaderboard: latest runs ------------------------------------------------------------------
# Parameters: $complete_only (leave partial runs out: an older complete run of the same method,
# model and dataset is then the latest) and $protocol_id (NULL: every protocol). With partial runs
# included, a complete run still outranks every partial one of the same method, model, protocol
# and dataset, newer or not: partial runs fill in where nothing complete exists and never hide a
# complete run (a rerun whose every request failed hid it, and every metric with it: issue 45).
LATEST_RUNS_SQL = """
WITH per AS (
  SELECT r.run_id, r.method, r.model, coalesce(r.label, '') AS label, r.protocol_id, r.protocol_name,
         r.started_at, r.status, r.command, s.dataset, count(*) AS n
  FROM runs r JOIN samples s USING (run_id)
  WHERE r.kind = 'eval'
    AND (NOT $complete_only OR r.status = $complete)
    AND ($protocol_id IS NULL OR r.protocol_id = $protocol_id)
  GROUP BY ALL
)
SELECT * FROM per
QUALIFY row_number() OVER (
  PARTITION BY method, model, protocol_id, dataset
  ORDER BY status = $complete DESC, started_at DESC, run_id DESC
) = 1
"""
_WITH_LATEST = "WITH latest AS (" + LATEST_RUNS_SQL + ")\n"


def _latest(protocol_id: str | None, complete_only: bool, **more: object) -> dict[str, object]:
    """The parameters of :data:`LATEST_RUNS_SQL`, plus ``more``."""
    return {"complete_only": complete_only, "complete": COMPLETE, "protocol_id": protocol_id, **more}


def protocols(store: Store) -> pd.DataFrame:
    """Protocols with scored evaluation runs: ``protocol_id, protocol_name, runs, methods, last``."""
    return store.query(
        """SELECT r.protocol_id, any_value(r.protocol_name) AS protocol_name,
                  count(DISTINCT r.run_id) AS runs, count(DISTINCT r.method) AS methods,
                  max(r.started_at) AS last
           FROM runs r WHERE r.kind = 'eval' AND EXISTS (SELECT 1 FROM samples s WHERE s.run_id = r.run_id)
           GROUP BY r.protocol_id ORDER BY last DESC, r.protocol_id"""
    )


def choose_protocol(store, protocol: str | None) -> str:
    """The protocol id to show: the one given (an id, or a name: see below), or the only one stored.

    A name several ids share (``mini`` with another ``--limit`` or bench) stands for the id whose
    newest run is the newest of them, said on stderr (issue 61: after the README's main job the
    README's own ``--protocol mini`` was refused); when two are equally new, the ids are listed with
    the date of their newest run, to choose from."""
    df = protocols(store)
    if df.empty:
        raise ConfigError(f"{store.path}: no scored evaluation runs yet (run `harness run` first)")
    listing = "; ".join(
        f"{r.protocol_name} ({r.protocol_id}, last run {_when(r.last)})" for r in df.itertuples()
    )
    if protocol is None:
        if len(df) > 1:
            raise ConfigError(
                f"{store.path} holds runs of {len(df)} protocols, which are never mixed in one table; "
                f"choose one with --protocol: {listing}"
            )
        return str(df.iloc[0]["protocol_id"])
    if protocol in set(df["protocol_id"]):
        return protocol
    by_name = df[df["protocol_name"] == protocol]  # newest first
    if len(by_name) == 1:
        return str(by_name.iloc[0]["protocol_id"])
    if len(by_name) > 1:
        newest, runner_up = by_name.iloc[0], by_name.iloc[1]
        ids = "; ".join(f"{r.protocol_id} (last run {_when(r.last)})" for r in by_name.itertuples())
        if newest["last"] == runner_up["last"]:
            raise ConfigError(
                f"protocol name {protocol!r} has {len(by_name)} ids in {store.path} whose newest runs are "
                f"equally new; give the id: {ids}"
            )
        log.warning(
            "protocol name %r has %d ids in %s; using the one run last, %s (--protocol ID for another: %s)",
            protocol,
            len(by_name),
            store.path,
            newest["protocol_id"],
            ids,
        )
        return str(newest["protocol_id"])
    raise ConfigError(f"no protocol {protocol!r} in {store.path}; protocols: {listing}")


def _when(t: object) -> str:
    """A run's start time to the minute, as the listings show it."""
    return str(pd.Timestamp(t).strftime("%Y-%m-%d %H:%M")) if not pd.isna(t) else "unknown"


def protocol_json(store: Store, protocol_id: str) -> str | None:
    df = store.query(
        "SELECT protocol_json FROM runs WHERE protocol_id = $protocol_id LIMIT 1",
        {"protocol_id": protocol_id},
    )
    return None if df.empty else str(df.iloc[0, 0])


def latest_runs(store: Store, protocol_id: str | None = None, complete_only: bool = False) -> pd.DataFrame:
    """One row per (method, model, protocol_id, dataset): the newest run with that dataset, and n."""
    return store.query(
        LATEST_RUNS_SQL + " ORDER BY method, model, dataset", _latest(protocol_id, complete_only)
    )


def metrics_present(store: Store, protocol_id: str | None = None, complete_only: bool = False) -> list[str]:
    """Metric names stored for the latest runs (of one protocol, or of all)."""
    df = store.query(
        _WITH_LATEST
        + """SELECT DISTINCT m.metric FROM sample_metrics m JOIN latest l USING (run_id, dataset)
             ORDER BY m.metric""",
        _latest(protocol_id, complete_only),
    )
    return [str(x) for x in df["metric"]]


LATEST_VALUES_SQL = (
    _WITH_LATEST
    + """SELECT l.method, l.model, l.label, l.protocol_id, l.protocol_name, l.run_id, m.dataset,
               m.sample_id, m.metric, m.value
        FROM sample_metrics m JOIN latest l USING (run_id, dataset)
        JOIN samples s USING (run_id, dataset, sample_id)
        WHERE $metrics IS NULL OR list_contains($metrics, m.metric)
        ORDER BY l.method, l.model, l.protocol_id, m.dataset, m.metric, s.position, m.sample_id"""
)


def latest_values(
    store: Store,
    protocol_id: str | None = None,
    metrics: list[str] | None = None,
    complete_only: bool = False,
) -> pd.DataFrame:
    """Per-question metric values of the latest runs (of ``metrics``; None: every metric).

    Columns: ``method, model, label, protocol_id, protocol_name, run_id, dataset, sample_id,
    metric, value``; ordered by key and sample position (so paired comparisons line up).
    """
    if metrics is not None and not metrics:
        return _empty_values()
    chosen = None if metrics is None else [str(m) for m in metrics]
    return store.query(LATEST_VALUES_SQL, _latest(protocol_id, complete_only, metrics=chosen))


def _empty_values() -> pd.DataFrame:
    cols = ["method", "model", "label", "protocol_id", "protocol_name", "run_id", "dataset", "sample_id"]
    return pd.DataFrame(columns=[*cols, "metric", "value"])


def has_relation(store: Store, name: str) -> bool:
    """Whether the database has a table or view ``name`` (older files lack newer views)."""
    df = store.query(
        """SELECT count(*) AS n FROM (SELECT table_name AS name FROM duckdb_tables()
           UNION ALL SELECT view_name FROM duckdb_views()) WHERE name = $name""",
        {"name": name},
    )
    return int(df.iloc[0, 0]) > 0


def _latest_costs_sql(priced: bool) -> str:
    """The per-question cost query, with USD from the ``sample_costs`` view or (a file older than
    the view) NULL. Both texts are fixed at import; only the choice between them is made per call."""
    usd = "c.cost_usd" if priced else "CAST(NULL AS DOUBLE)"
    join = "LEFT JOIN sample_costs c USING (run_id, dataset, sample_id)" if priced else ""
    return (
        _WITH_LATEST
        + """SELECT l.method, l.model, l.label, l.run_id, s.dataset, s.sample_id,
               s.n_retrievals AS retrievals, s.n_llm_calls AS llm_calls,
               CASE WHEN s.prompt_tokens < 0 OR s.completion_tokens < 0 THEN NULL
                    ELSE s.prompt_tokens + s.completion_tokens END AS tokens,
               CASE WHEN s.prompt_tokens < 0 THEN NULL ELSE s.prompt_tokens END AS prompt_tokens,
               CASE WHEN s.completion_tokens < 0 THEN NULL ELSE s.completion_tokens END
                 AS completion_tokens,
               s.latency_s AS seconds, """
        + usd
        + """ AS usd,
               CASE WHEN list_contains($answered, s.extraction_status) THEN 1.0 ELSE 0.0 END AS answered
        FROM samples s JOIN latest l USING (run_id, dataset) """
        + join
        + """
        WHERE s.extraction_status IS DISTINCT FROM $error  -- failed: no answer, no cost
        ORDER BY l.method, l.model, s.dataset, s.position"""
    )


LATEST_COSTS_SQL = {True: _latest_costs_sql(True), False: _latest_costs_sql(False)}


def latest_costs(store: Store, protocol_id: str, complete_only: bool = False) -> pd.DataFrame:
    """Per-question cost of the latest runs: retrievals, LLM calls, tokens, seconds and USD.

    Failed samples (extraction status ``error``: no answer, no metrics) are left out, as in the
    store's ``sample_costs`` view. ``tokens`` (and ``prompt_tokens`` / ``completion_tokens``) are
    NULL where a server did not report token counts (stored as -1); ``usd`` comes from the store's
    ``sample_costs`` view (NULL when the price is unknown, or the view absent); ``answered`` is 1
    when an answer was extracted."""
    sql = LATEST_COSTS_SQL[has_relation(store, "sample_costs")]
    params = _latest(protocol_id, complete_only, answered=list(ANSWERED), error=ERROR_STATUS)
    return store.query(sql, params)


LATEST_ROW_STATS_SQL = (
    _WITH_LATEST
    + """,
    bad AS (
      SELECT t.run_id, t.dataset, t.sample_id FROM turns t JOIN latest l USING (run_id, dataset)
      WHERE t.kind = 'generate' AND list_contains($invalid_format, t.status) GROUP BY ALL
    ),
    per AS (
      SELECT l.method, l.model, s.run_id, s.dataset,
             list_contains($answered, s.extraction_status) AS answered,
             b.sample_id IS NULL AS valid_format,
             s.extraction_status = $error AS errored
      FROM samples s JOIN latest l USING (run_id, dataset)
      LEFT JOIN bad b USING (run_id, dataset, sample_id)
    ),
    runs_of AS (
      SELECT l.method, l.model,
             string_agg(DISTINCT CASE WHEN r.status <> $complete THEN r.run_id || ' ' || r.status END, ', ')
               AS partial_runs,
             count(DISTINCT CASE WHEN r.status <> $complete THEN r.run_id END) AS n_partial
      FROM latest l JOIN runs r USING (run_id) GROUP BY ALL
    )
    SELECT p.method, p.model, count(*) AS n, avg(p.answered::DOUBLE) AS answered,
           avg(p.valid_format::DOUBLE) AS valid_format, sum(p.errored::INTEGER) AS n_error,
           any_value(o.partial_runs) AS partial_runs, any_value(o.n_partial) AS n_partial
    FROM per p JOIN runs_of o USING (method, model)
    GROUP BY p.method, p.model ORDER BY p.method, p.model"""
)


def latest_row_stats(store: Store, protocol_id: str, complete_only: bool = False) -> pd.DataFrame:
    """Per (method, model) of the latest runs: ``n, answered, valid_format, n_error, partial_runs,
    n_expected``. ``answered``: share of questions with an extracted answer; ``valid_format``: share
    whose every generation was a well-formed action; ``n_error``: failed samples (extraction status
    ``error``, never scored);
    ``partial_runs``: the row's runs that did not end ``complete`` (status and count)."""
    params = _latest(
        protocol_id,
        complete_only,
        invalid_format=list(INVALID_FORMAT),
        answered=list(ANSWERED),
        error=ERROR_STATUS,
    )
    return store.query(LATEST_ROW_STATS_SQL, params)


def reported(store: Store) -> pd.DataFrame:
    """Every published number (``reported`` table)."""
    return store.query(
        """SELECT paper, method, model, dataset, metric, value, source, setting, note FROM reported
           ORDER BY paper, setting, method, model, dataset, metric"""
    )


# -- trajectories ----------------------------------------------------------------------------------
def run_questions(store: Store, run_id: str, dataset: str) -> pd.DataFrame:
    """The questions of a run on one dataset: ``sample_id, position, question, prediction, extraction_status``."""
    return store.query(
        """SELECT sample_id, position, question, prediction, extraction_status FROM samples
           WHERE run_id = $run_id AND dataset = $dataset ORDER BY position, sample_id""",
        {"run_id": run_id, "dataset": dataset},
    )


def metric_values_of_run(store: Store, run_id: str, dataset: str, metric: str) -> pd.DataFrame:
    """``sample_id, value`` of one metric for every question of a run on one dataset."""
    return store.query(
        """SELECT sample_id, value FROM sample_metrics
           WHERE run_id = $run_id AND dataset = $dataset AND metric = $metric""",
        {"run_id": run_id, "dataset": dataset, "metric": metric},
    )


def sample_row(store: Store, run_id: str, dataset: str, sample_id: str) -> pd.DataFrame:
    return store.query(
        "SELECT * FROM samples WHERE run_id = $run_id AND dataset = $dataset AND sample_id = $sample_id",
        {"run_id": run_id, "dataset": dataset, "sample_id": sample_id},
    )


def sample_metric_rows(store: Store, run_id: str, dataset: str, sample_id: str) -> pd.DataFrame:
    return store.query(
        """SELECT metric, value FROM sample_metrics
           WHERE run_id = $run_id AND dataset = $dataset AND sample_id = $sample_id ORDER BY metric""",
        {"run_id": run_id, "dataset": dataset, "sample_id": sample_id},
    )


def turn_rows(store: Store, run_id: str, dataset: str, sample_id: str) -> pd.DataFrame:
    return store.query(
        """SELECT turn_index, kind, text, query, doc_ids, doc_scores, prompt_tokens, completion_tokens,
                  observation_tokens, latency_s, stop_reason, status
           FROM turns WHERE run_id = $run_id AND dataset = $dataset AND sample_id = $sample_id
           ORDER BY turn_index""",
        {"run_id": run_id, "dataset": dataset, "sample_id": sample_id},
    )


def judgement_rows(store: Store, question: str, texts: list[str]) -> pd.DataFrame:
    """Judge verdicts on this question for any of ``texts`` (the prediction, or the whole response
    for prompts that judge the response); a verdict depends on the judged text, not on the run."""
    if not texts:
        return pd.DataFrame()
    return store.query(
        """SELECT judge_model, prompt_id, prompt_hash, status, verdict, score, rationale, created_at
           FROM judgements WHERE question = $question AND list_contains($texts, prediction)
           ORDER BY created_at""",
        {"question": question, "texts": [str(t) for t in texts]},
    )
