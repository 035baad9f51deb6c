"""Plain-text tables of result frames, shared by the engine (``harness regress``'s report) and the
leaderboard's exports (which import it: the dependency runs one way)."""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd


def fmt_value(v: object, digits: int) -> str:
    """A cell's text: floats with ``digits`` decimals, NaN and None empty."""
    if v is None:
        return ""
    if isinstance(v, float):
        return "" if math.isnan(v) else f"{v:.{digits}f}"
    return str(v)


def md_cell(s: str) -> str:
    """``s`` safe inside a GitHub markdown table cell (pipes escaped, one line)."""
    return s.replace("|", "\\|").replace("\n", " ")


def markdown_table(df: pd.DataFrame, labels: Mapping[str, str] | None = None, *, digits: int = 4) -> str:
    """A GitHub markdown table of a frame as it is; ``labels`` maps column keys to headers."""
    keys = list(df.columns)
    header = [(labels or {}).get(k, k) for k in keys]
    lines = ["| " + " | ".join(md_cell(h) for h in header) + " |", "|" + "|".join("---" for _ in keys) + "|"]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(md_cell(fmt_value(v, digits)) for v in row) + " |")
    return "\n".join(lines) + "\n"
