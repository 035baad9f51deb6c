"""Leaderboard: methods x datasets for one protocol and one metric, each cell score ± 95% interval.

Metric, sort, filters and the interval/partial toggles live in the URL (a permalink restores them).
"""

from __future__ import annotations

import json

import streamlit as st

from harness.errors import ConfigError
from leaderboards import ui
from leaderboards.schema import metric_label

st.title("Leaderboard")
db = ui.db_path()
protocol = ui.current_protocol()
if protocol is None:
    st.info("No scored evaluation runs yet: `harness run --method all --bench mini-multihop --limit 10`.")
    st.stop()

metrics = ui.load_metrics(db, ui.stamp(db), protocol)
c_metric, c_sort, c_ci, c_part = st.columns([2, 2, 1, 1], vertical_alignment="bottom")
ui.from_link("metric", metrics)
metric = c_metric.selectbox("Metric", metrics, format_func=metric_label, key="metric")
ui.to_link("metric", metric, metrics[0] if metrics else None)
ui.from_link("show_ci", kind=bool, default=True)
show_ci = c_ci.toggle("95% intervals", key="show_ci")
ui.to_link("show_ci", show_ci, True)
ui.from_link("partial", kind=bool, default=False)
include_partial = c_part.toggle(
    "Include partial runs",
    key="partial",
    help="Runs that did not end `complete` (killed, failed, incomplete, still running). Off: an older "
    "complete run of the same method, model and dataset is shown instead, if any.",
)
ui.to_link("partial", include_partial, False)
try:
    board = ui.load_leaderboard(db, ui.stamp(db), protocol, metric, include_partial)
except ConfigError as e:
    st.warning(str(e))
    st.stop()
sort_labels = {key: board.header(key) for key in board.score_keys}
ui.from_link("sort", list(sort_labels))
sort_by = c_sort.selectbox("Sort by", list(sort_labels), format_func=sort_labels.__getitem__, key="sort")
ui.to_link("sort", sort_by, next(iter(sort_labels), None))

ci = "text" if show_ci else "none"
columns = board.columns(ci=ci)
if not include_partial:
    columns = [c for c in columns if c.key != "status"]
full = board.display_frame(ci="bounds").join(
    board.display_frame(ci="text")[[f"{k}_text" for k in board.score_keys]]
)
full = ui.schema_filters(full, columns, "lb")
full = full.sort_values([sort_by, "method", "model"], ascending=[False, True, True], na_position="last")
full = full.reset_index(drop=True)
bold: dict[str, set[int]] = {}
for key in board.score_keys:
    best, ties = board.best_and_ties(key, full)
    shown_key = f"{key}_text" if show_ci else key
    bold[shown_key] = best
    if show_ci:
        full[shown_key] = [t + " ≈" if i in ties else t for i, t in enumerate(full[shown_key])]
interval = "Wilson score" if board.binary else "percentile-bootstrap (1000 resamples)"
st.caption(
    f"Protocol **{board.protocol_name}** (`{board.protocol_id}`) · {metric_label(metric)} in % · newest "
    f"{'' if include_partial else 'complete '}run per method, model and dataset · score [95% {interval} "
    f"interval] · **bold**: best in the column; ≈: its interval overlaps the best's "
    "(a statistical tie) · an average is shown only for rows with every dataset it covers."
)
ui.show_table(full, columns, key="leaderboard_table", bold=bold)
for g, _members in board.averages:
    st.caption(f"{g.label}: unweighted mean over {board.coverage(g.key)}")
if not include_partial:
    st.caption("Partial runs (not `complete`) are left out; the toggle above includes and marks them.")

with st.expander("Protocol settings"):
    raw = ui.load_protocol_json(db, ui.stamp(db), protocol)
    if raw:
        st.json(json.loads(raw), expanded=False)
