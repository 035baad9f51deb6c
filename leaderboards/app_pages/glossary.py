"""Metric glossary: every metric the app shows, its definition, and what the papers and toolkits
call it (from the metric registry, ``harness.metrics.registry.METRICS``, and the app's own names)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from leaderboards.views import glossary

st.title("Metric glossary")
st.caption(
    "Scores are fractions shown in % (one decimal); counts (retrievals, tokens) are shown as printed. "
    "Intervals (95%): for 0/1 metrics Wilson score per dataset and stratified Agresti-Coull for an "
    "average of several datasets; otherwise percentile bootstrap (1000 resamples, seed 0), an average's "
    "over the pooled questions with datasets weighted equally. Averages are unweighted means over "
    "datasets, shown only for rows with every dataset they cover."
)
# a static table wraps long text, so every definition is read whole at any width (a data grid
# cuts a cell at its column's width)
table = pd.DataFrame(glossary())[["name", "label", "unit", "definition", "also_called"]]
table.columns = ["metric", "shown as", "unit", "definition", "papers / toolkits"]
st.table(table.set_index("metric"))
