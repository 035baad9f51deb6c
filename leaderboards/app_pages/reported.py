"""Reported vs reproduced: each paper's published numbers next to this harness's measured ones."""

from __future__ import annotations

import streamlit as st

from leaderboards import ui, views
from leaderboards.schema import REPORTED_COLUMNS

st.title("Reported vs reproduced")
db = ui.db_path()
protocol = ui.current_protocol()
reported = ui.load_reported(db, ui.stamp(db))
if reported.empty:
    st.info(
        "No published numbers in this database. `harness leaderboard` loads the registered paper "
        "methods' tables into it when it starts (unless `--no-sync`)."
    )
    st.stop()
if protocol is None:
    st.info("No scored evaluation runs yet; showing published numbers only.")
    boards: dict[str, views.Leaderboard] = {}
else:
    boards = ui.load_reported_boards(db, ui.stamp(db), protocol)

c1, c2 = st.columns(2)
match_model = c1.toggle(
    "Same model only",
    value=True,
    key="match_model",
    help="Off: compare with every model this harness measured for the method (e.g. a small CPU model "
    "against the paper's 7B) — a sanity view, not a reproduction.",
)
only_measured = c2.toggle("Only rows with a measured number", value=False, key="only_measured")

table = views.build_reported(reported, boards, match_model=match_model)
if only_measured:
    table = table[table["measured"].notna()]
table = ui.schema_filters(table, list(REPORTED_COLUMNS), "rep")

n_measured = int(table["measured"].notna().sum())
st.caption(
    f"{len(table)} published numbers, {n_measured} with a measured counterpart under protocol "
    f"`{protocol}`. Published numbers come from each paper's own protocol (corpus, retriever, "
    "model); a difference under another protocol is not a failed reproduction. "
    "`measured - reported` is in percentage points."
)
ui.show_table(table, list(REPORTED_COLUMNS), key="reported_table")
