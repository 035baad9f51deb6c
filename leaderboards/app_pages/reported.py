"""Reported vs reproduced: each paper's tables as the paper prints them, our numbers beside them.

One pivot per paper table and metric: methods x datasets, each cell ``reported / ours / ours -
reported`` in the paper's metric and unit (EM in %, counts such as retrievals per question as
printed). A difference is given only for like with like (same model; for an average, the same
datasets); the ``differs`` column says what is not the same.
"""

from __future__ import annotations

import streamlit as st

from leaderboards import ui, views
from leaderboards.schema import REPORTED_COLUMNS, dataset_label

st.title("Reported vs reproduced")
db = ui.db_path()
protocol = ui.current_protocol()
reported = ui.load_reported(db, ui.stamp(db))
if reported.empty:
    st.info("No published numbers: no registered method declares any (Method.reported).")
    st.stop()
if protocol is None:
    st.info("No scored evaluation runs yet; showing published numbers only.")
    boards: dict[str, views.Leaderboard] = {}
    proto = None
else:
    import json

    boards = ui.load_reported_boards(db, ui.stamp(db), protocol)
    raw = ui.load_protocol_json(db, ui.stamp(db), protocol)
    proto = json.loads(raw) if raw else None

papers = sorted(set(reported["paper"]))
c1, c2 = st.columns([2, 1], vertical_alignment="bottom")
ui.from_link("paper", papers, default=papers[0])
paper = c1.selectbox("Paper", papers, key="paper")
ui.to_link("paper", paper)
ui.from_link("match_model", kind=bool, default=False)
match_model = c2.toggle(
    "Same model only",
    key="match_model",
    help="On: only our runs of the paper's own model. Off: every model we ran for the method, with the "
    "model difference named in `differs` and no difference computed.",
)
ui.to_link("match_model", match_model, False)

rows = reported[reported["paper"] == paper]
table = views.build_reported(rows, boards, match_model=match_model, protocol=proto)
measured: dict[str, set[str]] = {}
for b in boards.values():
    for method, model, _k in b.cells:
        measured.setdefault(method, set()).add(model)
reason = views.no_comparison_reason(table, measured)
n_diff = int(table["diff"].notna().sum())
st.caption(
    f"**{paper}**: {len(rows)} published numbers; {int(table['measured'].notna().sum())} cells with our "
    f"number under protocol `{protocol}`, {n_diff} of them like with like (a difference is shown). "
    "Cell: **reported / ours / ours − reported**, in the paper's metric and unit (% for fractions, "
    "in percentage points for the difference; counts as printed). — : no number, or not comparable."
)
if reason:
    st.warning(reason, icon=":material/info:")

for pivot in views.reported_pivots(table):
    st.subheader(pivot.title)
    differs = f" · **protocol differs:** {pivot.protocol_differs}" if pivot.protocol_differs else ""
    st.caption(
        f"{pivot.source} · {pivot.n_measured} cells with our number, {pivot.n_compared} compared{differs}"
    )
    cfg = {
        "method": st.column_config.TextColumn("method", pinned=True),
        "model": st.column_config.TextColumn("model (paper)"),
        "ours": st.column_config.TextColumn("model (ours)"),
        "differs": st.column_config.TextColumn(
            "differs", help="what is not like with like: model, dataset coverage of an average", width="large"
        ),
        **{d: st.column_config.TextColumn(dataset_label(d)) for d in pivot.datasets},
    }
    st.dataframe(
        pivot.frame,
        column_config=cfg,
        hide_index=True,
        width="stretch",
        key=f"pivot_{pivot.setting}_{pivot.metric}",
    )

with st.expander("All rows (long format, as `harness export --view reported` writes them)"):
    ui.show_table(table, list(REPORTED_COLUMNS), key="reported_table")
