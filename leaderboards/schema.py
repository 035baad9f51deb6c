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
ColumnKind = Literal["text", "score", "interval", "points", "count", "number", "link"]
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

# The fixed columns of the leaderboard. The table shows method, type, label, model and size first
# (method pinned), then the score columns (averages, then datasets), then the rest.
LEADERBOARD_COLUMNS: tuple[Column, ...] = (
    Column(key="method", label="method", kind="text", filter="multiselect", help="registered method name"),
    Column(
        key="type",
        label="type",
        kind="text",
        filter="multiselect",
        help="prompt baseline; trained (an RL method's checkpoint); untrained policy (an RL method run "
        "with its base model)",
    ),
    Column(
        key="label",
        label="label",
        kind="text",
        help="the run's label (e.g. 'untrained policy': a trainable method scored with the base model)",
    ),
    Column(key="model", label="model", kind="text", filter="multiselect", help="model or checkpoint"),
    Column(key="size", label="size", kind="text", help="parameters, from the model name"),
    Column(
        key="retriever", label="retriever", kind="text", help="the protocol's retriever ('—': no retrieval)"
    ),
    Column(key="top_k", label="top-k", kind="count", help="passages per search (the protocol's)"),
    Column(
        key="answered",
        label="answered %",
        kind="score",
        help="questions with an extracted answer (extraction status ok or multiple_answers)",
    ),
    Column(
        key="valid_format",
        label="valid format %",
        kind="score",
        help="questions whose every generation was a well-formed search or answer",
    ),
    Column(key="n", label="n", kind="count", help="questions scored (all datasets of the row)"),
    Column(
        key="errors",
        label="errors",
        kind="count",
        help="questions whose generation failed (not scored as answers)",
    ),
    Column(
        key="status",
        label="status",
        kind="text",
        help="complete, or partial: the run ids that did not finish (shown only when partial runs are included)",
    ),
    Column(key="paper", label="paper", kind="link", help="the method's paper or code"),
)
RUNS_COLUMN = Column(key="runs", label="runs", kind="text", help="run ids the row comes from", export=True)
LEADING_KEYS: tuple[str, ...] = ("method", "type", "label", "model", "size")
"""The leaderboard columns shown before the scores."""

METRIC_LABELS: dict[str, str] = {
    "em": "EM",
    "f1": "F1",
    "cover_em": "cover-EM",
    "cover_em_tokens": "cover-EM (tokens)",
    "evidence_recall": "evidence recall",
}
METRIC_ORDER: tuple[str, ...] = ("em", "f1", "cover_em", "cover_em_tokens")


# Readable dataset names for tables meant for readers (paper tables, the app's headers).
DATASET_LABELS: dict[str, str] = {
    "nq": "NQ",
    "triviaqa": "TriviaQA",
    "popqa": "PopQA",
    "hotpotqa": "HotpotQA",
    "2wikimultihopqa": "2Wiki",
    "musique": "MuSiQue",
    "bamboogle": "Bamboogle",
    "avg": "Avg.",
    "avg_all": "Avg.",
    "avg_singlehop": "Avg. single-hop",
    "avg_multihop": "Avg. multi-hop",
}

# Metrics that are counts or raw means (shown as printed: 2.9 retrievals stay 2.9); every other
# metric is a fraction in [0, 1] shown in %.
COUNT_METRICS: dict[str, str] = {
    "n_retrievals": "search calls per question",
    "thinking_tokens": "generated tokens per question, retrieved blocks excluded",
}

# Extra glossary entries for names that are not registered answer/retrieval metrics (the registry,
# harness.metrics.registry.METRICS, describes the rest).
EXTRA_GLOSSARY: dict[str, tuple[str, str]] = {
    "judge@<model>:<hash>": (
        "1 if the LLM judge (model, versioned prompt hash) accepts the prediction, else 0; verdicts "
        "cached in the judgements table",
        "TIRESRAG-R1 'LLM-as-judge' (GPT-4o, Fig. 13), When-to-Search 'Acc', R1-Searcher 'LLM-as-Judge'",
    ),
    "em_f1_mean": (
        "the mean of EM and F1 (both fractions)",
        "an 'Avg.' over EM and F1 columns",
    ),
    "em_f1_squad_mean": (
        "the mean of EM and f1_squad (both fractions)",
        "R-Search's 'Avg.' columns (its F1 has no yes/no rule)",
    ),
    "n_retrievals": (
        "search calls per question (a count, not a fraction)",
        "TIRESRAG-R1 Table 5 'retrieval steps'; harness run 'retrievals'",
    ),
    "thinking_tokens": (
        "generated tokens per question, retrieved blocks excluded (a count)",
        "TIRESRAG-R1 Table 5 'thinking length'",
    ),
    "answered": (
        "share of questions with an extracted answer (extraction status ok or multiple_answers)",
        "harness run 'answered'",
    ),
    "valid format": (
        "share of questions whose every generation parsed as a search or an answer (no invalid "
        "action, no empty query)",
        "Search-R1 'valid action' (its correction message follows an invalid one)",
    ),
}


def dataset_label(dataset: str) -> str:
    return DATASET_LABELS.get(dataset, dataset)


def is_fraction_metric(metric: str) -> bool:
    """Whether ``metric`` is a fraction in [0, 1] (shown in %); counts such as ``n_retrievals``
    are not and are never multiplied by 100."""
    return metric not in COUNT_METRICS


def find_metric(name: str, known: list[str]) -> str | None:
    """The metric of ``known`` that ``name`` names, case-insensitively, by id or by label
    (``EM``, ``Em``, ``cover-EM`` all work); None when none does."""
    low = name.strip().lower()
    for m in known:
        if low in (m.lower(), metric_label(m).lower()):
            return m
    return None


def metric_label(metric: str) -> str:
    if metric in METRIC_LABELS:
        return METRIC_LABELS[metric]
    if metric.startswith("retrieval_recall@"):
        return f"recall@{metric.split('@', 1)[1]} (first search)"
    if metric.startswith("judge@"):
        return f"judge ({metric.removeprefix('judge@')})"
    return metric


def order_metrics(metrics: list[str], primary: str | None = None) -> list[str]:
    """The protocol's ``primary`` metric first (by its stored name), then answer metrics (EM, F1,
    cover-EM, ...), then judge metrics, then the rest by name."""

    def rank(m: str) -> tuple[int, int, str]:
        if m == primary:
            return (-1, 0, m)
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


# The reported-vs-reproduced table (long format; the app pivots it per paper table). Values keep
# the metric's unit (``unit``: "fraction" for fractions, "count" for counts such as n_retrievals).
REPORTED_COLUMNS: tuple[Column, ...] = (
    Column(key="paper", label="paper", kind="text", filter="multiselect"),
    Column(key="setting", label="table", kind="text", help="paper table and variant"),
    Column(key="method", label="method", kind="text", filter="multiselect"),
    Column(key="model", label="model (paper)", kind="text", filter="multiselect"),
    Column(key="dataset", label="dataset", kind="text", filter="multiselect"),
    Column(key="metric", label="metric", kind="text", filter="multiselect"),
    Column(
        key="unit",
        label="unit",
        kind="text",
        help="fraction: a value in [0, 1] (tables show it in %); count: as printed",
    ),
    Column(key="reported", label="reported", kind="number", help="the paper's number (in its unit)"),
    Column(key="measured", label="ours", kind="number", help="this harness, same method, dataset, metric"),
    Column(key="measured_lo", label="ours 95% lo", kind="number"),
    Column(key="measured_hi", label="ours 95% hi", kind="number"),
    Column(
        key="diff",
        label="ours - reported",
        kind="number",
        help="only when like with like: the same model and, for an average, the same datasets",
    ),
    Column(
        key="agreement",
        label="agreement",
        kind="text",
        help="agrees (our 95% interval within ±5 points of the paper's), differs (the paper's number "
        "outside our interval) or inconclusive; only where comparable",
    ),
    Column(
        key="power",
        label="power",
        kind="number",
        help="chance of 'agrees' were our true value the paper's, at this interval's width",
    ),
    Column(key="n", label="n", kind="count", help="questions behind our number"),
    Column(key="measured_model", label="model (ours)", kind="text"),
    Column(key="coverage", label="our coverage", kind="text", help="datasets behind our average"),
    Column(key="differs", label="differs", kind="text", help="model, coverage, corpus, retriever, top-k"),
    Column(key="source", label="source", kind="text", help="citation of the reported number"),
    Column(key="note", label="note", kind="text"),
)

# The cost and efficiency table.
COST_COLUMNS: tuple[Column, ...] = (
    Column(key="method", label="method", kind="text", filter="multiselect"),
    Column(key="label", label="label", kind="text"),
    Column(key="model", label="model", kind="text", filter="multiselect"),
    Column(key="accuracy", label="accuracy", kind="score", help="the chosen metric"),
    Column(key="accuracy_lo", label="accuracy 95% lo", kind="interval"),
    Column(key="accuracy_hi", label="accuracy 95% hi", kind="interval"),
    Column(key="answered", label="answered %", kind="score", help="questions with an extracted answer"),
    Column(
        key="retrievals",
        label="retrievals / q",
        kind="number",
        help="mean retrieval calls per question",
        fmt="%.2f",
    ),
    Column(
        key="tokens",
        label="tokens / q",
        kind="number",
        help="mean prompt + completion tokens per question",
        fmt="%.1f",
    ),
    Column(key="prompt_tokens", label="prompt tokens / q", kind="number", fmt="%.1f"),
    Column(key="completion_tokens", label="completion tokens / q", kind="number", fmt="%.1f"),
    Column(
        key="tokens_per_correct",
        label="tokens / correct",
        kind="number",
        help="all tokens of the row over its correct answers (the chosen metric's sum); empty when none is correct",
        fmt="%.0f",
    ),
    Column(key="llm_calls", label="LLM calls / q", kind="number", fmt="%.2f"),
    Column(key="seconds", label="s / q", kind="number", help="mean wall time per question", fmt="%.2f"),
    Column(
        key="usd",
        label="$ / q",
        kind="number",
        help="mean cost per question in USD (harness.results.cost prices); empty when any question's cost is unknown",
        fmt="$%.6f",
    ),
    Column(
        key="usd_per_correct",
        label="$ / correct",
        kind="number",
        help="total USD over correct answers; empty when a cost is unknown or none is correct",
        fmt="$%.6f",
    ),
    Column(key="n", label="n", kind="count"),
    Column(
        key="coverage",
        label="coverage",
        kind="text",
        help="datasets the row has of the view's; a row missing some has no all-datasets accuracy",
    ),
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
