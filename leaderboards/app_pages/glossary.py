"""Metric glossary: every metric the app shows, its definition, and what the papers and toolkits
call it (from the metric registry, ``harness.metrics.registry.METRICS``, and the app's own names)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from leaderboards.views import glossary

st.title("Metric glossary")
st.caption(
    "Scores are fractions shown in % (one decimal); counts (retrievals, tokens) are shown as printed. "
    "Intervals: 95% Wilson score intervals for 0/1 metrics, percentile bootstrap (1000 resamples, "
    "seed 0) otherwise; averages are unweighted means over datasets, shown only for rows with every "
    "dataset they cover."
)
st.dataframe(
    pd.DataFrame(glossary()),
    column_config={
        "name": st.column_config.TextColumn("metric", pinned=True),
        "label": st.column_config.TextColumn("shown as"),
        "definition": st.column_config.TextColumn("definition", width="large"),
        "also_called": st.column_config.TextColumn("papers / toolkits", width="large"),
        "unit": st.column_config.TextColumn("unit"),
    },
    hide_index=True,
    width="stretch",
    key="glossary_table",
)
