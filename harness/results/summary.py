"""The run summary: ``harness run``'s table of each finished run, in one place.

Per method x dataset: the scores (the protocol's primary metric with its 95% interval, as the
leaderboard computes it), the cost, and for a method over several datasets an :data:`AVG` row;
for readers that may answer from substitute references, how many questions did (see
:func:`reference_sources`). Every number comes from the store (:mod:`harness.results.queries`,
:mod:`harness.results.cost`); the intervals are :mod:`harness.metrics.bootstrap`'s, the same
functions as the leaderboard's cells.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from harness.results import queries
from harness.results.store import Store

if TYPE_CHECKING:
    import pandas as pd

AVG = "Avg."  # the dataset label of a method's average row in run_summary


def summary(store: Store, run_ids: Sequence[str], primary: str = "em") -> pd.DataFrame:
    """Per method x dataset: n (scored samples), errors (samples whose generation failed: never
    scored, not in n or any mean), ``primary`` (the mean of the protocol's primary metric, by its
    stored name: :attr:`harness.eval.scoring.RunScoring.primary`), EM, F1, cover-EM, mean retrievals /
    LLM calls / tokens, seconds, and cost per question / per correct answer (USD; NaN where a price
    is unknown, see harness.results.cost)."""
    from harness.results.cost import cost_summary

    df = queries.run_metrics(store, run_ids, primary)
    costs = cost_summary(store, run_ids)[["method", "dataset", "cost_usd_per_q", "usd_per_correct"]]
    return df.merge(costs, on=["method", "dataset"], how="left")


def run_summary(
    store: Store, run_ids: Sequence[str], primary: str = "em", *, references: bool = False
) -> pd.DataFrame:
    """:func:`summary` with the primary metric's 95% interval per row (``primary_lo`` /
    ``primary_hi``: Wilson for 0/1 values, else the percentile bootstrap, as the leaderboard) and,
    for a method over several datasets, an ``Avg.`` row: the unweighted mean of its datasets
    (stratified Agresti-Coull or pooled bootstrap interval, :func:`harness.metrics.bootstrap.
    macro_aggregate`), n and errors summed, the other means weighted by n. Seconds per question are
    the method's (all its questions) and stand on its last row only.

    ``references``: add :func:`reference_sources`' ``own_refs`` / ``substitute_refs`` columns (the
    ``Avg.`` row holds the method's sums)."""
    import numpy as np
    import pandas as pd

    from harness.metrics.bootstrap import dataset_aggregate, is_binary, macro_aggregate

    df = summary(store, run_ids, primary)
    methods = {rid: run.method for rid in run_ids if (run := store.get_run(rid)) is not None}
    vals = queries.metric_values(store, run_ids, [primary])
    vals["method"] = vals["run_id"].map(methods)
    binary = is_binary(vals["value"].to_numpy(dtype=np.float64))
    per = {k: g["value"].to_numpy(dtype=np.float64) for k, g in vals.groupby(["method", "dataset"])}
    out = []
    weighted = ["retrievals", "llm_calls", "tokens", "answered", "seconds_per_q", "cost_usd_per_q"]
    for method, g in df.groupby("method", sort=False):
        rows = g.to_dict("records")
        for r in rows:
            agg = dataset_aggregate(per.get((method, r["dataset"]), np.array([])), binary=binary)
            r["primary_lo"], r["primary_hi"] = agg.lo, agg.hi
        n = float(g["n"].sum())
        method_spq = float((g["seconds_per_q"] * g["n"]).sum() / n) if n else float("nan")
        if len(rows) > 1:
            agg = macro_aggregate(
                [per.get((method, r["dataset"]), np.array([])) for r in rows], binary=binary
            )
            avg = {"method": method, "dataset": AVG, "n": int(n), "errors": int(g["errors"].sum())}
            avg.update({k: float(g[k].mean()) for k in ("em", "f1", "cover_em") if k in g})
            avg.update({"primary": agg.mean, "primary_lo": agg.lo, "primary_hi": agg.hi})
            avg.update(
                {k: float((g[k] * g["n"]).sum() / n) if n else float("nan") for k in weighted if k in g}
            )
            avg["usd_per_correct"] = float("nan")
            rows.append(avg)
        for r in rows:
            r["seconds_per_q"] = float("nan")
        rows[-1]["seconds_per_q"] = method_spq
        out += rows
    df = pd.DataFrame(out, columns=[*df.columns, "primary_lo", "primary_hi"])
    return _with_references(df, reference_sources(store, run_ids)) if references else df


def _with_references(df: pd.DataFrame, refs: pd.DataFrame) -> pd.DataFrame:
    """``df`` with the own / substitute reference counts of ``refs``; an ``Avg.`` row gets the
    method's sums."""
    df = df.merge(refs, on=["method", "dataset"], how="left")
    avg = df["dataset"] == AVG
    for col in ("own_refs", "substitute_refs") if avg.any() else ():
        sums = df[~avg].groupby("method")[col].sum()
        df[col] = df[col].where(~avg, df["method"].map(sums))
    return df


def reference_sources(store: Store, run_ids: Sequence[str]) -> pd.DataFrame:
    """Per method x dataset: how many questions were answered from their own paragraphs
    (``own_refs``) and how many from a substitute (``substitute_refs``), from the trajectories'
    meta under each method's ``Method.reference_source_key``; methods that record none count 0 and 0."""
    import pandas as pd

    from harness.method import Method
    from harness.methods_registry import METHODS

    by_key: dict[str, list[str]] = {}
    for rid in run_ids:
        run = store.get_run(rid)
        cls = METHODS.get(run.method) if run is not None and run.method in METHODS else Method
        by_key.setdefault(cls.reference_source_key, []).append(rid)
    if len(by_key) <= 1:
        key = next(iter(by_key), Method.reference_source_key)
        return queries.reference_sources(store, run_ids, key)
    frames = [queries.reference_sources(store, ids, key) for key, ids in by_key.items()]
    return pd.concat(frames, ignore_index=True).sort_values(["method", "dataset"], ignore_index=True)


def prefill_lines(store: Store, run_ids: Sequence[str]) -> list[str]:
    """Per method of ``run_ids`` whose backend reported its prefill: its prompt tokens, the tokens
    prefilled and the share its prefix cache saved."""
    out = []
    for row in queries.prefill_summary(store, run_ids).itertuples(index=False):
        saved = 1 - row.prefill_tokens / row.prompt_tokens if row.prompt_tokens else 0.0
        out.append(
            f"{row.method}: {int(row.prompt_tokens)} prompt tokens, {int(row.prefill_tokens)} prefilled "
            f"({saved:.0%} saved by prefix reuse)"
        )
    return out
