"""Training runs: reward components, searches and response length over steps (``train_steps``)."""

from __future__ import annotations

import streamlit as st

from leaderboards import ui

# Metric names written by harness.rl.trainer (one row per step and metric).
SEARCHES = "searches_mean"
LENGTH = "response_len_mean"

st.title("Training runs")
db = ui.db_path()
runs = ui.load_train_runs(db, ui.stamp(db))
st.caption("Steps are numbered from 1, as `harness train` prints them.")
if runs.empty:
    st.info("No training runs in this database (`harness train` logs every step to the train_steps table).")
    st.stop()

labels = {
    r.run_id: f"{r.method} · {r.model} · {r.label or 'no label'} · {r.steps} steps · {r.status} ({r.run_id})"
    for r in runs.itertuples()
}
run_id = st.selectbox("Run", list(labels), format_func=labels.__getitem__, key="train_run")
steps = ui.load_train_steps(db, ui.stamp(db), run_id)
wide = steps.pivot_table(index="step", columns="metric", values="value", aggfunc="first").sort_index()
wide.index = wide.index + 1  # stored 0-based; shown 1-based, as `harness train` prints "step 1/N"
wide.index.name = "step"

rewards = [m for m in wide.columns if m.startswith("reward/")]
left, right = st.columns(2)
with left:
    st.subheader("Reward components")
    if rewards:
        st.line_chart(wide[rewards], x_label="step", y_label="mean reward")
    else:
        st.caption("no reward/* metrics logged")
with right:
    st.subheader("Searches per rollout")
    if SEARCHES in wide:
        st.line_chart(wide[[SEARCHES]], x_label="step", y_label="mean searches")
    else:
        st.caption(f"no {SEARCHES} logged")
left, right = st.columns(2)
with left:
    st.subheader("Response length")
    if LENGTH in wide:
        st.line_chart(wide[[LENGTH]], x_label="step", y_label="mean response tokens (model's own)")
    else:
        st.caption(f"no {LENGTH} logged")
with right:
    st.subheader("Other metrics")
    others = [m for m in wide.columns if m not in (*rewards, SEARCHES, LENGTH)]
    default = [m for m in ("kl", "clip_frac") if m in others]
    chosen = st.multiselect("metrics", others, default=default, key="train_other")
    if chosen:
        st.line_chart(wide[chosen], x_label="step")
with st.expander("All logged values"):
    st.dataframe(wide, key="train_table")
