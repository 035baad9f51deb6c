"""The leaderboard: a Streamlit app over the results database, and the views it shares with
``harness export`` and ``harness regress``.

- ``schema``: the column schema, declared once (tables, filters and exports follow it);
- ``queries``: read-only SQL (one short connection per query);
- ``views``: leaderboard, reported-vs-reproduced, cost/Pareto, trajectory views as data;
- ``export``: CSV / Parquet / Markdown of a view;
- ``app.py`` + ``app_pages/``: the Streamlit app (``harness leaderboard``).
"""

DB_ENV = "RAR_HARNESS_DB"
"""Environment variable naming the database the app reads."""

EXPORT_VIEWS: tuple[str, ...] = ("leaderboard", "reported", "cost")
"""The views ``harness export`` writes (the app's pages of the same names)."""

EXPORT_FORMATS: tuple[str, ...] = ("csv", "parquet", "markdown", "latex")
