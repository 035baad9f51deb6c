"""Leaderboard: methods x datasets for one protocol and one metric, each cell score ± 95% interval.

Metric, sort, filters and the interval/partial toggles live in the URL (a permalink restores them).
"""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pandas as pd
import streamlit as st

from harness.errors import ConfigError
from leaderboards import ui, views
from leaderboards.schema import dataset_label, metric_label

st.title("Leaderboard")
db = ui.db_path()
protocol = ui.current_protocol()
if protocol is None:
    st.info("No scored evaluation runs yet: `harness run --method all --bench mini-multihop --limit 10`.")
    st.stop()

metrics = ui.load_metrics(db, ui.stamp(db), protocol)
c_metric, c_sort, c_ci, c_part, c_holm = st.columns([2, 2, 1.1, 1.3, 1], vertical_alignment="bottom")
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
    help="Runs that did not end `complete` (killed, failed, incomplete, still running), shown where no "
    "complete run of the same method, model and dataset exists: a complete run is never hidden by a "
    "newer partial one.",
)
ui.to_link("partial", include_partial, False)
ui.from_link("holm", kind=bool, default=False)
holm = c_holm.toggle(
    "Holm",
    key="holm",
    help="Ties (≈) come from a paired test of each row against the column's best at 0.05 per pair. "
    "On: Holm's correction across the column's rows (fewer rows separated).",
)
ui.to_link("holm", holm, False)
try:
    board = ui.load_leaderboard(db, ui.stamp(db), protocol, metric, include_partial)
except ConfigError as e:
    st.warning(str(e))
    st.stop()
sort_labels = {key: board.header(key) for key in board.score_keys}
ui.from_link("sort", list(sort_labels))
sort_by = c_sort.selectbox("Sort by", list(sort_labels), format_func=sort_labels.__getitem__, key="sort")
ui.to_link("sort", sort_by, next(iter(sort_labels), None))

# one text column per score whether or not intervals are shown, so the ≈ marks never depend on
# the interval toggle (turning intervals off used to drop them while the bold stayed)
shown_keys = board.shown_keys()
columns = board.columns(ci="text")
if not include_partial:
    columns = [c for c in columns if c.key != "status"]
full = board.display_frame(ci="bounds").join(
    board.display_frame(ci="text")[[f"{k}_text" for k in board.score_keys]]
)
if not show_ci:  # the score alone, as text (the tie mark follows it)
    for k in board.score_keys:
        full[f"{k}_text"] = ["" if pd.isna(v) else f"{100 * v:.1f}" for v in full[k]]
full = ui.schema_filters(full, columns, "lb")
full = full.sort_values([sort_by, "method", "model"], ascending=[False, True, True], na_position="last")
full = full.reset_index(drop=True)
bold: dict[str, set[int]] = {}
for key in board.score_keys:
    best, ties = board.best_and_ties(key, full, holm=holm)
    shown_key = f"{key}_text"
    bold[shown_key] = best
    full[shown_key] = [t + " ≈" if i in ties else t for i, t in enumerate(full[shown_key])]

# The scores table holds what ranks a row (method, type, model when several, the scores) so that
# every dataset column fits at 1600 px without scrolling; the rest is in "Row details" below.
models = sorted({str(m) for m in board.frame["model"]})  # of the whole board: filters do not move columns
score_keys = {f"{k}_text": k for k in shown_keys}
lead = ["method", "type"] + (["model"] if len(models) > 1 else [])
by_key = {c.key: c for c in columns}
main_cols = [by_key[k] for k in lead if k in by_key] + [
    c.model_copy(update={"label": board.short_header(score_keys[c.key])})
    for c in columns
    if c.key in score_keys
]
one_model = f" · model **{models[0]}**" if len(models) == 1 else ""
st.caption(
    f"Protocol **{board.protocol_name}** (`{board.protocol_id}`){one_model} · {metric_label(metric)} in % · "
    f"newest complete run{' (else newest partial run)' if include_partial else ''} per method, model and dataset"
    + (" · score [95% interval] (methods below)" if show_ci else "")
    + " · **bold**: best in the column"
    + " · ≈: "
    + views.tie_rule(board.binary, holm=holm)
    + " · an average is shown only for rows with every dataset it covers."
)
ui.show_table(full, main_cols, key="leaderboard_table", bold=bold)
notes = []
for g, members in board.averages:
    if g.key in shown_keys:
        notes.append(f"**{g.label}**: unweighted mean over {board.coverage(g.key)}")
    else:
        notes.append(f"{g.label} is {dataset_label(members[0])} alone here, so it is not repeated")
st.caption(" · ".join(notes))
if show_ci:
    methods: dict[str, list[str]] = {}
    for k in shown_keys:
        methods.setdefault(board.interval_method(k), []).append(board.short_header(k).split(" · ")[0])
    st.caption(
        "95% intervals: "
        + "; ".join(f"{m} for {', '.join(cols)}" for m, cols in methods.items())
        + (
            " (every value is 0 or 1). Agresti-Coull adds two successes and two failures spread over the "
            "averaged datasets; see docs/leaderboard.md."
            if board.binary
            else " (values are not all 0/1)."
        )
    )
if not include_partial:
    st.caption("Partial runs (not `complete`) are left out; the toggle above includes and marks them.")

st.subheader("Row details")
detail_keys = ["method", "model", "size", "label", "retriever", "top_k", "answered", "valid_format", "n"]
# the run ids are in the provenance table below (one row per run): as a column here they made the
# table 1,044 px wide in its 898 px frame at a 1,360 px window
detail_keys += ["errors", "status", "paper"]
details = full.copy()
details["top_k"] = ["—" if pd.isna(v) else str(int(v)) for v in details["top_k"]]
for key in ("label", "size", "retriever"):
    details[key] = [str(v) if isinstance(v, str) and v else "—" for v in details[key]]
detail_cols = [
    c.model_copy(update={"kind": "text"}) if c.key == "top_k" else c
    for c in (by_key.get(k) for k in detail_keys)
    if c is not None
]
ui.show_table(details, detail_cols, key="leaderboard_details")
st.caption(
    "—: does not apply (a method that does not retrieve has no retriever and no top-k; no label set). "
    "Each row's run ids: the provenance table below."
)

links = []
for r in full.itertuples(index=False):
    system = f"{r.method} · {r.model}"
    cells = [
        f"[{dataset_label(d)}](trajectories?{urlencode({'protocol': protocol, 'traj_a': system, 'traj_dataset': d})})"
        for d in board.datasets
        if not pd.isna(getattr(r, d, float("nan")))
    ]
    if cells:
        links.append(f"**{r.method}**: " + " ".join(cells))
with st.expander("Questions behind each cell (trajectory explorer)"):
    st.markdown("  \n".join(links))
# a static table's long values (a command, a 64-character content hash) wrap inside their cells,
# anywhere if they must, so that no table is wider than its frame
WRAP = "overflow-wrap: anywhere !important; white-space: normal !important;"
st.markdown(
    "<style>"
    + ", ".join(f'[data-testid="stTableStyledTable"] {c}' for c in ("td", "td p", "th", "th p"))
    + f" {{{WRAP}}}</style>",
    unsafe_allow_html=True,
)
with st.expander("Provenance: commit, package versions, training state and command of each run"):
    runs = sorted({x.strip() for v in full["runs"] for x in str(v).split(",") if x.strip()})
    prov = ui.load_provenance(db, ui.stamp(db), tuple(runs))
    st.table(prov.set_index("run_id"))  # a static table: the long command and versions wrap

st.subheader("Protocol settings")
raw = ui.load_protocol_json(db, ui.stamp(db), protocol)
if raw:
    # two tables side by side, split between top-level settings, so the list is half as tall
    rows = views.protocol_rows(json.loads(raw))
    top = rows["setting"].str.split(".").str[0]
    cut = next((i for i in range(len(rows) // 2, len(rows)) if top.iloc[i] != top.iloc[i - 1]), len(rows))
    for slot, part in zip(st.columns(2), (rows.iloc[:cut], rows.iloc[cut:]), strict=True):
        if len(part):
            slot.table(part.set_index("setting"))
else:
    st.caption("this protocol has no stored settings")
