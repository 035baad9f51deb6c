"""Cost and efficiency: accuracy against retrievals and tokens per question (the Pareto view)."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from leaderboards import ui, views
from leaderboards.schema import COST_COLUMNS, metric_label

ALL = "all datasets"

st.title("Cost and efficiency")
db = ui.db_path()
protocol = ui.current_protocol()
if protocol is None:
    st.info("No scored evaluation runs yet.")
    st.stop()

metrics = ui.load_metrics(db, ui.stamp(db), protocol)
values = ui.load_values(db, ui.stamp(db), protocol, tuple(metrics))
costs = ui.load_costs(db, ui.stamp(db), protocol)
c1, c2 = st.columns(2)
metric = c1.selectbox("Accuracy metric", metrics, format_func=metric_label, key="cost_metric")
datasets = sorted(set(values["dataset"]))
scope = c2.selectbox("Datasets", [ALL, *datasets], key="cost_dataset")
table = views.build_cost(values, costs, metric=metric, dataset=None if scope == ALL else scope)


def frontier_chart(df: pd.DataFrame, cost: str, title: str) -> alt.LayerChart:
    pts = df.dropna(subset=["accuracy", cost])
    base = alt.Chart(pts).encode(
        x=alt.X(f"{cost}:Q", title=title),
        y=alt.Y("accuracy:Q", title=metric_label(metric), axis=alt.Axis(format="%")),
    )
    dots = base.mark_circle(size=120).encode(
        color=alt.Color("method:N"),
        tooltip=[
            "method",
            "model",
            "label",
            alt.Tooltip("accuracy:Q", format=".3f"),
            alt.Tooltip(f"{cost}:Q", format=".6f" if cost == "usd" else ".2f"),
            "n",
        ],
    )
    front = pts[pts[f"pareto_{cost}"] == "yes"].sort_values(cost)
    line = (
        alt.Chart(front)
        .mark_line(strokeDash=[4, 3], color="gray", interpolate="step-after")
        .encode(x=f"{cost}:Q", y="accuracy:Q")
    )
    labels = base.mark_text(align="left", dx=8, dy=-6).encode(text="method:N")
    return alt.layer(line, dots, labels).properties(height=340)


left, right = st.columns(2)
with left:
    st.subheader("Accuracy vs retrievals per question")
    st.altair_chart(frontier_chart(table, "retrievals", "mean retrievals per question"), width="stretch")
with right:
    st.subheader("Accuracy vs tokens per question")
    st.altair_chart(
        frontier_chart(table, "tokens", "mean tokens per question (prompt + completion)"), width="stretch"
    )
if table["usd"].notna().any():
    left, _ = st.columns(2)
    with left:
        st.subheader("Accuracy vs dollars per question")
        st.altair_chart(
            frontier_chart(table, "usd", "mean USD per question (harness.cost prices)"), width="stretch"
        )
st.caption(
    "The dashed line joins the Pareto-optimal methods: none is as accurate for fewer retrievals (tokens, dollars). "
    "With all datasets, accuracy is the unweighted mean over datasets."
)
ui.show_table(table, list(COST_COLUMNS), key="cost_table")
