"""The leaderboard's read queries: the ones of :mod:`harness.results.queries`, where every read query over
the results database lives (the dependency runs one way: ``leaderboards`` imports ``harness``).

"Latest" means: for each (method, model, protocol_id, dataset), the newest evaluation run that has
samples of that dataset. The leaderboard, ``harness regress`` and ``harness export`` all read
scores through :func:`latest_values`, so they always agree on which run a number comes from.
"""

from __future__ import annotations

from harness.results.queries import (
    ANSWERED,
    COMPLETE,
    INVALID_FORMAT,
    LATEST_RUNS_SQL,
    has_relation,
    judgement_rows,
    latest_costs,
    latest_row_stats,
    latest_runs,
    latest_values,
    metric_values_of_run,
    metrics_present,
    open_results,
    protocol_json,
    protocols,
    reported,
    run_provenance,
    run_questions,
    run_records,
    sample_metric_rows,
    sample_row,
    train_runs,
    train_steps,
    turn_rows,
)

__all__ = [
    "ANSWERED",
    "COMPLETE",
    "INVALID_FORMAT",
    "LATEST_RUNS_SQL",
    "has_relation",
    "judgement_rows",
    "latest_costs",
    "latest_row_stats",
    "latest_runs",
    "latest_values",
    "metric_values_of_run",
    "metrics_present",
    "open_results",
    "protocol_json",
    "protocols",
    "reported",
    "run_provenance",
    "run_questions",
    "run_records",
    "sample_metric_rows",
    "sample_row",
    "train_runs",
    "train_steps",
    "turn_rows",
]
