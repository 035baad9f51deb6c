"""Training runs (``train_steps``): the learning curves of one run, held-out EM at its checkpoints,
and the untrained / SFT / SFT+RL table of held-out evaluations (``docs/training.md``)."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from leaderboards import ui, views

# Rollout metrics of harness.rl.trainer, read as sampled/<name> when logged (views.curve_metric).
SEARCHES = "searches_mean"
LENGTH = "response_len_mean"
SFT_LOSS = "sft/loss"  # harness.rl.sft
VF_LOSS = "critic/vf_loss"  # harness.rl.trainer with a critic (PPO)
VALUES = ("critic/values_mean", "critic/returns_mean")


def line(frame: pd.DataFrame, y_label: str) -> None:
    st.line_chart(frame, x_label="step", y_label=y_label)


def titled_line(title: str, frame: pd.DataFrame, y_label: str, missing: str) -> None:
    """A chart under its subheader, or ``missing`` when the run logged none of its metrics."""
    st.subheader(title)
    if len(frame.columns):
        line(frame, y_label)
    else:
        st.caption(missing)


def heldout_chart(points: pd.DataFrame) -> alt.LayerChart:
    """Held-out EM per checkpoint with its 95% interval; x = optimizer steps (0 = the starting model)."""
    x = alt.X(
        "step:Q",
        title="optimizer steps behind the checkpoint",
        axis=alt.Axis(tickMinStep=1, labelExpr="datum.value == 0 ? 'start (0)' : datum.label"),
    )
    base = alt.Chart(points).encode(
        x=x,
        tooltip=["step", "em", "em_lo", "em_hi", "n", "answered", "top_answer_share", "answer_entropy_bits"],
    )
    band = base.mark_area(opacity=0.2).encode(
        y=alt.Y("em_lo:Q", title="held-out EM", scale=alt.Scale(domain=[0, 1])), y2="em_hi:Q"
    )
    bars = base.mark_rule().encode(y="em_lo:Q", y2="em_hi:Q")
    return band + bars + base.mark_line(point=True).encode(y="em:Q")


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
by_id = runs.set_index("run_id")
run = by_id.loc[run_id]
steps = ui.load_train_steps(db, ui.stamp(db), run_id)
wide = views.train_curves(steps)
sft_run = views.is_sft_run(run["label"])
rewards = views.rollout_curves(wide, views.reward_names(wide.columns))
searches = views.rollout_curves(wide, [SEARCHES])
length = views.rollout_curves(wide, [LENGTH])
critic = [m for m in (VF_LOSS, *VALUES) if m in wide]
# logged names drawn in their own charts; every other metric can be picked under "Other metrics"
shown = {SFT_LOSS, *critic} | {views.curve_metric(wide.columns, n) for n in (*rewards, *searches, *length)}
others = [m for m in wide.columns if m not in shown]


def other_metrics() -> None:
    st.subheader("Other metrics")
    default = [m for m in ("kl", "clip_frac") if m in others]
    picked = st.multiselect("metrics", others, default=default, key="train_other")
    if picked:
        st.line_chart(wide[picked], x_label="step")


if sft_run or SFT_LOSS in wide:
    left, right = st.columns(2)
    with left:
        loss = wide[[m for m in (SFT_LOSS,) if m in wide]]
        titled_line("SFT loss", loss, "loss per model token", f"no {SFT_LOSS} logged")
    if sft_run:
        with right:
            other_metrics()
if not sft_run:
    left, right = st.columns(2)
    with left:
        titled_line("Reward components", rewards, "mean reward", "no reward/* metrics logged")
    with right:
        titled_line("Searches per rollout", searches, "mean searches", f"no {SEARCHES} logged")
    left, right = st.columns(2)
    with left:
        titled_line("Response length", length, "mean response tokens (model's own)", f"no {LENGTH} logged")
    with right:
        other_metrics()
    if (views.curve_metric(wide.columns, "reward/total_mean") or "").startswith(views.SAMPLED):
        st.caption(
            "Reward, searches and length are over every rollout generated (`sampled/*`); under DAPO "
            "dynamic sampling the unprefixed metrics cover only the groups kept for the update."
        )
if critic:
    st.subheader("Critic (PPO)")
    left, right = st.columns(2)
    with left:
        if VF_LOSS in wide:
            line(wide[[VF_LOSS]], "value loss")
    with right:
        values = [m for m in VALUES if m in wide]
        if values:
            line(wide[values], "mean value / return")

points = views.heldout_points(steps)
if len(points):
    st.subheader("Held-out EM at checkpoints")
    st.altair_chart(heldout_chart(points), key="train_heldout_chart")
    st.caption(
        "`heldout/em` with its 95% Wilson interval (`heldout/em_lo` .. `heldout/em_hi`) at the "
        "optimizer steps behind each checkpoint: start (0) is the run's starting model, k the "
        "checkpoint after the step shown as k in the curves above."
    )

st.subheader("Held-out: untrained / SFT / SFT+RL")
# The store records no link from an RL run to the SFT run it started from except the command lines:
# views.linked_sft_run matches the RL run's --model with the SFT run's --out/final.
if sft_run:
    children = [r for r in runs["run_id"] if views.linked_sft_run(runs, r) == run_id]
    default = [run_id, *children[:1]]
else:
    parent = views.linked_sft_run(runs, run_id)
    default = [parent, run_id] if parent else [run_id]
chosen = st.multiselect(
    "runs (SFT runs first, then by start)",
    list(labels),
    default=default,
    format_func=labels.__getitem__,
    key=f"train_heldout_runs_{run_id}",
)
order = runs.assign(sft=[not views.is_sft_run(x) for x in runs["label"]]).sort_values(["sft", "started_at"])
chain = [
    (r, str(by_id.loc[r, "label"]), ui.load_train_steps(db, ui.stamp(db), r))
    for r in order["run_id"]
    if r in chosen
]
table = views.heldout_table(chain)
if len(table):
    st.dataframe(
        table,
        hide_index=True,
        column_order=[
            "checkpoint",
            "run",
            "step",
            "EM [95%]",
            "EM vs start [95% paired]",
            "n",
            "answered",
            "top_answer_share",
            "answer_entropy_bits",
            "f1",
        ],
        column_config={
            "step": st.column_config.NumberColumn("step", help="optimizer steps behind the checkpoint"),
            # short headers, spelled out in the help: the table fits its frame at a 1,360 px window
            # (972 px in an 898 px frame with the long ones)
            "EM vs start [95% paired]": st.column_config.TextColumn(
                "Δ EM vs start",
                help="EM minus the run's starting checkpoint's, question by question, with the paired-bootstrap 95% interval",
            ),
            "answered": st.column_config.NumberColumn("answered", format="percent"),
            "top_answer_share": st.column_config.NumberColumn(
                "top answer", help="share of the commonest answer", format="percent"
            ),
            "answer_entropy_bits": st.column_config.NumberColumn(
                "entropy", help="the answers' entropy in bits", format="%.2f"
            ),
            "f1": st.column_config.NumberColumn("F1", format="%.3f"),
        },
        key="train_heldout_table",
    )
else:
    st.caption("No held-out evaluations logged for these runs (`harness.rl.heldout.record_heldout`).")
st.caption(
    "Rows are the held-out evaluations (`heldout/*`) of the runs picked, named by run and step, every "
    "one on the same held-out questions: EM with its 95% Wilson interval, and (`heldout/em_diff`) its "
    "paired difference from the run's starting checkpoint with the paired-bootstrap 95% interval. "
    "*template majority* (`heldout/baseline/*`) answers each question with the commonest training "
    "gold of its template, the floor a trained checkpoint must clear. "
    "The database does not record which SFT run an RL run started from: the default pairs a run "
    "with the SFT run whose checkpoint (`harness sft --out DIR` writes DIR/final) is the RL run's "
    "`--model`, as both command lines spelled the path. An SFT run's step 0 is the untrained model "
    "and its last step the SFT checkpoint; an RL run picked after an SFT run counts as started "
    "from it (step 0 = SFT, last = SFT+RL), otherwise its rows read start / RL."
)

with st.expander("All logged values"):
    st.dataframe(wide, key="train_table")
