"""Shared Streamlit pieces of the app: the database path, cached read-only loaders, the protocol
selector, and tables rendered from the declared column schema.

Loaders are cached with ``st.cache_data`` keyed by the database path and its modification stamp,
so new results appear on the next interaction while repeated reruns do not hit DuckDB again.
Each loader opens a short read-only connection (``leaderboards.queries``); none is held.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import streamlit as st

from harness.store import DEFAULT_DB
from leaderboards import DB_ENV, queries, views
from leaderboards.schema import PERCENT_KINDS, Column

PROTOCOL_KEY = "protocol"


def db_path() -> str:
    """The results database the app reads (``$RAR_HARNESS_DB``, else ``results/harness.duckdb``)."""
    return os.environ.get(DB_ENV) or str(DEFAULT_DB)


def stamp(db: str) -> tuple[int, int]:
    """Modification stamp of the database and its write-ahead log (cache key for loaders)."""
    p = Path(db)
    wal = p.with_name(p.name + ".wal")
    return (p.stat().st_mtime_ns if p.exists() else 0, wal.stat().st_mtime_ns if wal.exists() else 0)


def _store(db: str):
    return queries.open_results(db)


@st.cache_data(ttl=300, show_spinner=False)
def load_protocols(db: str, version: tuple[int, int]) -> pd.DataFrame:
    return queries.protocols(_store(db))


@st.cache_data(ttl=300, show_spinner=False)
def load_protocol_json(db: str, version: tuple[int, int], protocol_id: str) -> str | None:
    return queries.protocol_json(_store(db), protocol_id)


@st.cache_data(ttl=300, show_spinner=False)
def load_metrics(db: str, version: tuple[int, int], protocol_id: str) -> list[str]:
    from leaderboards.schema import order_metrics

    return order_metrics(queries.metrics_present(_store(db), protocol_id))


@st.cache_data(ttl=300, show_spinner=False)
def load_values(
    db: str, version: tuple[int, int], protocol_id: str, metrics: tuple[str, ...]
) -> pd.DataFrame:
    return queries.latest_values(_store(db), protocol_id, list(metrics))


@st.cache_data(ttl=300, show_spinner=False)
def load_costs(db: str, version: tuple[int, int], protocol_id: str) -> pd.DataFrame:
    return queries.latest_costs(_store(db), protocol_id)


@st.cache_data(ttl=300, show_spinner=False)
def load_latest_runs(db: str, version: tuple[int, int], protocol_id: str) -> pd.DataFrame:
    return queries.latest_runs(_store(db), protocol_id)


@st.cache_data(ttl=300, show_spinner=False)
def load_reported(db: str, version: tuple[int, int]) -> pd.DataFrame:
    return queries.reported(_store(db))


@st.cache_data(ttl=300, show_spinner=False)
def load_leaderboard(db: str, version: tuple[int, int], protocol_id: str, metric: str) -> views.Leaderboard:
    return views.leaderboard_from_db(_store(db), protocol_id, metric)


@st.cache_data(ttl=300, show_spinner=False)
def load_reported_boards(db: str, version: tuple[int, int], protocol_id: str) -> dict[str, views.Leaderboard]:
    store = _store(db)
    return views.reported_boards(store, protocol_id, queries.reported(store))


@st.cache_data(ttl=300, show_spinner=False)
def load_train_runs(db: str, version: tuple[int, int]) -> pd.DataFrame:
    return queries.train_runs(_store(db))


@st.cache_data(ttl=300, show_spinner=False)
def load_train_steps(db: str, version: tuple[int, int], run_id: str) -> pd.DataFrame:
    return queries.train_steps(_store(db), run_id)


def protocol_label(row: pd.Series) -> str:
    return f"{row['protocol_name']} · {row['protocol_id']} ({int(row['runs'])} runs)"


def protocol_selector(db: str) -> str | None:
    """The sidebar's protocol choice (every page shows one protocol at a time)."""
    protos = load_protocols(db, stamp(db))
    if protos.empty:
        st.sidebar.warning("No scored evaluation runs in this database yet.")
        return None
    labels = {str(r["protocol_id"]): protocol_label(r) for _, r in protos.iterrows()}
    linked = st.query_params.get("protocol")  # a shared link: ?protocol=<id>
    if PROTOCOL_KEY not in st.session_state and linked in labels:
        st.session_state[PROTOCOL_KEY] = linked
    choice = st.sidebar.selectbox(
        "Protocol",
        options=list(labels),
        format_func=labels.__getitem__,
        key=PROTOCOL_KEY,
        help="Scores are only comparable under one protocol (corpus, retriever, top-k, turns, decoding, "
        "selection, metric versions). Rows of different protocols are never mixed.",
    )
    st.query_params["protocol"] = choice
    return choice


def current_protocol() -> str | None:
    return st.session_state.get(PROTOCOL_KEY)


def column_config(columns: list[Column]) -> dict[str, object]:
    """Streamlit column settings for the declared columns (header, help, number format).

    Scores show in % with one decimal, as the papers print them (``show_table`` scales them)."""
    formats = {"score": "%.1f", "interval": "%.1f", "points": "%+.1f", "count": "%d"}
    cfg: dict[str, object] = {}
    for c in columns:
        if c.kind == "text":
            cfg[c.key] = st.column_config.TextColumn(c.label, help=c.help or None)
        else:
            fmt = c.fmt or formats.get(c.kind, "%.3f")
            cfg[c.key] = st.column_config.NumberColumn(c.label, help=c.help or None, format=fmt)
    return cfg


def schema_filters(df: pd.DataFrame, columns: list[Column], key_prefix: str) -> pd.DataFrame:
    """One multiselect per declared filterable column (empty selection = no filter); the filtered rows."""
    filterable = [c for c in columns if c.filter == "multiselect" and c.key in df.columns]
    if not filterable:
        return df
    cols = st.columns(len(filterable))
    for slot, c in zip(cols, filterable, strict=True):
        options = sorted({str(x) for x in df[c.key].dropna()})
        chosen = slot.multiselect(c.label, options=options, key=f"{key_prefix}_{c.key}", placeholder="all")
        if chosen:
            df = df[df[c.key].astype(str).isin(chosen)]
    return df


def show_table(df: pd.DataFrame, columns: list[Column], *, key: str) -> None:
    """The declared columns of ``df``; score-like columns multiplied by 100 (shown in %)."""
    keys = [c.key for c in columns if c.key in df.columns]
    shown = df[keys].copy()
    for c in columns:
        if c.key in keys and c.kind in PERCENT_KINDS:
            shown[c.key] = shown[c.key] * 100
    st.dataframe(
        shown,
        column_config=column_config([c for c in columns if c.key in keys]),
        hide_index=True,
        width="stretch",
        key=key,
    )


@st.cache_data(ttl=300, show_spinner=False)
def load_questions(db: str, version: tuple[int, int], run_id: str, dataset: str) -> pd.DataFrame:
    return queries.run_questions(_store(db), run_id, dataset)


@st.cache_data(ttl=300, show_spinner=False)
def load_run_metric(
    db: str, version: tuple[int, int], run_id: str, dataset: str, metric: str
) -> pd.DataFrame:
    return queries.metric_values_of_run(_store(db), run_id, dataset, metric)


@st.cache_resource(show_spinner="opening the packaged corpus ...")
def packaged_corpus(protocol_json: str | None):
    from leaderboards.passages import packaged_corpus_for

    return packaged_corpus_for(protocol_json)


@st.cache_data(ttl=300, show_spinner=False)
def load_sample(
    db: str, version: tuple[int, int], run_id: str, dataset: str, sample_id: str, protocol_json: str | None
) -> views.SampleView:
    from leaderboards.passages import lookup

    return views.sample_view(_store(db), run_id, dataset, sample_id, lookup(packaged_corpus(protocol_json)))
