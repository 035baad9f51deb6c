"""Cost and efficiency: accuracy (with its 95% interval) against retrievals, tokens and dollars per
question, the Pareto front, and per-correct-answer costs. A method keeps its colour on every chart."""

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
ui.from_link("cost_metric", metrics)
metric = c1.selectbox("Accuracy metric", metrics, format_func=metric_label, key="cost_metric")
ui.to_link("cost_metric", metric, metrics[0] if metrics else None)
datasets = sorted(set(values["dataset"]))
ui.from_link("cost_dataset", [ALL, *datasets])
scope = c2.selectbox("Datasets", [ALL, *datasets], key="cost_dataset")
ui.to_link("cost_dataset", scope, ALL)
table = views.build_cost(values, costs, metric=metric, dataset=None if scope == ALL else scope)
colors = ui.method_colors(sorted(set(table["method"])))
color = alt.Color(
    "method:N",
    scale=alt.Scale(domain=list(colors), range=list(colors.values())),
    legend=alt.Legend(orient="bottom", columns=4),
)
AXIS_FORMATS = {"retrievals": ".1f", "tokens": "~s", "usd": "$.2~e", "tokens_per_correct": "~s"}


def frontier_chart(df: pd.DataFrame, cost: str, title: str) -> alt.LayerChart:
    """Accuracy (in %, 0-100 axis, 95% interval as a bar) against one cost; the dashed line joins
    the Pareto-optimal rows."""
    pts = df.dropna(subset=["accuracy", cost]).assign(
        acc=lambda d: 100 * d["accuracy"],
        lo=lambda d: 100 * d["accuracy_lo"],
        hi=lambda d: 100 * d["accuracy_hi"],
    )
    x = alt.X(f"{cost}:Q", title=title, axis=alt.Axis(format=AXIS_FORMATS.get(cost, ".2~f")))
    y = alt.Y("acc:Q", title=f"{metric_label(metric)} (%)", scale=alt.Scale(domain=[0, 100]))
    base = alt.Chart(pts).encode(x=x)
    bars = base.mark_rule(strokeWidth=2, opacity=0.6).encode(y="lo:Q", y2="hi:Q", color=color)
    dots = base.mark_circle(size=120, opacity=1).encode(
        y=y,
        color=color,
        tooltip=[
            "method",
            "model",
            "label",
            alt.Tooltip("acc:Q", title="accuracy %", format=".1f"),
            alt.Tooltip("lo:Q", title="95% lo", format=".1f"),
            alt.Tooltip("hi:Q", title="95% hi", format=".1f"),
            alt.Tooltip(f"{cost}:Q", format=".6f" if cost == "usd" else ".2f"),
            "n",
            "coverage",
        ],
    )
    front = pts[pts[f"pareto_{cost}"] == "yes"].sort_values(cost)
    line = (
        alt.Chart(front)
        .mark_line(strokeDash=[4, 3], color="gray", interpolate="step-after")
        .encode(x=f"{cost}:Q", y="acc:Q")
    )
    labels = base.mark_text(align="left", dx=8, dy=-6, fontSize=11).encode(y="acc:Q", text="method:N")
    return alt.layer(line, bars, dots, labels).properties(height=340)


partial = table[table["coverage"].str.endswith("(partial)")]
if len(partial):
    st.warning(
        f"{len(partial)} row(s) cover fewer datasets than the view ({', '.join(partial['method'] + ' · ' + partial['model'])}); "
        "they have no all-datasets accuracy and are left out of the charts. Choose one dataset to compare them.",
        icon=":material/warning:",
    )
left, right = st.columns(2)
with left:
    st.subheader("Accuracy vs retrievals per question")
    st.altair_chart(frontier_chart(table, "retrievals", "mean retrievals per question"), width="stretch")
with right:
    st.subheader("Accuracy vs tokens per question")
    st.altair_chart(
        frontier_chart(table, "tokens", "mean tokens per question (prompt + completion)"), width="stretch"
    )
left, right = st.columns(2)
with left:
    st.subheader("Prompt vs completion tokens per question")
    tok = table.melt(
        id_vars=["method", "model"],
        value_vars=["prompt_tokens", "completion_tokens"],
        var_name="part",
        value_name="tokens_q",
    ).dropna(subset=["tokens_q"])
    tok["part"] = tok["part"].str.replace("_tokens", "")
    tok["row"] = tok["method"] + " · " + tok["model"]
    st.altair_chart(
        alt.Chart(tok)
        .mark_bar()
        .encode(
            y=alt.Y("row:N", title=None, sort="-x", axis=alt.Axis(labelLimit=260)),
            x=alt.X("tokens_q:Q", title="mean tokens per question", stack="zero", axis=alt.Axis(format="~s")),
            color=alt.Color(
                "part:N", scale=alt.Scale(range=["#4c78a8", "#f58518"]), legend=alt.Legend(orient="bottom")
            ),
            tooltip=["method", "model", "part", alt.Tooltip("tokens_q:Q", format=".1f")],
        )
        .properties(height=alt.Step(26)),
        width="stretch",
    )
with right:
    if views.all_costs_zero_or_unknown(table):
        st.subheader("Dollars")
        st.caption(
            "Every row's dollar cost is $0 (a local model on the in-process backend) or unknown (no price "
            "for the model): no $ plot. Prices: `harness.cost` presets and `prices.json` next to the database."
        )
    else:
        st.subheader("Accuracy vs dollars per question")
        st.altair_chart(
            frontier_chart(table, "usd", "mean USD per question (harness.cost prices)"), width="stretch"
        )
st.caption(
    "Vertical bars: the accuracy's 95% interval (as on the leaderboard). The dashed line joins the "
    "Pareto-optimal rows: none is as accurate for fewer retrievals (tokens, dollars). With all datasets, "
    "accuracy is the unweighted mean over datasets, for rows that have all of them. "
    "$/correct and tokens/correct divide totals by the sum of the metric (correct answers)."
)
ui.show_table(table, list(COST_COLUMNS), key="cost_table")
