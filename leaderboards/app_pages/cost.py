"""Cost and efficiency: accuracy (with its 95% interval) against retrievals, tokens and dollars per
question, the Pareto front, and per-correct-answer costs. A method keeps its colour on every chart."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from leaderboards import ui, views
from leaderboards.schema import COST_COLUMNS, Column, dataset_label, metric_label

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
color_scale = alt.Scale(domain=list(colors), range=list(colors.values()))
color = alt.Color("method:N", scale=color_scale, legend=alt.Legend(orient="bottom", columns=4))
SHAPES = [
    "circle",
    "square",
    "triangle-up",
    "diamond",
    "cross",
    "triangle-down",
    "triangle-left",
    "triangle-right",
]
shape_scale = alt.Scale(domain=list(colors), range=[SHAPES[i % len(SHAPES)] for i in range(len(colors))])
shape = alt.Shape("method:N", scale=shape_scale, legend=alt.Legend(orient="bottom", columns=4))
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
    dots = base.mark_point(size=130, opacity=1, filled=True).encode(
        y=y,
        color=color,
        shape=shape,
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
    # no text labels beside the points: close points (cot and direct at 0 retrievals) made them
    # overlap; colour and shape (legend below the chart) and the tooltip name each point
    return alt.layer(line, bars, dots).properties(height=340)


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
            "Every row's dollar cost is `free (local)` (an in-process model: tokens not billed, no GPU price) "
            "or unknown (no price for the model): no $ plot. Prices: `harness.results.cost` presets and `prices.json` "
            "next to the database."
        )
    else:
        st.subheader("Accuracy vs dollars per question")
        st.altair_chart(
            frontier_chart(table, "usd", "mean USD per question (harness.results.cost prices)"),
            width="stretch",
        )
st.caption(
    "Vertical bars: the accuracy's 95% interval (as on the leaderboard). The dashed line joins the "
    "Pareto-optimal rows: none is as accurate for fewer retrievals (tokens, dollars). With all datasets, "
    "accuracy is the unweighted mean over datasets, for rows that have all of them. "
    "$/correct and tokens/correct divide totals by the sum of the metric (correct answers)."
)

st.subheader("Score against cost per dataset")
X_AXES = {"seconds": "seconds per question", "tokens": "tokens per question (prompt + completion)"}
ui.from_link("cost_x", list(X_AXES))
x_key = st.radio(
    "Cost axis",
    list(X_AXES),
    format_func=X_AXES.get,
    horizontal=True,
    key="cost_x",
    label_visibility="collapsed",
)
ui.to_link("cost_x", x_key, "seconds")
points = views.score_cost_points(values, costs, metric=metric).dropna(subset=[x_key])
points = points[points[x_key] > 0]  # a log axis (costs span orders of magnitude); 0 has no place on it
plot_sets = list(dict.fromkeys(points["dataset"]))


def score_cost_chart(df: pd.DataFrame, dataset: str) -> alt.Chart:
    """One dataset's rows: the metric (in %) against the chosen cost per question, one point per
    (method, model), on a log cost axis shared by every dataset's panel."""
    lo, hi = float(points[x_key].min()), float(points[x_key].max())
    pts = df.assign(score_pct=100 * df["score"])
    return (
        alt.Chart(pts, title=f"{dataset_label(dataset)} · n = {int(df['n'].max())}")
        .mark_point(size=130, opacity=1, filled=True)
        .encode(
            x=alt.X(
                f"{x_key}:Q",
                title=f"mean {X_AXES[x_key]} (log)",
                scale=alt.Scale(type="log", domain=[lo / 1.5, hi * 1.5]),
                axis=alt.Axis(format="~g" if x_key == "seconds" else "~s"),
            ),
            y=alt.Y("score_pct:Q", title=f"{metric_label(metric)} (%)", scale=alt.Scale(domain=[0, 100])),
            # the legend beside the panel: below it, it took most of the panel's height
            color=alt.Color("method:N", scale=color_scale, legend=alt.Legend(orient="right")),
            shape=alt.Shape("method:N", scale=shape_scale, legend=alt.Legend(orient="right")),
            tooltip=[
                "method",
                "model",
                alt.Tooltip("score_pct:Q", title=f"{metric_label(metric)} %", format=".1f"),
                alt.Tooltip("seconds:Q", title="s / q", format=".2f"),
                alt.Tooltip("tokens:Q", title="tokens / q", format=".1f"),
                "n",
            ],
        )
        .properties(height=300)
    )


if not plot_sets:
    st.caption(f"No row has a {X_AXES[x_key]} above 0: nothing to plot.")
for i in range(0, len(plot_sets), 2):
    for slot, d in zip(st.columns(2), plot_sets[i : i + 2], strict=False):
        with slot:
            st.altair_chart(score_cost_chart(points[points["dataset"] == d], d), width="stretch")
st.caption(
    "One point per method and model on each dataset: the metric's mean over that dataset's questions "
    "against the mean cost per question (seconds: stored wall time, see below; tokens: prompt + "
    "completion), from the same per-question values as the tables. Hover a point for both costs and n."
)
timing = views.timing_table(costs, dataset=None if scope == ALL else scope)
shown = table.merge(timing.drop(columns=["seconds"]), on=["method", "model"], how="left")
shown["accuracy_text"] = [
    ""
    if pd.isna(a)
    else (f"{100 * a:.1f}" if pd.isna(lo) else f"{100 * a:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]")
    for a, lo, hi in zip(shown["accuracy"], shown["accuracy_lo"], shown["accuracy_hi"], strict=True)
]
shown["usd"] = [views.usd_text(x) for x in shown["usd"]]
shown["usd_per_correct"] = [
    "" if pd.isna(x) and not pd.isna(u) else views.usd_text(x)
    for x, u in zip(table["usd_per_correct"], table["usd"], strict=True)
]
shown["pareto"] = views.pareto_text(table)
by_key = {c.key: c for c in COST_COLUMNS}
lead = [by_key["method"], *([by_key["label"]] if shown["label"].astype(bool).any() else []), by_key["model"]]
# three tables of a few columns each, headers kept short (the help tooltips and the caption below
# spell them out): each fits the page's frame at 1,360 px without horizontal scroll; the two tables
# of 11 and 13 columns they replace were 1,154 and 1,614 px wide in an 898 px frame
time_cols = [
    Column(key="accuracy_text", label="accuracy [95%]", kind="text", help="the chosen metric, in %"),
    by_key["seconds"].model_copy(update={"label": "s / q", "help": "mean stored wall time per question"}),
    Column(
        key="seconds_typical",
        label="s / q typ.",
        kind="number",
        fmt="%.2f",
        help="mean without the flagged batches (the warning names them); equal to s / q when none is flagged",
    ),
    Column(key="flagged", label="flagged", kind="text", help="batches far slower than the row's median"),
    by_key["answered"].model_copy(update={"label": "answ. %"}),
    by_key["n"],
]
token_cols = [
    by_key["retrievals"].model_copy(update={"label": "retr. / q"}),
    by_key["llm_calls"].model_copy(update={"label": "calls / q", "help": "mean LLM calls per question"}),
    by_key["prompt_tokens"].model_copy(
        update={"label": "prompt / q", "help": "mean prompt tokens per question"}
    ),
    by_key["completion_tokens"].model_copy(
        update={"label": "compl. / q", "help": "mean completion tokens per question"}
    ),
    by_key["tokens"].model_copy(update={"label": "tok. / q"}),
    by_key["tokens_per_correct"].model_copy(update={"label": "tok. / correct"}),
]
money_cols = [
    by_key["usd"].model_copy(update={"kind": "text"}),
    by_key["usd_per_correct"].model_copy(update={"kind": "text"}),
    Column(
        key="pareto",
        label="Pareto front",
        kind="text",
        help="the costs for which no row is as accurate for less (retrievals, tokens, $)",
    ),
    by_key["coverage"],
]
flagged = shown[shown["timing"].astype(bool)]
st.subheader("Per method")
st.markdown("**Accuracy and time**")
ui.show_table(shown, lead + time_cols, key="cost_table")
st.markdown("**Retrievals, LLM calls and tokens per question**")
ui.show_table(shown, lead + token_cols, key="cost_table_tokens")
st.markdown("**Money and the Pareto front**")
ui.show_table(shown, lead + money_cols, key="cost_table_more")
st.caption(
    "Headers: `q` question; `s / q typ.` the mean without flagged batches; `answ. %` questions with an "
    "extracted answer; `retr.` retrieval calls; `calls` LLM calls; `prompt`, `compl.` and `tok.` prompt, "
    "completion and all tokens; `Pareto front`: the costs (retrievals, tokens, $) for which no row is as "
    "accurate for less."
)
st.caption(
    f"Time: {views.SECONDS_SOURCE}. A batch is flagged when its seconds per question exceed "
    f"{views.OUTLIER_RATIO:g}× the row's median and it took at least {views.OUTLIER_EXCESS_S:.0f} s longer "
    "in all; `s / q typ.` leaves flagged batches out (an estimate, not a measurement). "
    "Money: `free (local)` is an in-process model (tokens not billed, no GPU price); "
    "`unknown (no price)` a model with no price (`harness.results.cost` presets, `prices.json` next to the database)."
)
if len(flagged):
    st.warning(
        "Seconds per question include a likely pause or stall for "
        + "; ".join(f"**{r.method}** ({r.timing})" for r in flagged.itertuples())
        + ". Compare `s / q typ.`, or rerun without pausing.",
        icon=":material/timer:",
    )
