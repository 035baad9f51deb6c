"""The cost page: accuracy against retrievals, tokens and dollars, and the Pareto front."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from leaderboards.schema import COST_COLUMNS, order_datasets
from leaderboards.views.common import PARETO_COSTS, ROW_KEY, is_binary, macro_aggregate, nan_aggregate


# -- cost and efficiency ---------------------------------------------------------------------------
def build_cost(
    values: pd.DataFrame, costs: pd.DataFrame, *, metric: str, dataset: str | None
) -> pd.DataFrame:
    """Accuracy against mean retrievals, tokens and USD per question, per (method, model).

    ``dataset=None`` uses every dataset of the protocol: accuracy is the unweighted mean over
    datasets (rows missing a dataset get NaN and say so in ``coverage``), costs are means over all
    questions. A USD mean is NaN unless every question's cost is known (as the store's cost views
    rule). ``tokens_per_correct`` and ``usd_per_correct`` divide the row's totals by the sum of the
    metric's values (its correct answers); NaN when that is 0. Accuracy intervals as the leaderboard's.
    """
    v = values[values["metric"] == metric]
    if dataset is not None:
        v = v[v["dataset"] == dataset]
        costs = costs[costs["dataset"] == dataset]
    binary = is_binary(v["value"].to_numpy(dtype=np.float64))
    datasets = sorted(set(v["dataset"]))
    rows = []
    for (method, model), g in v.groupby(ROW_KEY, sort=True):
        per = {d: gd["value"].to_numpy(dtype=np.float64) for d, gd in g.groupby("dataset")}
        full = all(d in per for d in datasets)
        agg = macro_aggregate([per[d] for d in datasets], binary=binary) if full else nan_aggregate()
        c = costs[(costs["method"] == method) & (costs["model"] == model)]
        correct = float(g["value"].sum())
        usd_known = len(c) and c["usd"].notna().all()
        tokens_known = len(c) and c["tokens"].notna().all()
        rows.append(
            {
                "method": method,
                "label": ", ".join(sorted({str(x) for x in g["label"] if x})),
                "model": model,
                "accuracy": agg.mean,
                "accuracy_lo": agg.lo,
                "accuracy_hi": agg.hi,
                "answered": float(c["answered"].mean()) if "answered" in c and len(c) else math.nan,
                "retrievals": float(c["retrievals"].mean()),
                "tokens": float(c["tokens"].mean()),
                "prompt_tokens": float(c["prompt_tokens"].mean()) if "prompt_tokens" in c else math.nan,
                "completion_tokens": float(c["completion_tokens"].mean())
                if "completion_tokens" in c
                else math.nan,
                "tokens_per_correct": float(c["tokens"].sum()) / correct
                if tokens_known and correct
                else math.nan,
                "llm_calls": float(c["llm_calls"].mean()),
                "seconds": float(c["seconds"].mean()),
                "usd": float(c["usd"].mean()) if usd_known else math.nan,
                "usd_per_correct": float(c["usd"].sum()) / correct if usd_known and correct else math.nan,
                "n": int(len(c)),
                "coverage": f"{len(per)} of {len(datasets)} datasets" + ("" if full else " (partial)"),
            }
        )
    df = pd.DataFrame(rows, columns=[c.key for c in COST_COLUMNS if not c.key.startswith("pareto_")])
    for cost in PARETO_COSTS:
        front = pareto_front(df["accuracy"].to_numpy(float), df[cost].to_numpy(float))
        df[f"pareto_{cost}"] = ["yes" if f else "" for f in front]
    return df[[c.key for c in COST_COLUMNS]]


OUTLIER_RATIO = 3.0
"""A batch whose seconds per question exceed this multiple of the row's median is flagged ..."""
OUTLIER_EXCESS_S = 60.0
"""... when, besides, it took at least this many seconds longer in all than at the median (a
first batch that warms the model up costs seconds; a pause costs minutes)."""

SECONDS_SOURCE = (
    "seconds per question are the stored `samples.latency_s`: the wall time of the batch of questions "
    "solved together (`harness.eval.runner`, around `method.solve`) divided by the batch's size; `runs.seconds` "
    "is the run's wall time. Neither excludes time the process was paused or stalled, so a paused batch "
    "cannot be taken out exactly"
)
"""What the store records about time, in the page's words (the cost page shows it)."""


def timing_table(costs: pd.DataFrame, *, dataset: str | None) -> pd.DataFrame:
    """Seconds per question per (method, model), from :func:`queries.latest_costs` rows.

    The store keeps one time per batch (every question of a batch has the same ``seconds``: the
    batch's wall time over its size, :data:`SECONDS_SOURCE`), so a batch is a run's group of equal
    ``seconds``. ``seconds`` is the mean over questions (what was measured, pauses included);
    ``seconds_median`` the median over questions; a batch above :data:`OUTLIER_RATIO` times that
    median, and at least :data:`OUTLIER_EXCESS_S` longer in all, is an outlier (a pause or a
    stall is the likely cause; the store cannot tell), and
    ``seconds_typical`` is the mean without outlier batches (equal to ``seconds`` when there are
    none). ``timing`` says which batches were flagged, ``""`` when none; ``flagged`` says it in
    short for a table cell (``"1 batch, 8 q"``)."""
    c = costs if dataset is None else costs[costs["dataset"] == dataset]
    rows = []
    for (method, model), g in c.groupby(["method", "model"], sort=True):
        secs = g["seconds"].to_numpy(dtype=np.float64)
        med = float(np.median(secs)) if len(secs) else math.nan
        batches = g.groupby(["run_id", "seconds"]).size()
        out = [
            (float(sec), int(n))
            for (_, sec), n in batches.items()
            if sec > OUTLIER_RATIO * med and (sec - med) * n >= OUTLIER_EXCESS_S
        ]
        flagged = {sec for sec, _ in out}
        keep = np.array([x for x in secs if x not in flagged]) if out else secs
        note = short = ""
        if out:
            worst = max(sec for sec, _ in out)
            nq = sum(n for _, n in out)
            batches = f"{len(out)} batch{'es' if len(out) > 1 else ''}"
            note = (
                f"{batches} ({nq} q) at up to {worst:.1f} s/q, "
                f"over {OUTLIER_RATIO:g}× the median {med:.1f}: paused or stalled? (the mean includes it)"
            )
            short = f"{batches}, {nq} q"
        rows.append(
            {
                "method": method,
                "model": model,
                "seconds": float(secs.mean()) if len(secs) else math.nan,
                "seconds_median": med,
                "seconds_typical": float(keep.mean()) if len(keep) else math.nan,
                "timing": note,
                "flagged": short,
            }
        )
    return pd.DataFrame(
        rows,
        columns=["method", "model", "seconds", "seconds_median", "seconds_typical", "timing", "flagged"],
    )


def pareto_text(table: pd.DataFrame) -> list[str]:
    """Per row of :func:`build_cost`'s table, the costs on whose Pareto front it lies
    (``"retrievals, tokens"``; ``""`` for none): the three ``pareto_*`` columns as one cell, so
    the cost page's table fits its frame."""
    return [
        ", ".join(c for c in PARETO_COSTS if row[f"pareto_{c}"] == "yes")
        for row in table[[f"pareto_{c}" for c in PARETO_COSTS]].to_dict("records")
    ]


SCORE_COST_COLUMNS = ("dataset", "method", "model", "label", "score", "seconds", "tokens", "n")
"""The columns of :func:`score_cost_points`."""


def score_cost_points(values: pd.DataFrame, costs: pd.DataFrame, *, metric: str) -> pd.DataFrame:
    """One point per (dataset, method, model) for the score-against-cost plot: ``score`` (the
    metric's mean over the row's questions, a fraction), ``seconds`` and ``tokens`` (means per
    question) and ``n`` (questions), from the same per-question values and costs as the cost
    tables (:func:`build_cost` with that dataset). Rows without a score are left out; datasets in
    the protocol's order (:func:`leaderboards.schema.order_datasets`)."""
    parts = []
    for d in order_datasets(sorted(set(values.loc[values["metric"] == metric, "dataset"]))):
        t = build_cost(values, costs, metric=metric, dataset=d)
        parts.append(t.assign(dataset=d, score=t["accuracy"]))
    if not parts:
        return pd.DataFrame(columns=list(SCORE_COST_COLUMNS))
    out = pd.concat(parts, ignore_index=True).dropna(subset=["score"])
    return out[list(SCORE_COST_COLUMNS)].reset_index(drop=True)


def usd_text(usd: float) -> str:
    """A dollar amount for reading: ``free (local)`` for 0 (an in-process model: tokens not billed,
    no GPU price), ``unknown (no price)`` for NaN, else two significant digits and at least two
    decimals (``$0.00042``, ``$0.012``, ``$1.50``), never ``$0.000000``."""
    if usd is None or math.isnan(usd):
        return "unknown (no price)"
    if usd == 0:
        return "free (local)"
    decimals = max(2, 1 - math.floor(math.log10(abs(usd))))
    return f"${usd:,.{decimals}f}"


def all_costs_zero_or_unknown(table: pd.DataFrame) -> bool:
    """No row has a known, non-zero dollar cost (a $ plot would show nothing)."""
    usd = table["usd"].to_numpy(float)
    return bool(np.all(np.isnan(usd) | (usd == 0)))


def pareto_front(accuracy: np.ndarray, cost: np.ndarray) -> list[bool]:
    """True where no other point is at least as accurate and at most as costly, and better in one."""
    out = []
    for i in range(len(accuracy)):
        if math.isnan(accuracy[i]) or math.isnan(cost[i]):
            out.append(False)
            continue
        dominated = any(
            j != i
            and not math.isnan(accuracy[j])
            and not math.isnan(cost[j])
            and accuracy[j] >= accuracy[i]
            and cost[j] <= cost[i]
            and (accuracy[j] > accuracy[i] or cost[j] < cost[i])
            for j in range(len(accuracy))
        )
        out.append(not dominated)
    return out


__all__ = [
    "OUTLIER_EXCESS_S",
    "OUTLIER_RATIO",
    "SECONDS_SOURCE",
    "all_costs_zero_or_unknown",
    "SCORE_COST_COLUMNS",
    "build_cost",
    "pareto_front",
    "pareto_text",
    "score_cost_points",
    "timing_table",
    "usd_text",
]
