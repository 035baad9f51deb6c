"""``harness export``: the app's views as CSV, Parquet or Markdown (same queries, same numbers).

Exported files carry numeric interval bounds (``<column>_lo``/``<column>_hi``) instead of the
app's ``[lo, hi]`` text, and fractions (0.5) rather than percentages.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pandas as pd

from harness.errors import ConfigError
from leaderboards import EXPORT_FORMATS, EXPORT_VIEWS, queries, views
from leaderboards.schema import COST_COLUMNS, REPORTED_COLUMNS, Column, metric_label

ViewName = Literal["leaderboard", "reported", "cost"]
Format = Literal["csv", "parquet", "markdown"]
VIEWS = EXPORT_VIEWS
FORMATS = EXPORT_FORMATS


@dataclass(frozen=True)
class ExportedView:
    title: str
    frame: pd.DataFrame
    columns: list[Column]


def build_view(
    store, view: str, *, protocol: str | None = None, metric: str = "em", dataset: str | None = None
) -> ExportedView:
    """The named view of one protocol (``protocol``: an id or unique name; default the only one)."""
    if view not in VIEWS:
        raise ConfigError(f"unknown view {view!r}; choose one of {', '.join(VIEWS)}")
    pid = views.choose_protocol(store, protocol)
    name = views.protocol_name(store, pid)
    if view == "leaderboard":
        board = views.leaderboard_from_db(store, pid, metric)
        cols = board.columns(ci="bounds")
        return ExportedView(
            f"Leaderboard · {metric_label(metric)} · protocol {name} ({pid})",
            board.display_frame(ci="bounds"),
            cols,
        )
    if view == "reported":
        rep = queries.reported(store)
        table = views.build_reported(rep, views.reported_boards(store, pid, rep))
        return ExportedView(
            f"Reported vs reproduced · measured under protocol {name} ({pid})", table, list(REPORTED_COLUMNS)
        )
    metrics = queries.metrics_present(store, pid)
    if metric not in metrics:
        raise ConfigError(
            f"no values of metric {metric!r} under protocol {pid}; metrics stored: {', '.join(metrics)}"
        )
    table = views.build_cost(
        queries.latest_values(store, pid, [metric]),
        queries.latest_costs(store, pid),
        metric=metric,
        dataset=dataset,
    )
    scope = dataset or "all datasets"
    return ExportedView(
        f"Cost and efficiency · {metric_label(metric)} · {scope} · protocol {name} ({pid})",
        table,
        list(COST_COLUMNS),
    )


def to_markdown(df: pd.DataFrame, columns: list[Column] | None = None, *, digits: int = 4) -> str:
    """A GitHub markdown table; headers are the declared labels when ``columns`` is given."""
    keys = list(df.columns)
    labels = {c.key: c.label for c in columns or []}
    header = [labels.get(k, k) for k in keys]
    lines = ["| " + " | ".join(_cell(h) for h in header) + " |", "|" + "|".join("---" for _ in keys) + "|"]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(_cell(_fmt(v, digits)) for v in row) + " |")
    return "\n".join(lines) + "\n"


def _fmt(v: object, digits: int) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return "" if math.isnan(v) else f"{v:.{digits}f}"
    return str(v)


def _cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def write(exported: ExportedView, fmt: str, out: Path | None) -> str | None:
    """Write the view; returns the markdown text when ``out`` is None and the format is markdown."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    df = exported.frame
    if fmt == "markdown":
        text = f"**{exported.title}**\n\n" + to_markdown(df, exported.columns)
        if out is None:
            return text
        out.write_text(text)
        return None
    if out is None:
        raise ConfigError(f"--format {fmt} writes a file: give --out PATH")
    out.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "csv":
        df.to_csv(out, index=False)
    else:
        df.to_parquet(out, index=False)
    return None
