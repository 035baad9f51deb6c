"""The leaderboard's columns, declared once.

Every table the app shows and every file ``harness export`` writes is built from these
declarations: the column order, header, kind, help text, number format, and which columns get a
filter widget. Score columns are declared by template (one per dataset, one per average group) and
instantiated for the datasets that a protocol's runs actually cover.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from harness.data.benches import MULTIHOP, SINGLEHOP

# score / interval: a fraction in [0, 1] (the app shows it in %, files keep the fraction);
# points: a difference of two scores (shown in percentage points); count; number; text.
ColumnKind = Literal["text", "score", "interval", "points", "count", "number"]
PERCENT_KINDS: tuple[str, ...] = ("score", "interval", "points")
FilterKind = Literal["none", "multiselect"]


class Column(BaseModel):
    """One column of a leaderboard table."""

    model_config = ConfigDict(frozen=True)

    key: str  # the DataFrame column name (and the exported header)
    label: str  # the header the app shows
    kind: ColumnKind
    help: str = ""
    filter: FilterKind = "none"  # the app builds a filter widget for every column that has one
    fmt: str | None = None  # printf-style number format in the app (default by kind)
    export: bool = True


class AverageGroup(BaseModel):
    """An average column: the unweighted mean over the group's datasets (as the papers' "Avg.")."""

    model_config = ConfigDict(frozen=True)

    key: str
    label: str
    datasets: tuple[str, ...]  # empty = every dataset of the table
    reported_name: str  # the dataset name of the same average in the ``reported`` table


DATASET_ORDER: tuple[str, ...] = (*SINGLEHOP, *MULTIHOP)

# In display order: the averages come right after the row's name (the ranking is visible without
# scrolling), then the datasets.
AVERAGES: tuple[AverageGroup, ...] = (
    AverageGroup(key="avg_all", label="avg all", datasets=(), reported_name="avg"),
    AverageGroup(
        key="avg_singlehop", label="avg single-hop", datasets=SINGLEHOP, reported_name="avg_singlehop"
    ),
    AverageGroup(key="avg_multihop", label="avg multi-hop", datasets=MULTIHOP, reported_name="avg_multihop"),
)

# The fixed columns of the leaderboard, in display order; score columns (averages, then datasets)
# follow the first three.
LEADERBOARD_COLUMNS: tuple[Column, ...] = (
    Column(key="method", label="method", kind="text", filter="multiselect", help="registered method name"),
    Column(
        key="label",
        label="label",
        kind="text",
        help="the run's label (e.g. 'untrained policy': a trainable method scored with the base model)",
    ),
    Column(key="model", label="model", kind="text", filter="multiselect", help="model or checkpoint"),
    Column(key="n", label="n", kind="count", help="questions scored (all datasets of the row)"),
)
RUNS_COLUMN = Column(key="runs", label="runs", kind="text", help="run ids the row comes from", export=True)

METRIC_LABELS: dict[str, str] = {
    "em": "EM",
    "f1": "F1",
    "cover_em": "cover-EM",
    "cover_em_tokens": "cover-EM (tokens)",
    "evidence_recall": "evidence recall",
}
METRIC_ORDER: tuple[str, ...] = ("em", "f1", "cover_em", "cover_em_tokens")


def metric_label(metric: str) -> str:
    if metric in METRIC_LABELS:
        return METRIC_LABELS[metric]
    if metric.startswith("retrieval_recall@"):
        return f"recall@{metric.split('@', 1)[1]} (first search)"
    if metric.startswith("judge@"):
        return f"judge ({metric.removeprefix('judge@')})"
    return metric


def order_metrics(metrics: list[str]) -> list[str]:
    """Answer metrics first (EM, F1, cover-EM, ...), then judge metrics, then the rest by name."""

    def rank(m: str) -> tuple[int, int, str]:
        if m in METRIC_ORDER:
            return (0, METRIC_ORDER.index(m), m)
        if m.startswith("judge@"):
            return (1, 0, m)
        return (2, 0, m)

    return sorted(set(metrics), key=rank)


def order_datasets(datasets: list[str]) -> list[str]:
    """The field's seven sets in their usual order (single-hop, then multi-hop), then others by name."""
    known = [d for d in DATASET_ORDER if d in datasets]
    return known + sorted(set(datasets) - set(known))


def averages_for(datasets: list[str]) -> list[tuple[AverageGroup, tuple[str, ...]]]:
    """The average columns a table over ``datasets`` gets, each with the datasets it averages.

    A group is shown when the table covers at least one of its datasets; ``avg all`` only when
    the table has more than one dataset. The average is over the covered datasets (a caption
    says which), so a mini bench's "avg multi-hop" is over the multi-hop sets it has.
    """
    out = []
    for g in AVERAGES:
        members = tuple(d for d in datasets if not g.datasets or d in g.datasets)
        if not members or (not g.datasets and len(datasets) < 2):
            continue
        out.append((g, members))
    return out


def score_column(key: str, label: str, help: str = "") -> Column:
    return Column(key=key, label=label, kind="score", help=help)


def interval_columns(key: str, label: str) -> tuple[Column, Column]:
    """The numeric 95% interval bounds of a score column (exported files carry them)."""
    return (
        Column(key=f"{key}_lo", label=f"{label} 95% lo", kind="interval", help="bootstrap 2.5th percentile"),
        Column(key=f"{key}_hi", label=f"{label} 95% hi", kind="interval", help="bootstrap 97.5th percentile"),
    )


def ci_text_column(key: str, label: str) -> Column:
    """The interval as text (``[lo, hi]``), shown next to the score in the app."""
    return Column(
        key=f"{key}_ci",
        label=f"{label} 95% CI",
        kind="text",
        help="bootstrap 95% interval, in %",
        export=False,
    )


# The reported-vs-reproduced table.
REPORTED_COLUMNS: tuple[Column, ...] = (
    Column(key="paper", label="paper", kind="text", filter="multiselect"),
    Column(key="setting", label="table", kind="text", help="paper table and variant"),
    Column(key="method", label="method", kind="text", filter="multiselect"),
    Column(key="model", label="model (paper)", kind="text", filter="multiselect"),
    Column(key="dataset", label="dataset", kind="text", filter="multiselect"),
    Column(key="metric", label="metric", kind="text", filter="multiselect"),
    Column(key="reported", label="reported", kind="score", help="the paper's number"),
    Column(key="measured", label="measured", kind="score", help="this harness, same method/model/dataset"),
    Column(key="measured_lo", label="measured 95% lo", kind="interval"),
    Column(key="measured_hi", label="measured 95% hi", kind="interval"),
    Column(
        key="diff",
        label="measured - reported",
        kind="points",
        help="difference in percentage points",
    ),
    Column(key="n", label="n", kind="count", help="questions behind the measured number"),
    Column(key="measured_model", label="model (measured)", kind="text"),
    Column(key="coverage", label="coverage", kind="text", help="datasets behind a measured average"),
    Column(key="source", label="source", kind="text", help="citation of the reported number"),
    Column(key="note", label="note", kind="text"),
)

# The cost and efficiency table.
COST_COLUMNS: tuple[Column, ...] = (
    Column(key="method", label="method", kind="text", filter="multiselect"),
    Column(key="label", label="label", kind="text"),
    Column(key="model", label="model", kind="text", filter="multiselect"),
    Column(key="accuracy", label="accuracy", kind="score", help="the chosen metric"),
    Column(key="retrievals", label="retrievals / q", kind="number", help="mean retrieval calls per question"),
    Column(
        key="tokens", label="tokens / q", kind="number", help="mean prompt + completion tokens per question"
    ),
    Column(key="llm_calls", label="LLM calls / q", kind="number"),
    Column(key="seconds", label="s / q", kind="number", help="mean wall time per question"),
    Column(
        key="usd",
        label="$ / q",
        kind="number",
        help="mean cost per question in USD (harness.cost prices); empty when any question's cost is unknown",
        fmt="$%.6f",
    ),
    Column(key="n", label="n", kind="count"),
    Column(
        key="pareto_retrievals",
        label="Pareto (retrievals)",
        kind="text",
        help="no method is as accurate with fewer retrievals",
    ),
    Column(
        key="pareto_tokens",
        label="Pareto (tokens)",
        kind="text",
        help="no method is as accurate with fewer tokens",
    ),
    Column(
        key="pareto_usd", label="Pareto ($)", kind="text", help="no method is as accurate for fewer dollars"
    ),
)
