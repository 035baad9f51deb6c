"""Reported vs reproduced: each paper's tables as the paper prints them, our numbers beside them.

One table per paper table and metric, one row per paper row (method, the paper's model) and model
of ours, with every dataset of the paper in that row. A cell holds the paper's number; on a row of
our model, ours below it with its 95% interval and n, then ``Δ`` = ours − paper where the
comparison is like with like (same model, same datasets, same metric variant; ``Δ —`` otherwise,
the reason in ``differs``). The paper's own averages (``Avg. (paper)``) hold the paper's numbers
only; ``Avg. (shared sets)`` compares the mean over the datasets both sides have. Tables are plain
HTML: every row is on the page (no inner scrolling) and text wraps inside its column.
"""

from __future__ import annotations

import json

import streamlit as st

from leaderboards import ui, views
from leaderboards.schema import REPORTED_COLUMNS, metric_label

STYLE = """<style>
table.rar-reported {width: 100%; border-collapse: collapse; font-size: 0.8rem; margin-bottom: 0.5rem;}
table.rar-reported th, table.rar-reported td {border: 1px solid rgba(128,128,128,0.35); padding: 2px 5px;
  vertical-align: top; white-space: normal; line-height: 1.25;}
table.rar-reported th {background: rgba(128,128,128,0.12); font-weight: 600; text-align: left;}
table.rar-reported td.name, table.rar-reported td.differs {overflow-wrap: anywhere;}
table.rar-reported td.differs {min-width: 8rem; color: rgba(128,128,128,1);}
table.rar-reported span.paper, table.rar-reported span.ci {white-space: nowrap;}
table.rar-reported span.ours {color: #1f77b4; font-weight: 600;}
table.rar-reported span.meta {color: rgba(128,128,128,1); font-size: 0.72rem;}
table.rar-reported span.delta {font-size: 0.8rem; font-weight: 700; white-space: nowrap;}
table.rar-reported span.delta.agrees {color: #2ca02c;}
table.rar-reported span.delta.above, table.rar-reported span.delta.below {color: #d97706;}
</style>"""


@st.cache_data(ttl=300, show_spinner=False)
def load_samples(db: str, version: tuple[int, int], protocol_id: str) -> views.Samples:
    from leaderboards.queries import open_results
    from leaderboards.reported_sync import reported_frame

    store = open_results(db)
    return views.reported_samples(store, protocol_id, reported_frame(store))


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
    samples: views.Samples = {}
    proto = None
else:
    boards = ui.load_reported_boards(db, ui.stamp(db), protocol)
    samples = load_samples(db, ui.stamp(db), protocol)
    raw = ui.load_protocol_json(db, ui.stamp(db), protocol)
    proto = json.loads(raw) if raw else None

papers = sorted(set(reported["paper"]))
everything = views.build_reported(reported, boards, protocol=proto, samples=samples)
st.markdown(STYLE, unsafe_allow_html=True)
st.subheader("Across the papers")
st.markdown(views.summary_html(views.reported_summary(everything)), unsafe_allow_html=True)
st.caption(
    "Per paper: its rows as printed, how many have a number of ours under this protocol, how many a "
    "comparable one (the row's recorded setting matches our run on corpus, retriever, top-k, prompt, model, "
    "metric variant and training state: harness/results/comparable.py), and how many of those comparable "
    "numbers agree (our 95% interval within ±5 points of the paper's number: an equivalence test, "
    "harness/results/agreement.py), differ (the paper's number outside our interval) or are inconclusive "
    "(neither: at n = 10 an interval is wider than the margin, so nothing can agree)."
)
opening = views.default_paper(everything)  # one with our runs, if any
c1, c2, c3 = st.columns([2, 2, 1], vertical_alignment="bottom")
ui.from_link("paper", papers, default=opening)
paper = c1.selectbox("Paper", papers, key="paper")
ui.to_link("paper", paper, opening)
ui.from_link("match_model", kind=bool, default=False)
match_model = c3.toggle(
    "Same model only",
    key="match_model",
    help="On: only our runs of the paper's own model. Off: every model we ran for the method, with the "
    "model difference named in `differs` and no difference computed.",
)
ui.to_link("match_model", match_model, False)

rows = reported[reported["paper"] == paper]
table = views.build_reported(rows, boards, match_model=match_model, protocol=proto, samples=samples)
metrics = list(dict.fromkeys(rows["metric"]))
choices = ["all", *metrics]
ui.from_link("rep_metric", choices, default="all")
chosen = c2.selectbox(
    "Metric",
    choices,
    key="rep_metric",
    format_func=lambda m: "all metrics" if m == "all" else metric_label(m),
)
ui.to_link("rep_metric", chosen, "all")

measured: dict[str, set[str]] = {}
for b in boards.values():
    for method, model, _k in b.cells:
        measured.setdefault(method, set()).add(model)
reason = views.no_comparison_reason(table, measured)
n_diff = int(table["diff"].notna().sum())
st.caption(
    f"**{paper}**: {len(rows)} published numbers; {int(table['measured'].notna().sum())} cells with our "
    f"number under protocol `{protocol}`, {n_diff} of them like with like. Each cell: the paper's number; "
    "below it **ours [95% interval]**; then n and **Δ = ours − paper** (% for fractions, Δ in percentage "
    "points; counts as printed; green ✓ agrees where our 95% interval lies within ±5 points of the paper's, "
    "✗ differs where the paper's number is outside it, ? inconclusive otherwise), `Δ —` where not "
    "like with like (`differs` names the setting fields that are not the same). A cell with one number: the paper's, for a dataset we did not run. "
    "**Avg. (paper)** is the paper's own average (its datasets); **Avg. (shared sets)** compares the mean "
    "over the datasets both sides have."
)
if reason:
    st.warning(reason, icon=":material/info:")

pivots = [p for p in views.reported_pivots(table) if chosen == "all" or p.metric == chosen]
ui.from_link("rep_ours", kind=bool, default=True)
ours_first = st.toggle(
    "Only tables with a number of ours",
    key="rep_ours",
    help="On (the default): the page opens on the first of the paper's tables that has a number of ours; "
    "off: every table the paper prints, in its order.",
)
ui.to_link("rep_ours", ours_first, True)
if ours_first and any(p.n_measured for p in pivots):
    hidden = sum(not p.n_measured for p in pivots)
    pivots = [p for p in pivots if p.n_measured]
    if hidden:
        st.caption(f"{hidden} of the paper's tables have no number of ours and are not shown (toggle above).")
for pivot in pivots:
    st.subheader(pivot.title)
    differs = f" · **protocol differs:** {pivot.protocol_differs}" if pivot.protocol_differs else ""
    shared = f" · shared sets: {pivot.shared}" if pivot.shared else ""
    st.caption(
        f"{pivot.source} · {pivot.n_measured} cells with our number, {pivot.n_compared} compared"
        f"{shared}{differs}"
    )
    st.markdown(views.pivot_html(pivot), unsafe_allow_html=True)

with st.expander("All rows (long format, as `harness export --view reported` writes them)"):
    ui.show_table(table, list(REPORTED_COLUMNS), key="reported_table")
