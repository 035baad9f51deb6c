"""The leaderboard app (``harness leaderboard`` runs ``streamlit run`` on this file).

The database path comes from ``$RAR_HARNESS_DB``. The sidebar chooses the protocol every page
shows; the pages live in ``leaderboards/app_pages/``.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from leaderboards import ui

HERE = Path(__file__).resolve().parent / "app_pages"

# An emoji favicon is drawn by the browser (an inline SVG); a ":material/...:" one would be fetched
# from fonts.gstatic.com, which fails offline. Page icons below use the bundled Material font.
st.set_page_config(page_title="rar-harness leaderboard", page_icon="📊", layout="wide")

PAGES = [
    st.Page(HERE / "leaderboard.py", title="Leaderboard", icon=":material/leaderboard:", default=True),
    st.Page(HERE / "reported.py", title="Reported vs reproduced", icon=":material/compare_arrows:"),
    st.Page(HERE / "cost.py", title="Cost and efficiency", icon=":material/speed:"),
    st.Page(HERE / "trajectories.py", title="Trajectory explorer", icon=":material/account_tree:"),
    st.Page(HERE / "training.py", title="Training runs", icon=":material/show_chart:"),
    st.Page(HERE / "glossary.py", title="Metric glossary", icon=":material/menu_book:"),
]

nav = st.navigation(PAGES)
db = ui.db_path()
if not Path(db).exists():
    st.error(
        f"No results database at `{db}`. Run `harness run` first, or start with `harness leaderboard --db PATH`."
    )
    st.stop()
ui.protocol_selector(db)
st.sidebar.caption(f"results: `{db}`")
nav.run()
