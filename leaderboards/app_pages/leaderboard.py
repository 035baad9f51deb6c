"""Leaderboard: methods x datasets for one protocol and one metric, with 95% intervals."""

from __future__ import annotations

import json

import streamlit as st

from leaderboards import ui
from leaderboards.schema import metric_label

st.title("Leaderboard")
db = ui.db_path()
protocol = ui.current_protocol()
if protocol is None:
    st.info("No scored evaluation runs yet: `harness run --method all --bench mini-multihop --limit 10`.")
    st.stop()

metrics = ui.load_metrics(db, ui.stamp(db), protocol)
c_metric, c_sort, c_ci = st.columns([2, 2, 1], vertical_alignment="bottom")
metric = c_metric.selectbox("Metric", metrics, format_func=metric_label, key="metric")
show_ci = c_ci.toggle("95% intervals", value=True, key="show_ci")
board = ui.load_leaderboard(db, ui.stamp(db), protocol, metric)
sort_labels = {c.key: c.label for c in board.score_columns()}
sort_by = c_sort.selectbox(
    "Sort by",
    list(sort_labels),
    index=0,
    format_func=sort_labels.__getitem__,
    key="sort_by",
)

columns = board.columns(ci="text" if show_ci else "none")
df = ui.schema_filters(board.display_frame(ci="text" if show_ci else "none"), columns, "lb")
df = df.sort_values([sort_by, "method", "model"], ascending=[False, True, True], na_position="last")

st.caption(
    f"Protocol **{board.protocol_name}** (`{board.protocol_id}`) · {metric_label(metric)} in % · newest run per "
    "method, model and dataset · 95% percentile-bootstrap intervals over questions (1000 resamples). "
    "Click a header to sort."
)
ui.show_table(df, columns, key="leaderboard_table")
for g, _members in board.averages:
    st.caption(f"{g.label}: unweighted mean over {board.coverage(g.key)}")

with st.expander("Protocol settings"):
    raw = ui.load_protocol_json(db, ui.stamp(db), protocol)
    if raw:
        st.json(json.loads(raw), expanded=False)
