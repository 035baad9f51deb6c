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

from harness.results.store import DEFAULT_DB
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
    # the page opens on the first metric: the protocol's primary one; the list holds the metrics of
    # complete runs and of partial ones (the page's "Include partial runs" toggle comes later)
    return views.ordered_metrics(_store(db), protocol_id, include_partial=True)


@st.cache_data(ttl=300, show_spinner=False)
def load_values(
    db: str,
    version: tuple[int, int],
    protocol_id: str,
    metrics: tuple[str, ...],
    include_partial: bool = False,
) -> pd.DataFrame:
    return queries.latest_values(_store(db), protocol_id, list(metrics), complete_only=not include_partial)


@st.cache_data(ttl=300, show_spinner=False)
def load_costs(
    db: str, version: tuple[int, int], protocol_id: str, include_partial: bool = False
) -> pd.DataFrame:
    return queries.latest_costs(_store(db), protocol_id, complete_only=not include_partial)


@st.cache_data(ttl=300, show_spinner=False)
def load_latest_runs(db: str, version: tuple[int, int], protocol_id: str) -> pd.DataFrame:
    return queries.latest_runs(_store(db), protocol_id)


@st.cache_data(ttl=300, show_spinner=False)
def load_reported(db: str, version: tuple[int, int]) -> pd.DataFrame:
    """The database's published numbers, plus the registered papers' rows it lacks."""
    from leaderboards.reported_sync import reported_frame

    return reported_frame(_store(db))


@st.cache_data(ttl=300, show_spinner=False)
def load_leaderboard(
    db: str, version: tuple[int, int], protocol_id: str, metric: str, include_partial: bool = False
) -> views.Leaderboard:
    return views.leaderboard_from_db(_store(db), protocol_id, metric, include_partial=include_partial)


@st.cache_data(ttl=300, show_spinner=False)
def load_reported_boards(db: str, version: tuple[int, int], protocol_id: str) -> dict[str, views.Leaderboard]:
    from leaderboards.reported_sync import reported_frame

    store = _store(db)
    return views.reported_boards(store, protocol_id, reported_frame(store))


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


def from_link(
    key: str,
    options: list[str] | None = None,
    *,
    multi: bool = False,
    kind: type = str,
    default: object = None,
) -> None:
    """Before a widget with ``key`` is built: take its value from the URL (``?key=value``; a
    multiselect's values comma-separated) when the session has none yet and the value is valid,
    else ``default`` (when given). The widget is then built without a value argument."""
    if key in st.session_state:
        have = st.session_state[key]
        if options is None or kind is bool:
            return
        if multi:
            st.session_state[key] = [v for v in have if v in options]
            return
        if have in options:
            return
        del st.session_state[key]  # e.g. a dataset the newly chosen protocol does not have
    raw = st.query_params.get(key)
    if raw is not None:
        if multi:
            st.session_state[key] = [v for v in raw.split(",") if v and (options is None or v in options)]
            return
        if kind is bool and raw in ("0", "1"):
            st.session_state[key] = raw == "1"
            return
        if kind is str and (options is None or raw in options):
            st.session_state[key] = raw
            return
    if default is not None:
        st.session_state[key] = default


def to_link(key: str, value: object, default: object = None) -> None:
    """Put a widget's value in the URL (removed when it is the default), so the page is a permalink."""
    if isinstance(value, bool):
        text = "1" if value else "0"
        dflt = None if default is None else ("1" if default else "0")
    elif isinstance(value, (list, tuple)):
        text, dflt = ",".join(str(v) for v in value), ""
    else:
        text, dflt = str(value), None if default is None else str(default)
    if text == dflt or text == "":
        if key in st.query_params:
            del st.query_params[key]
    else:
        st.query_params[key] = text


# A qualitative palette of 20 distinguishable colours (Tableau 20 reordered so that neighbours
# differ in hue first); a method keeps its colour on every page and in every run of the app.
PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94",
    "#f7b6d2", "#c7c7c7", "#dbdb8d", "#9edae5",
)  # fmt: skip


def method_colors(methods: list[str]) -> dict[str, str]:
    """A fixed colour per method: registered methods by their place in the registry, others after."""
    from harness.methods_registry import METHODS

    order = list(METHODS.names()) + sorted(set(methods) - set(METHODS.names()))
    return {m: PALETTE[order.index(m) % len(PALETTE)] for m in methods}


def column_config(columns: list[Column]) -> dict[str, object]:
    """Streamlit column settings for the declared columns (header, help, number format).

    Scores show in % with one decimal, as the papers print them (``show_table`` scales them)."""
    formats = {"score": "%.1f", "interval": "%.1f", "points": "%+.1f", "count": "%d"}
    cfg: dict[str, object] = {}
    for c in columns:
        pinned = True if c.key == "method" else None
        if c.kind == "text":
            cfg[c.key] = st.column_config.TextColumn(c.label, help=c.help or None, pinned=pinned)
        elif c.kind == "link":
            cfg[c.key] = st.column_config.LinkColumn(c.label, help=c.help or None, display_text="paper")
        else:
            fmt = c.fmt or formats.get(c.kind, "%.3f")
            cfg[c.key] = st.column_config.NumberColumn(c.label, help=c.help or None, format=fmt)
    return cfg


def schema_filters(df: pd.DataFrame, columns: list[Column], key_prefix: str) -> pd.DataFrame:
    """One multiselect per declared filterable column (empty selection = no filter; the choice is
    in the URL); the filtered rows."""
    filterable = [c for c in columns if c.filter == "multiselect" and c.key in df.columns]
    if not filterable:
        return df
    cols = st.columns(len(filterable))
    for slot, c in zip(cols, filterable, strict=True):
        options = sorted({str(x) for x in df[c.key].dropna()})
        key = f"{key_prefix}_{c.key}"
        from_link(key, options, multi=True)
        chosen = slot.multiselect(c.label, options=options, key=key, placeholder="all")
        to_link(key, chosen)
        if chosen:
            df = df[df[c.key].astype(str).isin(chosen)]
    return df


def show_table(
    df: pd.DataFrame, columns: list[Column], *, key: str, bold: dict[str, set[int]] | None = None
) -> None:
    """The declared columns of ``df`` (method pinned); score-like columns multiplied by 100 (shown
    in %); ``bold``: column key -> row positions shown in bold (the best of a column)."""
    keys = [c.key for c in columns if c.key in df.columns]
    shown = df[keys].copy().reset_index(drop=True)
    for c in columns:
        if c.key in keys and c.kind in PERCENT_KINDS:
            shown[c.key] = shown[c.key] * 100
    data: object = shown
    if bold:
        marks = pd.DataFrame("", index=shown.index, columns=shown.columns)
        for col, rows in bold.items():
            for r in rows:
                if col in marks.columns and r in marks.index:
                    marks.loc[r, col] = "font-weight: bold"
        data = shown.style.apply(lambda _: marks, axis=None)
    st.dataframe(
        data,
        column_config=column_config([c for c in columns if c.key in keys]),
        hide_index=True,
        width="stretch",
        key=key,
    )


@st.cache_data(ttl=300, show_spinner=False)
def load_provenance(db: str, version: tuple[int, int], run_ids: tuple[str, ...]) -> pd.DataFrame:
    """Per run: id, method, model, status, start, commit, training state, versions, command."""
    import json

    from harness.results.training_state import training_of

    df = queries.run_provenance(_store(db), list(run_ids))
    versions = [json.loads(v or "{}") for v in df["versions_json"]]
    df["training"] = [str(training_of(str(m), v)) for m, v in zip(df["method"], versions, strict=True)]
    df["versions"] = [", ".join(f"{k} {x}" for k, x in v.items()) for v in versions]
    return df[
        ["run_id", "method", "model", "status", "started_at", "git_commit", "training", "versions", "command"]
    ]


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
