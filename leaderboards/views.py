"""The leaderboard's views as data: the tables the app shows and ``harness export`` writes.

Each ``build_*`` function turns query results (``leaderboards.queries``) into a typed view with
a numeric frame whose columns follow ``leaderboards.schema``. Nothing here touches Streamlit.

Intervals (95%). A metric whose every value is 0 or 1 gets Wilson score intervals per dataset
(``scipy.stats.binomtest(...).proportion_ci(method="wilson")``): a percentile bootstrap of 0 of 3
is [0, 0], Wilson's is [0, 56.1]. An average of D such datasets gets a stratified Agresti-Coull
interval: Agresti & Coull's (1998) two added successes and two added failures, spread evenly over
the datasets (2/D of each per dataset), variances summed with weight 1/D^2, clipped to [0, 1].
Spread, the total adjustment is the single-sample one; added per dataset, it would pull the centre
so far that the interval could miss its own score (four datasets at 4 of 4: 100 with [60, 90]).
Any other metric gets the percentile
bootstrap over per-question values (:func:`harness.metrics.bootstrap.bootstrap_ci`, seed 0); an
average's bootstrap resamples the pooled questions with each question weighted ``N / (D * n_d)``,
so that every dataset counts equally, as in the point estimate. An average column is the
unweighted mean of its datasets' means (as the papers' "Avg."), and only for rows that have every
dataset of the column: averages never span different dataset sets.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from harness.data.benches import MULTIHOP, SINGLEHOP
from harness.errors import ConfigError
from harness.metrics.bootstrap import Aggregate, bootstrap_ci, wilson_ci
from leaderboards import queries
from leaderboards.schema import (
    COST_COLUMNS,
    DATASET_ORDER,
    LEADERBOARD_COLUMNS,
    LEADING_KEYS,
    REPORTED_COLUMNS,
    RUNS_COLUMN,
    AverageGroup,
    Column,
    averages_for,
    dataset_label,
    interval_columns,
    is_fraction_metric,
    metric_label,
    order_datasets,
    score_column,
)

N_RESAMPLES = 1000
Z95 = 1.959963984540054
PARETO_COSTS = ("retrievals", "tokens", "usd")
ROW_KEY = ["method", "model"]


def inline_code(text: str) -> str:
    """``text`` as one Markdown code span, rendered as text whatever it contains: the fence is one
    backtick longer than the longest backtick run inside (CommonMark), padded with a space when the
    text starts or ends with a backtick; newlines become spaces. Model output, queries and ids go
    through this, so a backtick in a prediction cannot end the span and render the rest as Markdown
    (an image link to any URL, say)."""
    text = str(text).replace("\r", " ").replace("\n", " ")
    if not text:
        return "`∅`"
    fence = "`" * (max((len(r) for r in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text[0] == "`" or text[-1] == "`" or (text[0] == " " and text[-1] == " ") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _nan_aggregate() -> Aggregate:
    return Aggregate(math.nan, math.nan, math.nan, 0)


def is_binary(values: np.ndarray) -> bool:
    """Every value is 0 or 1 (EM, cover-EM, a judge's verdict)."""
    return bool(len(values)) and bool(np.all((values == 0) | (values == 1)))


def wilson_aggregate(values: np.ndarray) -> Aggregate:
    """Mean of 0/1 values with the Wilson score 95% interval (:func:`harness.metrics.bootstrap.wilson_ci`)."""
    return wilson_ci(values)


def dataset_aggregate(
    values: np.ndarray, n_resamples: int = N_RESAMPLES, *, binary: bool = False
) -> Aggregate:
    """Mean of one dataset's per-question values with its 95% interval (Wilson when ``binary``)."""
    if binary:
        return wilson_aggregate(values)
    return bootstrap_ci(values, n_resamples=n_resamples)


def macro_aggregate(
    per_dataset: list[np.ndarray], n_resamples: int = N_RESAMPLES, *, binary: bool = False
) -> Aggregate:
    """Unweighted mean of dataset means, with its 95% interval (see the module docstring)."""
    sizes = [len(v) for v in per_dataset]
    if not per_dataset or min(sizes) == 0:
        return _nan_aggregate()
    total, d = sum(sizes), len(per_dataset)
    exact = float(np.mean([v.mean() for v in per_dataset]))  # the same number without float drift
    if binary:
        if d == 1:
            return wilson_aggregate(per_dataset[0])
        add = 2 / d  # successes and failures added per dataset (see the module docstring)
        tilde = [(v.sum() + add) / (len(v) + 2 * add) for v in per_dataset]
        var = sum(p * (1 - p) / (len(v) + 2 * add) for p, v in zip(tilde, per_dataset, strict=True)) / d**2
        centre, half = float(np.mean(tilde)), Z95 * math.sqrt(var)
        return Aggregate(exact, max(0.0, centre - half), min(1.0, centre + half), total)
    pooled = np.concatenate([v * (total / (d * len(v))) for v in per_dataset])
    agg = bootstrap_ci(pooled, n_resamples=n_resamples)
    return Aggregate(exact, agg.lo, agg.hi, total)


# -- methods and protocols as the tables describe them ----------------------------------------------
METHOD_TYPES = ("prompt baseline", "trained", "untrained policy")
UNTRAINED = "untrained policy"  # the run label of an RL method scored with its base model


def method_type(method: str, label: str, model: str = "") -> str:
    """``prompt baseline`` (not an RL method), ``untrained policy`` (an RL method run with a base
    model: labelled so by ``harness run``, or run with a packaged model, every one of which is a
    base model; runs stored before ``harness run`` labelled every preset carry no label) or
    ``trained``; ``?`` for a method not registered here."""
    from harness.llm.model_files import is_preset
    from harness.methods_registry import METHODS, get_method

    if method not in METHODS.names():
        return "?"
    if not get_method(method).trained:
        return "prompt baseline"
    return UNTRAINED if UNTRAINED in label or is_preset(model) else "trained"


def paper_link(method: str) -> str:
    """A link to the method's paper (arXiv) or code (GitHub) from its declared source; '' if none."""
    from harness.methods_registry import METHODS, get_method

    if method not in METHODS.names():
        return ""
    src = get_method(method).source
    if m := re.search(r"arXiv (\d{4}\.\d{4,5})", src):
        return f"https://arxiv.org/abs/{m.group(1)}"
    if m := re.search(r"\(([\w.-]+/[\w.-]+)[ ,)]", src):
        return f"https://github.com/{m.group(1)}"
    return ""


def uses_retrieval(method: str) -> bool:
    from harness.methods_registry import METHODS, get_method

    return method not in METHODS.names() or bool(get_method(method).uses_retrieval)


def model_size(model: str) -> str:
    """The parameter count in a model name (``smollm2-135m`` -> ``135M``, ``Qwen2.5-7B`` -> ``7B``)."""
    m = re.search(r"(?<![\w.])(\d+(?:\.\d+)?)([mb])(?![a-z])", model.lower().replace("_", "-"))
    return f"{m.group(1)}{m.group(2).upper()}" if m else ""


def retriever_text(protocol: dict) -> str:
    """The protocol's retriever in a few words (``bm25s``, ``dense e5-base-v2 Flat``)."""
    r = protocol.get("retriever") or {}
    kind = str(r.get("kind", "?"))
    enc = r.get("encoder")
    if isinstance(enc, dict):
        name = str(enc.get("name") or enc.get("model") or "").split("/")[-1]
        return f"{kind} {name} {r.get('index_type', '')}".strip()
    return kind


def corpus_text(protocol: dict) -> str:
    return str((protocol.get("corpus") or {}).get("id", "?"))


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
    binary: bool = False  # every value 0/1: Wilson intervals

    @property
    def score_keys(self) -> list[str]:
        return [*(g.key for g, _ in self.averages), *self.datasets]

    def members(self, key: str) -> tuple[str, ...]:
        """The datasets behind a score column (one for a dataset column)."""
        for g, m in self.averages:
            if g.key == key:
                return m
        return (key,)

    def n_range(self, key: str) -> tuple[int, int]:
        """Smallest and largest n over the rows that have the column."""
        ns = [a.n for (_, _, k), a in self.cells.items() if k == key and not math.isnan(a.mean)]
        return (min(ns), max(ns)) if ns else (0, 0)

    def header(self, key: str) -> str:
        """The column's header: readable name, coverage of an average, n (``avg multi-hop ·
        2/4 sets · n=8``); a range of n when rows differ."""
        lo, hi = self.n_range(key)
        n = f"n={lo}" if lo == hi else f"n={lo}–{hi}"
        for g, m in self.averages:
            if g.key == key:
                total = len(g.datasets) if g.datasets else len(m)
                return f"{g.label} · {len(m)}/{total} sets · {n}"
        return f"{dataset_label(key)} · {n}"

    def score_columns(self) -> list[Column]:
        """Averages first (the first is the default ranking), then the datasets."""
        cols = [
            score_column(g.key, g.label, f"unweighted mean over {', '.join(m)}") for g, m in self.averages
        ]
        cols += [score_column(d, d, f"{metric_label(self.metric)} on {d}") for d in self.datasets]
        return cols

    def columns(self, *, ci: str) -> list[Column]:
        """The table's columns in order. ``ci``: ``"text"`` (one ``score [lo, hi]`` text column
        per score, for display), ``"bounds"`` (numeric ``_lo``/``_hi`` columns after each score,
        for files) or ``"none"``."""
        out = [c for c in LEADERBOARD_COLUMNS if c.key in LEADING_KEYS]
        for c in self.score_columns():
            if ci == "text":
                out.append(Column(key=f"{c.key}_text", label=self.header(c.key), kind="text", help=c.help))
            else:
                out.append(c)
                if ci == "bounds":
                    out.extend(interval_columns(c.key, c.label))
        out.extend([c for c in LEADERBOARD_COLUMNS if c.key not in LEADING_KEYS])
        out.append(RUNS_COLUMN)
        return out

    def cell_text(self, key: str, row: pd.Series) -> str:
        """``score [lo, hi]`` in % with one decimal: the score and its 95% interval in one cell
        (bounds rather than ± because a Wilson interval is asymmetric: 4 of 4 is [51.0, 100.0])."""
        mean, lo, hi = row[key], row[f"{key}_lo"], row[f"{key}_hi"]
        if pd.isna(mean):
            return ""
        if pd.isna(lo):
            return f"{100 * mean:.1f}"
        return f"{100 * mean:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]"

    def best_and_ties(self, key: str, frame: pd.DataFrame | None = None) -> tuple[set[int], set[int]]:
        """Row positions (in ``frame``, default the board's) of the best score in a column and of
        the scores whose interval overlaps the best's (ties with the best)."""
        df = self.frame if frame is None else frame
        col = df[key].to_numpy(float)
        if not len(col) or np.all(np.isnan(col)):
            return set(), set()
        top = np.nanmax(col)
        best = {i for i, v in enumerate(col) if v == top}
        b = next(iter(best))
        blo = df[f"{key}_lo"].to_numpy(float)[b]
        ties = {
            i
            for i, (v, hi) in enumerate(zip(col, df[f"{key}_hi"].to_numpy(float), strict=True))
            if i not in best
            and not math.isnan(v)
            and not math.isnan(hi)
            and not math.isnan(blo)
            and hi >= blo
        }
        return best, ties

    def display_frame(self, *, ci: str = "text") -> pd.DataFrame:
        df = self.frame.copy()
        if ci == "text":
            for key in self.score_keys:
                df[f"{key}_text"] = [self.cell_text(key, r) for _, r in df.iterrows()]
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
    row_stats: pd.DataFrame | None = None,
    protocol: dict | None = None,
) -> Leaderboard:
    """The leaderboard of ``metric`` from :func:`queries.latest_values` rows of one protocol.

    ``row_stats`` (:func:`queries.latest_row_stats`) fills answered %, valid-format %, errors and
    partial-run marks; ``protocol`` (the protocol's JSON as a dict) the retriever and top-k."""
    if not values.empty and set(values["protocol_id"]) - {protocol_id}:
        raise ValueError(f"rows of several protocols given for leaderboard of {protocol_id}")
    v = values[values["metric"] == metric]
    if models is not None:
        v = v[v["model"].isin(models)]
    if methods is not None:
        v = v[v["method"].isin(methods)]
    binary = is_binary(v["value"].to_numpy(dtype=np.float64))
    datasets = order_datasets(sorted(set(v["dataset"])))
    averages = averages_for(datasets)
    stats = row_stats.set_index(ROW_KEY) if row_stats is not None and len(row_stats) else None
    rows, cells = [], {}
    for (method, model), g in v.groupby(ROW_KEY, sort=True):
        per = {d: gd["value"].to_numpy(dtype=np.float64) for d, gd in g.groupby("dataset")}
        label = ", ".join(sorted({str(x) for x in g["label"] if x}))
        retrieves = uses_retrieval(str(method))
        st = stats.loc[(method, model)] if stats is not None and (method, model) in stats.index else None
        row: dict[str, object] = {
            "method": method,
            "model": model,
            "label": label,
            "size": model_size(str(model)),
            "type": method_type(str(method), label, str(model)),
            "retriever": retriever_text(protocol) if protocol and retrieves else ("—" if protocol else ""),
            "top_k": int(protocol["top_k"]) if protocol and retrieves else None,
            "paper": paper_link(str(method)),
            "answered": float(st["answered"]) if st is not None else math.nan,
            "valid_format": float(st["valid_format"]) if st is not None else math.nan,
            "errors": int(st["n_error"]) if st is not None else 0,
            "status": (
                f"partial: {st['partial_runs']}" if st is not None and int(st["n_partial"]) else "complete"
            ),
            "n": int(len(g)),
            "runs": ", ".join(sorted(set(g["run_id"]))),
        }
        for d in datasets:
            agg = dataset_aggregate(per[d], n_resamples, binary=binary) if d in per else _nan_aggregate()
            cells[(method, model, d)] = agg
            row.update({d: agg.mean, f"{d}_lo": agg.lo, f"{d}_hi": agg.hi})
        for grp, members in averages:
            have = all(d in per for d in members)
            agg = (
                macro_aggregate([per[d] for d in members], n_resamples, binary=binary)
                if have
                else _nan_aggregate()
            )
            cells[(method, model, grp.key)] = agg
            row.update({grp.key: agg.mean, f"{grp.key}_lo": agg.lo, f"{grp.key}_hi": agg.hi})
        rows.append(row)
    keys = [*(g.key for g, _ in averages), *datasets]
    fixed = [c.key for c in LEADERBOARD_COLUMNS]
    cols = [*fixed, "runs"] + [f"{k}{s}" for k in keys for s in ("", "_lo", "_hi")]
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
        binary=binary,
    )


def leaderboard_from_db(
    store, protocol_id: str, metric: str, *, include_partial: bool = False, **kw: object
) -> Leaderboard:
    """Query and build in one step (``harness export`` and the app share this). Partial runs (not
    ``complete``) are left out unless ``include_partial``; then their rows say so in ``status``."""
    name = protocol_name(store, protocol_id)
    complete_only = not include_partial
    values = queries.latest_values(store, protocol_id, [metric], complete_only=complete_only)
    if values.empty:
        known = ", ".join(queries.metrics_present(store, protocol_id, complete_only=complete_only)) or "none"
        partial = "" if include_partial else " in complete runs (partial runs are left out by default)"
        raise ConfigError(
            f"no values of metric {metric!r} under protocol {protocol_id}{partial}; metrics stored: {known}"
        )
    raw = queries.protocol_json(store, protocol_id)
    return build_leaderboard(
        values,
        protocol_id=protocol_id,
        protocol_name=name,
        metric=metric,
        row_stats=queries.latest_row_stats(store, protocol_id, complete_only=complete_only),
        protocol=json.loads(raw) if raw else None,
        **kw,  # type: ignore[arg-type]
    )


def resolve_metric(store, protocol_id: str, metric: str, *, include_partial: bool = False) -> str:
    """The stored metric ``metric`` names, case-insensitively (``EM`` -> ``em``); a clear error
    listing the stored ones otherwise. The metrics are :func:`shown_metrics`."""
    from leaderboards.schema import find_metric

    known = shown_metrics(store, protocol_id, include_partial=include_partial)
    found = find_metric(metric, known)
    if found is None:
        raise ConfigError(
            f"no values of metric {metric!r} under protocol {protocol_id}; metrics stored: "
            + (", ".join(known) or "none")
        )
    return found


def ordered_metrics(store, protocol_id: str, *, include_partial: bool = False) -> list[str]:
    """The metrics stored under ``protocol_id`` in the runs the views show (:func:`shown_metrics`),
    the protocol's primary metric first
    (the one the app opens on and ``harness export`` uses by default), then
    :func:`leaderboards.schema.order_metrics`."""
    from harness.scoring import stored_metric_name
    from leaderboards.schema import order_metrics

    raw = queries.protocol_json(store, protocol_id)
    proto = json.loads(raw) if raw else {}
    primary = (
        stored_metric_name(proto["primary_metric"], proto["top_k"]) if "primary_metric" in proto else None
    )
    return order_metrics(shown_metrics(store, protocol_id, include_partial=include_partial), primary)


def shown_metrics(store, protocol_id: str, *, include_partial: bool = False) -> list[str]:
    """The metrics of the runs a view shows: those of the latest complete runs (a failed or partial
    rerun never hides them); with ``include_partial`` also those of the latest runs of any status."""
    known = set(queries.metrics_present(store, protocol_id, complete_only=True))
    if include_partial:
        known |= set(queries.metrics_present(store, protocol_id, complete_only=False))
    return sorted(known)


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
PAPER_AVERAGES: dict[str, tuple[str, ...]] = {
    "avg": DATASET_ORDER,
    "avg_singlehop": SINGLEHOP,
    "avg_multihop": MULTIHOP,
}
"""What a paper's average covers (``harness/reported.py``: ``avg`` is all seven sets)."""

COMPOSITE_METRICS: dict[str, tuple[str, ...]] = {
    "em_f1_mean": ("em", "f1"),
    "em_f1_squad_mean": ("em", "f1_squad"),  # R-Search's "Avg." (its F1 has no yes/no rule)
}
"""A reported metric that is the mean of measured metrics -> those metrics."""


def metric_parts(metric: str) -> tuple[str, ...]:
    """The measured metrics a reported metric needs: its parts for a composite, else itself."""
    return COMPOSITE_METRICS.get(metric, (metric,))


def paper_protocol(paper: str) -> dict | None:
    """The registered protocol that produced ``paper``'s numbers, as a dict: its released evaluation
    (``<paper>-released``) when registered, else ``<paper>-eval``, else the paper's name without
    underscores (e.g. ``searchr1``); None when none is registered."""
    from harness.protocol import PROTOCOLS, preset

    for name in (f"{paper}-released", f"{paper}-eval", paper.replace("_", "")):
        if name in PROTOCOLS.names():
            return json.loads(preset(name).model_dump_json())
    return None


def _model_key(model: str) -> str:
    return model.split("/")[-1].lower()


def protocol_differences(paper: dict | None, ours: dict | None) -> list[str]:
    """What differs between a paper's protocol and ours: corpus, retriever, top-k."""
    if paper is None or ours is None:
        return ["paper protocol not registered"] if ours is not None else []
    out = []
    if corpus_text(paper) != corpus_text(ours):
        out.append(f"corpus {corpus_text(paper)} vs {corpus_text(ours)}")
    if retriever_text(paper) != retriever_text(ours):
        out.append(f"retriever {retriever_text(paper)} vs {retriever_text(ours)}")
    if paper.get("top_k") != ours.get("top_k"):
        out.append(f"top-k {paper.get('top_k')} vs {ours.get('top_k')}")
    return out


def build_reported(
    reported: pd.DataFrame,
    boards: dict[str, Leaderboard],
    *,
    match_model: bool = False,
    protocol: dict | None = None,
) -> pd.DataFrame:
    """Each published number next to the measured one for the same method, dataset and metric.

    ``boards`` maps metric name -> leaderboard of the chosen protocol. A row is matched to every
    measured model of the method (one output row each; only the paper's model when
    ``match_model``). The difference ``diff`` is given only when the comparison is like with like:
    the same model, and for an average the same datasets (a seven-set average against our
    three-set one gets none); ``differs`` says what is not the same (model, coverage, corpus,
    retriever, top-k). Values keep the metric's unit: fractions for EM-like metrics, raw numbers
    for counts (``unit``). A composite metric (:data:`COMPOSITE_METRICS`, e.g. R-Search's
    ``em_f1_squad_mean``) is the mean of its measured parts.

    Like with like: a row is compared only with the metric variant it names (``f1`` is never
    compared with ``f1_squad``). A row whose method ran under the protocol but whose metric our runs
    did not compute gets no number and says so in ``differs`` ("metric f1_squad not computed by
    our runs"), instead of silently showing nothing.
    """
    key_of = {g.reported_name: g.key for b in boards.values() for g, _ in b.averages}
    ran = {me for b in boards.values() for (me, _m, _k) in b.cells}
    protos: dict[str, dict | None] = {}
    out = []
    for r in reported.itertuples(index=False):
        if r.paper not in protos:
            protos[r.paper] = paper_protocol(r.paper)
        key = key_of.get(r.dataset, r.dataset)
        matches = _measured(boards, r.method, r.model, key, r.metric, match_model)
        proto_diff = protocol_differences(protos[r.paper], protocol) if matches else []
        missing = [p for p in metric_parts(r.metric) if p not in boards]
        not_computed = (
            [f"metric {r.metric} not computed by our runs (missing: {', '.join(missing)})"]
            if missing and r.method in ran
            else []
        )
        if not matches:
            matches = [("", _nan_aggregate(), ())]
        for model, agg, members in matches:
            differs = [*not_computed]
            if model and _model_key(model) != _model_key(r.model):
                differs.append(f"model {r.model} vs {model}")
            paper_cover = PAPER_AVERAGES.get(r.dataset)
            if model and paper_cover is not None and set(members) != set(paper_cover):
                differs.append(f"coverage {len(paper_cover)} vs {len(members)} sets")
            like = bool(model) and not differs
            out.append(
                {
                    "paper": r.paper,
                    "setting": r.setting,
                    "method": r.method,
                    "model": r.model,
                    "dataset": r.dataset,
                    "metric": r.metric,
                    "unit": "%" if is_fraction_metric(r.metric) else "count",
                    "reported": r.value,
                    "measured": agg.mean,
                    "measured_lo": agg.lo,
                    "measured_hi": agg.hi,
                    "diff": agg.mean - r.value if like else math.nan,
                    "n": agg.n,
                    "measured_model": model,
                    "coverage": ", ".join(members) if paper_cover is not None else "",
                    "differs": "; ".join([*differs, *proto_diff]),
                    "source": r.source,
                    "note": r.note,
                }
            )
    return pd.DataFrame(out, columns=[c.key for c in REPORTED_COLUMNS])


def _measured(
    boards: dict[str, Leaderboard], method: str, model: str, key: str, metric: str, match_model: bool
) -> list[tuple[str, Aggregate, tuple[str, ...]]]:
    parts = metric_parts(metric)
    if any(p not in boards for p in parts):
        return []
    first = boards[parts[0]]
    found = []
    for m in sorted({mm for (me, mm, _k) in first.cells if me == method}):
        if match_model and _model_key(m) != _model_key(model):
            continue
        aggs = [boards[p].cells.get((method, m, key)) for p in parts]
        if any(a is None or math.isnan(a.mean) for a in aggs):
            continue
        if len(aggs) == 1:
            agg = aggs[0]
        else:  # mean of the parts (EM and F1): no interval
            agg = Aggregate(float(np.mean([a.mean for a in aggs])), math.nan, math.nan, aggs[0].n)  # type: ignore[union-attr]
        found.append((m, agg, first.members(key)))  # type: ignore[arg-type]
    return found


def format_value(value: float, unit: str, *, signed: bool = False) -> str:
    """A value in its unit: a fraction in % with one decimal, a count as printed (2.9 stays 2.9)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    sign = "+" if signed else ""
    if unit == "%":
        return f"{100 * value:{sign}.1f}"
    return f"{value:{sign}.2f}".rstrip("0").rstrip(".")


@dataclass(frozen=True)
class ReportedPivot:
    """One paper table and metric as the paper prints it: rows (method, paper model, our model),
    one column per dataset (averages last), each cell ``reported / ours / difference``."""

    paper: str
    setting: str
    metric: str
    unit: str
    source: str
    frame: pd.DataFrame  # method, model, ours, one text column per dataset, differs
    datasets: list[str]
    n_compared: int  # cells with a difference
    n_measured: int  # cells with an own number
    protocol_differs: str = ""  # corpus / retriever / top-k differences (the same for every row)

    @property
    def title(self) -> str:
        unit = "in %" if self.unit == "%" else "raw counts"
        return f"{self.setting} · {metric_label(self.metric)} ({unit})"


def reported_pivots(table: pd.DataFrame) -> list[ReportedPivot]:
    """The long ``build_reported`` table as one pivot per (paper, table, metric), in table order.
    (Plain Python over the records: a pandas group-by per pivot is ~50x slower on 2,000 rows.)"""
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for r in table.to_dict("records"):
        groups.setdefault((r["paper"], r["setting"], r["metric"]), []).append(r)
    protocol_level = ("corpus", "retriever", "top-k", "paper protocol")
    out = []
    for (paper, setting, metric), recs in groups.items():
        unit = str(recs[0]["unit"])
        present = {r["dataset"] for r in recs}
        datasets = [
            *order_datasets(sorted(present - set(PAPER_AVERAGES))),
            *(d for d in PAPER_AVERAGES if d in present),
        ]
        rows: dict[tuple[str, str, str], dict[str, object]] = {}
        differs: dict[tuple[str, str, str], list[str]] = {}
        for r in recs:
            ours = str(r["measured_model"] or "")
            key = (str(r["method"]), str(r["model"]), ours)
            row = rows.setdefault(key, {"method": key[0], "model": key[1], "ours": ours or "—"})
            rep = format_value(r["reported"], unit)
            if ours:
                mine = format_value(r["measured"], unit) or "—"
                diff = format_value(r["diff"], unit, signed=True) or "—"
                row[r["dataset"]] = f"{rep} / {mine} / {diff}"
            else:
                row[r["dataset"]] = rep
            seen = differs.setdefault(key, [])
            seen += [d for d in str(r["differs"] or "").split("; ") if d and d not in seen]
        proto: list[str] = []
        for key, row in rows.items():
            proto += [d for d in differs[key] if d.startswith(protocol_level) and d not in proto]
            row["differs"] = "; ".join(d for d in differs[key] if not d.startswith(protocol_level))
        frame = pd.DataFrame(list(rows.values()), columns=["method", "model", "ours", *datasets, "differs"])
        out.append(
            ReportedPivot(
                paper=str(paper),
                setting=str(setting),
                metric=str(metric),
                unit=unit,
                source=str(recs[0]["source"]),
                frame=frame.fillna(""),
                datasets=datasets,
                n_compared=sum(1 for r in recs if not _isnan(r["diff"])),
                n_measured=sum(1 for r in recs if not _isnan(r["measured"])),
                protocol_differs="; ".join(proto),
            )
        )
    return out


def _isnan(x: object) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def no_comparison_reason(table: pd.DataFrame, measured_methods: dict[str, set[str]]) -> str:
    """One sentence saying why a paper's rows have no difference; '' when some have one.
    ``measured_methods``: method -> the models measured under the protocol."""
    if table["diff"].notna().any():
        return ""
    methods = sorted(set(table["method"]))
    ran = [m for m in methods if m in measured_methods]
    if not ran:
        return (
            f"No run under this protocol is of this paper's methods ({', '.join(methods[:8])}"
            + (", ..." if len(methods) > 8 else "")
            + ")."
        )
    paper_models = sorted({str(m) for m in table[table["method"].isin(ran)]["model"]})
    ours = sorted({m for meth in ran for m in measured_methods[meth]})
    if not {_model_key(m) for m in paper_models} & {_model_key(m) for m in ours}:
        return (
            f"The paper used {', '.join(paper_models)}; no run here used those models "
            f"(ours: {', '.join(ours)}), so no difference is computed."
        )
    return (
        "The runs with the paper's model do not cover the same datasets as the paper's numbers "
        "(an average over other sets is not comparable), so no difference is computed."
    )


def reported_boards(store, protocol_id: str, reported: pd.DataFrame) -> dict[str, Leaderboard]:
    """One leaderboard per metric the reported numbers use that the protocol has values of, plus
    ``n_retrievals`` (search calls per question, from the samples) when a paper reports it."""
    present = set(queries.metrics_present(store, protocol_id, complete_only=True))
    wanted = set(reported["metric"]) if len(reported) else set()
    wanted |= {p for m in wanted for p in metric_parts(m)}
    name = protocol_name(store, protocol_id)
    metrics = sorted(wanted & present)
    values = queries.latest_values(store, protocol_id, metrics, complete_only=True)
    boards = {
        m: build_leaderboard(values, protocol_id=protocol_id, protocol_name=name, metric=m) for m in metrics
    }
    if "n_retrievals" in wanted:
        c = queries.latest_costs(store, protocol_id, complete_only=True)
        if len(c):
            counts = c.assign(
                protocol_id=protocol_id, protocol_name=name, metric="n_retrievals", value=c["retrievals"]
            )
            boards["n_retrievals"] = build_leaderboard(
                counts, protocol_id=protocol_id, protocol_name=name, metric="n_retrievals"
            )
    return boards


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
        agg = macro_aggregate([per[d] for d in datasets], binary=binary) if full else _nan_aggregate()
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


@dataclass(frozen=True)
class PassageView:
    doc_id: str
    score: float | None
    gold: bool
    title: str | None  # None when the passage text is not available
    text: str | None


INJECTED = "injected"
"""Kind of a reconstructed turn: environment text the engine appended after a generation without
an action (the dialect's correction message), recovered from the stored response (the engine
stores no turn for it; see :func:`injected_messages`)."""


@dataclass(frozen=True)
class TurnView:
    index: int
    kind: str  # generate | retrieve | message | llm_call | judge | injected
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
    prompt: str | None = None  # the method's full prompt (meta "prompt"), when stored
    response: str = ""
    never_retrieved: list[PassageView] = field(default_factory=list)  # gold passages never retrieved


def injected_messages(response: str, turns: list[tuple[str, str]]) -> dict[int, str]:
    """Environment text between two consecutive generations, by the position of the later one
    (``len(turns)`` for text after the last turn).

    ``response`` is the stored full text (generations with every environment text interleaved);
    ``turns`` are the stored ``(kind, text)`` in order. A retrieval's observation and a ``message``
    turn are stored as turns; the correction message after a generation without an action is not
    (``harness.rollout.engine`` appends it with ``append_env`` and records no turn), so it is the
    text that sits between one generation and the next. Returns {} when the turns cannot be located
    in the response in order (then nothing is reconstructed rather than something wrong)."""
    out: dict[int, str] = {}
    pos, prev = 0, None
    for i, (kind, text) in enumerate(turns):
        if kind not in ("generate", "retrieve", "message"):
            continue
        if not text:
            prev = kind
            continue
        at = response.find(text, pos)
        if at < 0:
            return {}
        gap = response[pos:at]
        if kind == "generate" and prev == "generate" and gap.strip():
            out[i] = gap
        pos, prev = at + len(text), kind
    tail = response[pos:]
    if prev == "generate" and tail.strip():
        out[len(turns)] = tail
    return out


_REPEAT = re.compile(r"(.{8,300}?)\1{2,}", re.DOTALL)
MAX_COLLAPSE_CHARS = 50_000


def collapse_repeats(text: str) -> tuple[str, int]:
    """``text`` with every run of 3+ consecutive copies of a span (8-300 characters) shown once,
    followed by ``[... repeated N more times ...]``; and how many runs were collapsed. A 500-token
    loop becomes one line; texts over 50,000 characters are left as they are."""
    if len(text) > MAX_COLLAPSE_CHARS:
        return text, 0
    count = 0

    def sub(m: re.Match[str]) -> str:
        nonlocal count
        count += 1
        unit = m.group(1)
        more = len(m.group(0)) // len(unit) - 1
        return f"{unit} [... repeated {more} more times ...] "

    return _REPEAT.sub(sub, text), count


def sample_view(store, run_id: str, dataset: str, sample_id: str, passage_text=None) -> SampleView:
    """Everything stored about one question of one run; ``passage_text(doc_id) -> contents | None``
    fills passage titles and texts (e.g. from the packaged closed corpus). Correction messages the
    engine stored no turn for are reconstructed from the response as ``injected`` turns."""
    from harness.types import split_contents

    s = queries.sample_row(store, run_id, dataset, sample_id)
    if s.empty:
        raise ConfigError(f"run {run_id} has no sample {dataset}/{sample_id} in {store.path}")
    row = s.iloc[0]
    gold = [str(x) for x in _as_list(row["gold_ids"])]

    def passage(d: str, score: float | None) -> PassageView:
        contents = passage_text(d) if passage_text is not None else None
        title, text = split_contents(contents) if contents is not None else (None, None)
        return PassageView(d, score, d in gold, title, text)

    stored = list(queries.turn_rows(store, run_id, dataset, sample_id).itertuples(index=False))
    response = "" if row["response"] is None or pd.isna(row["response"]) else str(row["response"])
    injected = injected_messages(response, [(str(t.kind), str(t.text or "")) for t in stored])
    turns: list[TurnView] = []

    def add_injected(at: int) -> None:
        if at in injected:
            turns.append(TurnView(-1, INJECTED, injected[at], None, [], 0, 0, 0, None, "reconstructed"))

    for pos, t in enumerate(stored):
        add_injected(pos)
        ids = [str(x) for x in _as_list(t.doc_ids)]
        scores = [float(x) for x in _as_list(t.doc_scores)]
        turns.append(
            TurnView(
                index=int(t.turn_index),
                kind=str(t.kind),
                text=str(t.text or ""),
                query=None if t.query is None or pd.isna(t.query) else str(t.query),
                passages=[passage(d, scores[i] if i < len(scores) else None) for i, d in enumerate(ids)],
                prompt_tokens=int(t.prompt_tokens or 0),
                completion_tokens=int(t.completion_tokens or 0),
                observation_tokens=int(t.observation_tokens or 0),
                stop_reason=None if t.stop_reason is None or pd.isna(t.stop_reason) else str(t.stop_reason),
                status=str(t.status),
            )
        )
    add_injected(len(stored))
    retrieved = {str(x) for x in _as_list(row["retrieved_ids"])}
    meta = json.loads(row["meta_json"]) if row["meta_json"] and not pd.isna(row["meta_json"]) else {}
    prompt = meta.get("prompt")
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
            store, str(row["question"]), [t for t in (prediction, response) if t]
        ),
        prompt=str(prompt) if prompt else None,
        response=response,
        never_retrieved=[passage(g, None) for g in gold if g not in retrieved],
    )


def _as_list(x: object) -> list:
    if x is None:
        return []
    if isinstance(x, float) and math.isnan(x):
        return []
    return list(x)  # type: ignore[call-overload]


def glossary() -> list[dict[str, str]]:
    """Every metric name the app can show: ``name, label, unit, definition, also_called``. Answer
    and retrieval metrics come from the metric registry (its description and source); judge scores,
    R-Search's EM/F1 mean, counts, answered % and valid format % from ``schema.EXTRA_GLOSSARY``."""
    from harness.metrics.registry import METRICS
    from leaderboards.schema import EXTRA_GLOSSARY

    out = []
    for name in METRICS.names():
        m = METRICS.get(name)
        out.append(
            {
                "name": name,
                "label": metric_label(name),
                "unit": "%",
                "definition": m.description,
                "also_called": m.source,
            }
        )
    for name, (definition, also) in EXTRA_GLOSSARY.items():
        out.append(
            {
                "name": name,
                "label": metric_label(name),
                "unit": "%" if is_fraction_metric(name) else "count",
                "definition": definition,
                "also_called": also,
            }
        )
    return out


# -- training runs (the training page) -------------------------------------------------------------
SFT_LABEL = "sft recipe "  # `harness sft` labels its train run "sft recipe <recipe>" (harness.rl.sft)
SFT_OUT_DEFAULT = "runs/{method}-{recipe}-sft"  # `harness sft --out`'s default (harness.cli.cmd_sft)
HELDOUT = "heldout/"  # harness.rl.heldout.record_heldout's metric prefix
HELDOUT_FIELDS = (
    "em",
    "em_lo",
    "em_hi",
    "f1",
    "n",
    "answered",
    "top_answer_share",
    "answer_entropy_bits",
    "em_diff",  # paired against the run's starting checkpoint (harness.rl.heldout.record_heldout)
    "em_diff_lo",
    "em_diff_hi",
)
# heldout/baseline/*: the template-majority baseline (harness.rl.heldout.record_baseline)
BASELINE = "baseline/"
SAMPLED = "sampled/"  # harness.rl.trainer: the rollout metrics over every rollout generated


def is_sft_run(label: str) -> bool:
    return str(label).startswith(SFT_LABEL)


def curve_metric(columns, name: str) -> str | None:
    """The logged name of a rollout metric: ``sampled/<name>`` (over every rollout generated; under
    DAPO dynamic sampling ``<name>`` covers only the kept groups) when logged, else ``<name>`` (runs
    logged before the trainer wrote ``sampled/``), else None."""
    cols = set(columns)
    for m in (SAMPLED + name, name):
        if m in cols:
            return m
    return None


def rollout_curves(wide: pd.DataFrame, names) -> pd.DataFrame:
    """The columns ``names`` of :func:`train_curves`'s frame under those names, each read from its
    logged name (:func:`curve_metric`); names not logged are left out."""
    found = {n: curve_metric(wide.columns, n) for n in names}
    return pd.DataFrame({n: wide[m] for n, m in found.items() if m is not None}, index=wide.index)


def reward_names(columns) -> list[str]:
    """The mean rewards a run logged (``reward/total_mean``, ``reward/outcome_mean``, one per
    component; not ``reward/total_std``), with or without the ``sampled/`` prefix, total and
    outcome first."""
    names = {
        n
        for n in (c.removeprefix(SAMPLED) for c in columns)
        if n.startswith("reward/") and n.endswith("_mean")
    }
    first = [n for n in ("reward/total_mean", "reward/outcome_mean") if n in names]
    return first + sorted(names - set(first))


def train_curves(steps: pd.DataFrame) -> pd.DataFrame:
    """``train_steps`` rows (``step, metric, value``) of one run as one column per metric, held-out
    metrics left out (they belong to checkpoints, :func:`heldout_points`); the index is the step
    1-based, as ``harness train`` prints "step 1/N": after the step shown as k, k optimizer steps
    are done, so a checkpoint's held-out step k sits at the same x."""
    rows = steps[~steps["metric"].str.startswith(HELDOUT)]
    wide = rows.pivot_table(index="step", columns="metric", values="value", aggfunc="first").sort_index()
    wide.index = wide.index + 1
    wide.index.name = "step"
    wide.columns.name = None
    return wide


def heldout_points(steps: pd.DataFrame) -> pd.DataFrame:
    """Held-out evaluations of one run's checkpoints (``heldout/*`` rows of ``train_steps``): one
    row per step with ``step`` as stored (optimizer steps behind the checkpoint, 0 = the run's
    starting model) and the columns of :data:`HELDOUT_FIELDS` (NaN where one was not logged)."""
    rows = steps[
        steps["metric"].str.startswith(HELDOUT) & ~steps["metric"].str.startswith(HELDOUT + BASELINE)
    ]
    wide = rows.assign(metric=rows["metric"].str.removeprefix(HELDOUT)).pivot_table(
        index="step", columns="metric", values="value", aggfunc="first"
    )
    out = wide.reindex(columns=list(HELDOUT_FIELDS)).sort_index().reset_index()
    out["step"] = out["step"].astype(int)
    out.columns.name = None
    return out


def sft_checkpoint(command: str, method: str, label: str) -> str | None:
    """The checkpoint directory an SFT run's command wrote (``<--out>/final``, or the default
    ``--out``), normalised; None for a run that is not an SFT run or a command that is not a
    command line."""
    if not is_sft_run(label):
        return None
    try:
        argv = shlex.split(command or "")
    except ValueError:
        return None
    out = SFT_OUT_DEFAULT.format(method=method, recipe=label.removeprefix(SFT_LABEL))
    for i, a in enumerate(argv):
        if a == "--out" and i + 1 < len(argv):
            out = argv[i + 1]
        elif a.startswith("--out="):
            out = a.removeprefix("--out=")
    return os.path.normpath(os.path.join(out, "final"))


def linked_sft_run(runs: pd.DataFrame, run_id: str) -> str | None:
    """The SFT run an RL run started from: the newest SFT run (``runs``: ``run_id, method, model,
    label, command``) of the same method whose checkpoint (:func:`sft_checkpoint`) is the RL run's
    ``--model`` as both commands spelled it (normalised). The store records no other link."""
    row = runs.set_index("run_id").loc[run_id]
    if is_sft_run(row["label"]):
        return None
    model = os.path.normpath(str(row["model"]))
    for r in runs.itertuples():  # newest first, as train_runs orders them
        if (
            r.run_id != run_id
            and r.method == row["method"]
            and sft_checkpoint(r.command, r.method, r.label) == model
        ):
            return str(r.run_id)
    return None


def heldout_table(chain: list[tuple[str, str, pd.DataFrame]]) -> pd.DataFrame:
    """The untrained / SFT / SFT+RL table from the held-out rows of a chain of training runs
    (``(run_id, label, train_steps rows)``, SFT runs first). Every held-out step of every run is a
    row named by its run label and step; ``checkpoint`` says which model it is: in an SFT run step 0
    is ``untrained`` and the last step ``SFT``; in another run step 0 is ``SFT`` and the last step
    ``SFT+RL`` when an SFT run precedes it in the chain (the caller vouches it started from that
    run's checkpoint), else ``start`` and ``RL``; steps between are ``<that> step k``. The first
    template-majority baseline a run of the chain logged (``heldout/baseline/*``) is a row
    ``template majority`` before that run's rows. Columns: ``checkpoint, run, step, EM [95%]``
    and ``EM vs start [95% paired]`` (text: the paired difference against the run's step 0) and
    :data:`HELDOUT_FIELDS`."""
    rows = []
    after_sft = False
    baseline_done = False
    for run_id, label, steps in chain:
        base = steps[steps["metric"].str.startswith(HELDOUT + BASELINE)]
        if len(base) and not baseline_done:
            b = dict(zip(base["metric"].str.removeprefix(HELDOUT + BASELINE), base["value"], strict=True))
            rows.append(
                {
                    "checkpoint": "template majority",
                    "run": label or run_id,
                    "run_id": run_id,
                    "step": None,
                    "EM [95%]": f"{b['em']:.3f} [{b['em_lo']:.3f}, {b['em_hi']:.3f}]",
                    "EM vs start [95% paired]": "",
                    **{f: b.get(f, math.nan) for f in HELDOUT_FIELDS},
                    "n": int(b["n"]),
                }
            )
            baseline_done = True
        pts = heldout_points(steps)
        sft = is_sft_run(label)
        first, last = ("untrained", "SFT") if sft else ("SFT", "SFT+RL") if after_sft else ("start", "RL")
        top = int(pts["step"].max()) if len(pts) else 0
        for p in pts.itertuples(index=False):
            rows.append(
                {
                    "checkpoint": first
                    if p.step == 0
                    else last
                    if p.step == top
                    else f"{last} step {p.step}",
                    "run": label or run_id,
                    "run_id": run_id,
                    "step": int(p.step),
                    "EM [95%]": f"{p.em:.3f} [{p.em_lo:.3f}, {p.em_hi:.3f}]",
                    "EM vs start [95% paired]": ""
                    if math.isnan(p.em_diff)
                    else f"{p.em_diff:+.3f} [{p.em_diff_lo:+.3f}, {p.em_diff_hi:+.3f}]",
                    **{f: getattr(p, f) for f in HELDOUT_FIELDS},
                    "n": None if math.isnan(p.n) else int(p.n),
                }
            )
        after_sft = after_sft or sft
    cols = ["checkpoint", "run", "run_id", "step", "EM [95%]", "EM vs start [95% paired]", *HELDOUT_FIELDS]
    return pd.DataFrame(rows, columns=cols)
