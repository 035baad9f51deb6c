"""The leaderboard's views as data: the tables the app shows and ``harness export`` writes.

Each ``build_*`` function turns query results (``leaderboards.queries``) into a typed view with
a numeric frame whose columns follow ``leaderboards.schema``. Nothing here touches Streamlit.

Intervals are 95% percentile-bootstrap intervals over per-question values
(:func:`harness.metrics.bootstrap.bootstrap_ci`, seed 0, so they are reproducible). An average
column is the unweighted mean of its datasets' means (as the papers' "Avg."); its interval
resamples the pooled questions with each question weighted ``N / (D * n_d)``, so that every
dataset counts equally, as in the point estimate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from harness.errors import ConfigError
from harness.metrics.bootstrap import Aggregate, bootstrap_ci
from leaderboards import queries
from leaderboards.schema import (
    COST_COLUMNS,
    LEADERBOARD_COLUMNS,
    REPORTED_COLUMNS,
    RUNS_COLUMN,
    AverageGroup,
    Column,
    averages_for,
    ci_text_column,
    interval_columns,
    metric_label,
    order_datasets,
    score_column,
)

N_RESAMPLES = 1000
PARETO_COSTS = ("retrievals", "tokens", "usd")
ROW_KEY = ["method", "model"]


def _nan_aggregate() -> Aggregate:
    return Aggregate(math.nan, math.nan, math.nan, 0)


def dataset_aggregate(values: np.ndarray, n_resamples: int = N_RESAMPLES) -> Aggregate:
    """Mean of one dataset's per-question values with its bootstrap interval."""
    return bootstrap_ci(values, n_resamples=n_resamples)


def macro_aggregate(per_dataset: list[np.ndarray], n_resamples: int = N_RESAMPLES) -> Aggregate:
    """Unweighted mean of dataset means, with a bootstrap interval over the weighted pooled questions."""
    sizes = [len(v) for v in per_dataset]
    if not per_dataset or min(sizes) == 0:
        return _nan_aggregate()
    total, d = sum(sizes), len(per_dataset)
    pooled = np.concatenate([v * (total / (d * len(v))) for v in per_dataset])
    agg = bootstrap_ci(pooled, n_resamples=n_resamples)
    exact = float(np.mean([v.mean() for v in per_dataset]))  # the same number without float drift
    return Aggregate(exact, agg.lo, agg.hi, total)


# -- leaderboard ---------------------------------------------------------------------------------
@dataclass
class Leaderboard:
    """Methods x datasets for one protocol and one metric."""

    protocol_id: str
    protocol_name: str
    metric: str
    datasets: list[str]
    averages: list[tuple[AverageGroup, tuple[str, ...]]]
    frame: pd.DataFrame  # fixed columns, then per score key: key, key_lo, key_hi
    cells: dict[tuple[str, str, str], Aggregate] = field(default_factory=dict)  # (method, model, key)

    @property
    def score_keys(self) -> list[str]:
        return [*(g.key for g, _ in self.averages), *self.datasets]

    def score_columns(self) -> list[Column]:
        """Averages first (the first is the default ranking), then the datasets."""
        cols = [
            score_column(g.key, g.label, f"unweighted mean over {', '.join(m)}") for g, m in self.averages
        ]
        cols += [score_column(d, d, f"{metric_label(self.metric)} on {d}") for d in self.datasets]
        return cols

    def columns(self, *, ci: str) -> list[Column]:
        """The table's columns in order. ``ci``: ``"text"`` (one ``[lo, hi]`` column after each
        score, for display), ``"bounds"`` (numeric ``_lo``/``_hi`` columns, for files) or ``"none"``."""
        out = list(LEADERBOARD_COLUMNS[:3])
        for c in self.score_columns():
            out.append(c)
            if ci == "text":
                out.append(ci_text_column(c.key, c.label))
            elif ci == "bounds":
                out.extend(interval_columns(c.key, c.label))
        out.extend([*LEADERBOARD_COLUMNS[3:], RUNS_COLUMN])
        return out

    def display_frame(self, *, ci: str = "text") -> pd.DataFrame:
        df = self.frame.copy()
        for key in self.score_keys:
            if ci == "text":
                df[f"{key}_ci"] = [  # in percent, as the scores are shown
                    "" if math.isnan(lo) else f"[{100 * lo:.1f}, {100 * hi:.1f}]"
                    for lo, hi in zip(df[f"{key}_lo"], df[f"{key}_hi"], strict=True)
                ]
        return df[[c.key for c in self.columns(ci=ci)]]

    def coverage(self, key: str) -> str:
        """Which datasets a score column covers (an average names its members)."""
        for g, members in self.averages:
            if g.key == key:
                total = len(g.datasets) if g.datasets else len(members)
                return f"{', '.join(members)} ({len(members)} of {total})"
        return key


def build_leaderboard(
    values: pd.DataFrame,
    *,
    protocol_id: str,
    protocol_name: str,
    metric: str,
    models: list[str] | None = None,
    methods: list[str] | None = None,
    n_resamples: int = N_RESAMPLES,
) -> Leaderboard:
    """The leaderboard of ``metric`` from :func:`queries.latest_values` rows of one protocol."""
    if not values.empty and set(values["protocol_id"]) - {protocol_id}:
        raise ValueError(f"rows of several protocols given for leaderboard of {protocol_id}")
    v = values[values["metric"] == metric]
    if models is not None:
        v = v[v["model"].isin(models)]
    if methods is not None:
        v = v[v["method"].isin(methods)]
    datasets = order_datasets(sorted(set(v["dataset"])))
    averages = averages_for(datasets)
    rows, cells = [], {}
    for (method, model), g in v.groupby(ROW_KEY, sort=True):
        per = {d: gd["value"].to_numpy(dtype=np.float64) for d, gd in g.groupby("dataset")}
        row: dict[str, object] = {
            "method": method,
            "model": model,
            "label": ", ".join(sorted({str(x) for x in g["label"] if x})),
            "n": int(len(g)),
            "runs": ", ".join(sorted(set(g["run_id"]))),
        }
        for d in datasets:
            agg = dataset_aggregate(per[d], n_resamples) if d in per else _nan_aggregate()
            cells[(method, model, d)] = agg
            row.update({d: agg.mean, f"{d}_lo": agg.lo, f"{d}_hi": agg.hi})
        for grp, members in averages:
            have = all(d in per for d in members)
            agg = macro_aggregate([per[d] for d in members], n_resamples) if have else _nan_aggregate()
            cells[(method, model, grp.key)] = agg
            row.update({grp.key: agg.mean, f"{grp.key}_lo": agg.lo, f"{grp.key}_hi": agg.hi})
        rows.append(row)
    keys = [*(g.key for g, _ in averages), *datasets]
    cols = ["method", "model", "label", "n", "runs"] + [f"{k}{s}" for k in keys for s in ("", "_lo", "_hi")]
    frame = pd.DataFrame(rows, columns=cols)
    sort_key = keys[0] if keys else None  # avg all when there are several datasets
    if sort_key is not None and len(frame):
        frame = frame.sort_values([sort_key, "method", "model"], ascending=[False, True, True])
    return Leaderboard(
        protocol_id=protocol_id,
        protocol_name=protocol_name,
        metric=metric,
        datasets=datasets,
        averages=averages,
        frame=frame.reset_index(drop=True),
        cells=cells,
    )


def leaderboard_from_db(store, protocol_id: str, metric: str, **kw: object) -> Leaderboard:
    """Query and build in one step (``harness export`` and the app share this)."""
    name = protocol_name(store, protocol_id)
    values = queries.latest_values(store, protocol_id, [metric])
    if values.empty:
        known = ", ".join(queries.metrics_present(store, protocol_id)) or "none"
        raise ConfigError(
            f"no values of metric {metric!r} under protocol {protocol_id}; metrics stored: {known}"
        )
    return build_leaderboard(values, protocol_id=protocol_id, protocol_name=name, metric=metric, **kw)  # type: ignore[arg-type]


def protocol_name(store, protocol_id: str) -> str:
    df = queries.protocols(store)
    match = df[df["protocol_id"] == protocol_id]
    if match.empty:
        known = ", ".join(f"{r.protocol_name} ({r.protocol_id})" for r in df.itertuples()) or "none"
        raise ConfigError(
            f"no evaluation runs under protocol {protocol_id!r} in {store.path}; protocols: {known}"
        )
    return str(match.iloc[0]["protocol_name"])


def choose_protocol(store, protocol: str | None) -> str:
    """The protocol id to show: the one given (an id or a unique name), or the only one stored."""
    df = queries.protocols(store)
    if df.empty:
        raise ConfigError(f"{store.path}: no scored evaluation runs yet (run `harness run` first)")
    listing = "; ".join(f"{r.protocol_name} ({r.protocol_id})" for r in df.itertuples())
    if protocol is None:
        if len(df) > 1:
            raise ConfigError(
                f"{store.path} holds runs of {len(df)} protocols, which are never mixed in one table; "
                f"choose one with --protocol: {listing}"
            )
        return str(df.iloc[0]["protocol_id"])
    if protocol in set(df["protocol_id"]):
        return protocol
    by_name = df[df["protocol_name"] == protocol]
    if len(by_name) == 1:
        return str(by_name.iloc[0]["protocol_id"])
    if len(by_name) > 1:
        raise ConfigError(
            f"protocol name {protocol!r} has several ids in {store.path}; give the id: {listing}"
        )
    raise ConfigError(f"no protocol {protocol!r} in {store.path}; protocols: {listing}")


# -- reported vs reproduced ------------------------------------------------------------------------
def build_reported(
    reported: pd.DataFrame, boards: dict[str, Leaderboard], *, match_model: bool = True
) -> pd.DataFrame:
    """Each published number next to the measured one for the same method, model, dataset and metric.

    ``boards`` maps metric name -> leaderboard of the chosen protocol. A reported average
    (``avg``, ``avg_multihop``, ``avg_singlehop``) is matched to the same average column; its
    ``coverage`` says which datasets the measured average has. ``em_f1_mean`` (R-Search) is the
    mean of the measured EM and F1. With ``match_model=False`` a reported row is matched to every
    measured model of the method (one output row each).
    """
    key_of = {g.reported_name: g.key for b in boards.values() for g, _ in b.averages}
    out = []
    for r in reported.itertuples(index=False):
        key = key_of.get(r.dataset, r.dataset)
        matches = _measured(boards, r.method, r.model, key, r.metric, match_model)
        if not matches:
            matches = [("", _nan_aggregate(), "")]
        for model, agg, coverage in matches:
            out.append(
                {
                    "paper": r.paper,
                    "setting": r.setting,
                    "method": r.method,
                    "model": r.model,
                    "dataset": r.dataset,
                    "metric": r.metric,
                    "reported": r.value,
                    "measured": agg.mean,
                    "measured_lo": agg.lo,
                    "measured_hi": agg.hi,
                    "diff": agg.mean - r.value,
                    "n": agg.n,
                    "measured_model": model,
                    "coverage": coverage,
                    "source": r.source,
                    "note": r.note,
                }
            )
    return pd.DataFrame(out, columns=[c.key for c in REPORTED_COLUMNS])


def _measured(
    boards: dict[str, Leaderboard], method: str, model: str, key: str, metric: str, match_model: bool
) -> list[tuple[str, Aggregate, str]]:
    parts = ("em", "f1") if metric == "em_f1_mean" else (metric,)
    if any(p not in boards for p in parts):
        return []
    first = boards[parts[0]]
    found = []
    for m in sorted({mm for (me, mm, _k) in first.cells if me == method}):
        if match_model and m != model:
            continue
        aggs = [boards[p].cells.get((method, m, key)) for p in parts]
        if any(a is None or math.isnan(a.mean) for a in aggs):
            continue
        if len(aggs) == 1:
            agg = aggs[0]
        else:  # mean of EM and F1: no interval
            agg = Aggregate(float(np.mean([a.mean for a in aggs])), math.nan, math.nan, aggs[0].n)  # type: ignore[union-attr]
        coverage = first.coverage(key) if key not in first.datasets else ""
        found.append((m, agg, coverage))  # type: ignore[arg-type]
    return found


# -- cost and efficiency ---------------------------------------------------------------------------
def build_cost(
    values: pd.DataFrame, costs: pd.DataFrame, *, metric: str, dataset: str | None
) -> pd.DataFrame:
    """Accuracy against mean retrievals, tokens and USD per question, per (method, model).

    ``dataset=None`` uses every dataset of the protocol: accuracy is the unweighted mean over
    datasets (rows missing a dataset get NaN), costs are means over all questions. A USD mean is
    NaN unless every question's cost is known (as the store's cost views rule).
    """
    v = values[values["metric"] == metric]
    if dataset is not None:
        v = v[v["dataset"] == dataset]
        costs = costs[costs["dataset"] == dataset]
    datasets = sorted(set(v["dataset"]))
    rows = []
    for (method, model), g in v.groupby(ROW_KEY, sort=True):
        per = {d: gd["value"].to_numpy(dtype=np.float64) for d, gd in g.groupby("dataset")}
        acc = (
            float(np.mean([per[d].mean() for d in datasets])) if all(d in per for d in datasets) else math.nan
        )
        c = costs[(costs["method"] == method) & (costs["model"] == model)]
        rows.append(
            {
                "method": method,
                "label": ", ".join(sorted({str(x) for x in g["label"] if x})),
                "model": model,
                "accuracy": acc,
                "retrievals": float(c["retrievals"].mean()),
                "tokens": float(c["tokens"].mean()),
                "llm_calls": float(c["llm_calls"].mean()),
                "seconds": float(c["seconds"].mean()),
                "usd": float(c["usd"].mean()) if len(c) and c["usd"].notna().all() else math.nan,
                "n": int(len(c)),
            }
        )
    df = pd.DataFrame(rows, columns=[c.key for c in COST_COLUMNS if not c.key.startswith("pareto_")])
    for cost in PARETO_COSTS:
        front = pareto_front(df["accuracy"].to_numpy(float), df[cost].to_numpy(float))
        df[f"pareto_{cost}"] = ["yes" if f else "" for f in front]
    return df[[c.key for c in COST_COLUMNS]]


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


# -- trajectories ----------------------------------------------------------------------------------
def question_table(
    questions: pd.DataFrame,
    values_a: pd.DataFrame,
    values_b: pd.DataFrame | None = None,
    questions_b: pd.DataFrame | None = None,
    *,
    only_disagreements: bool = False,
) -> pd.DataFrame:
    """The questions of run A on one dataset with A's metric value and, when given, B's.

    A disagreement is a question both runs answered whose metric values differ.
    """
    df = questions.merge(values_a.rename(columns={"value": "a"}), on="sample_id", how="left")
    if values_b is not None and questions_b is not None:
        b = questions_b[["sample_id", "prediction"]].rename(columns={"prediction": "prediction_b"})
        df = df.merge(b, on="sample_id", how="left")
        df = df.merge(values_b.rename(columns={"value": "b"}), on="sample_id", how="left")
        df["disagree"] = df["a"].notna() & df["b"].notna() & (df["a"] != df["b"])
        if only_disagreements:
            df = df[df["disagree"]]
    return df.reset_index(drop=True)


def reported_boards(store, protocol_id: str, reported: pd.DataFrame) -> dict[str, Leaderboard]:
    """One leaderboard per metric the reported numbers use (that the protocol has values of)."""
    present = set(queries.metrics_present(store, protocol_id))
    wanted = set(reported["metric"]) if len(reported) else set()
    if "em_f1_mean" in wanted:
        wanted |= {"em", "f1"}
    name = protocol_name(store, protocol_id)
    metrics = sorted(wanted & present)
    values = queries.latest_values(store, protocol_id, metrics)
    return {
        m: build_leaderboard(values, protocol_id=protocol_id, protocol_name=name, metric=m) for m in metrics
    }


@dataclass(frozen=True)
class PassageView:
    doc_id: str
    score: float | None
    gold: bool
    title: str | None  # None when the passage text is not available
    text: str | None


@dataclass(frozen=True)
class TurnView:
    index: int
    kind: str
    text: str
    query: str | None
    passages: list[PassageView]
    prompt_tokens: int
    completion_tokens: int
    observation_tokens: int
    stop_reason: str | None
    status: str


@dataclass(frozen=True)
class SampleView:
    run_id: str
    dataset: str
    sample_id: str
    question: str
    answers: list[str]
    prediction: str
    extraction_status: str
    error: str | None
    gold_ids: list[str]
    metrics: dict[str, float]
    turns: list[TurnView]
    judgements: pd.DataFrame


def sample_view(store, run_id: str, dataset: str, sample_id: str, passage_text=None) -> SampleView:
    """Everything stored about one question of one run; ``passage_text(doc_id) -> contents | None``
    fills passage titles and texts (e.g. from the packaged closed corpus)."""
    from harness.types import split_contents

    s = queries.sample_row(store, run_id, dataset, sample_id)
    if s.empty:
        raise ConfigError(f"run {run_id} has no sample {dataset}/{sample_id} in {store.path}")
    row = s.iloc[0]
    gold = [str(x) for x in _as_list(row["gold_ids"])]
    turns = []
    for t in queries.turn_rows(store, run_id, dataset, sample_id).itertuples(index=False):
        ids = [str(x) for x in _as_list(t.doc_ids)]
        scores = [float(x) for x in _as_list(t.doc_scores)]
        passages = []
        for i, d in enumerate(ids):
            contents = passage_text(d) if passage_text is not None else None
            title, text = split_contents(contents) if contents is not None else (None, None)
            passages.append(PassageView(d, scores[i] if i < len(scores) else None, d in gold, title, text))
        turns.append(
            TurnView(
                index=int(t.turn_index),
                kind=str(t.kind),
                text=str(t.text or ""),
                query=None if t.query is None or pd.isna(t.query) else str(t.query),
                passages=passages,
                prompt_tokens=int(t.prompt_tokens or 0),
                completion_tokens=int(t.completion_tokens or 0),
                observation_tokens=int(t.observation_tokens or 0),
                stop_reason=None if t.stop_reason is None or pd.isna(t.stop_reason) else str(t.stop_reason),
                status=str(t.status),
            )
        )
    m = queries.sample_metric_rows(store, run_id, dataset, sample_id)
    prediction = str(row["prediction"] or "")
    return SampleView(
        run_id=run_id,
        dataset=dataset,
        sample_id=sample_id,
        question=str(row["question"]),
        answers=[str(x) for x in _as_list(row["answers"])],
        prediction=prediction,
        extraction_status=str(row["extraction_status"]),
        error=None if row["error"] is None or pd.isna(row["error"]) else str(row["error"]),
        gold_ids=gold,
        metrics=dict(zip(m["metric"], m["value"].astype(float), strict=True)),
        turns=turns,
        judgements=queries.judgement_rows(
            store, str(row["question"]), [t for t in (prediction, str(row["response"] or "")) if t]
        ),
    )


def _as_list(x: object) -> list:
    if x is None:
        return []
    if isinstance(x, float) and math.isnan(x):
        return []
    return list(x)  # type: ignore[call-overload]
