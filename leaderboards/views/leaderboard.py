"""The leaderboard page and ``harness export --view leaderboard``: methods x datasets with intervals, and
the best of each column with the rows a paired test does not separate from it."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from harness.data.benches import MULTIHOP, SINGLEHOP
from harness.errors import ConfigError
from harness.metrics.bootstrap import Aggregate
from harness.metrics.exact import paired_exact
from harness.metrics.paired import ALPHA, PairedTest
from harness.metrics.paired import holm as paired_holm
from harness.results.queries import choose_protocol
from harness.results.training_state import training_of, type_of
from leaderboards import queries
from leaderboards.schema import (
    DATASET_ORDER,
    LEADERBOARD_COLUMNS,
    LEADING_KEYS,
    RUNS_COLUMN,
    AverageGroup,
    Column,
    averages_for,
    dataset_label,
    interval_columns,
    metric_label,
    order_datasets,
    score_column,
)
from leaderboards.views.common import (
    N_RESAMPLES,
    ROW_KEY,
    dataset_aggregate,
    is_binary,
    macro_aggregate,
    model_size,
    nan_aggregate,
    paper_link,
    retriever_text,
    uses_retrieval,
)

# -- leaderboard ---------------------------------------------------------------------------------
_EQUAL = 1e-12  # two means closer than this are equal (float sums of the same values)


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
    questions: dict[tuple[str, str], dict[str, dict[str, float]]] = field(default_factory=dict)
    """(method, model) -> dataset -> sample id -> value: what the paired tests pair."""
    _tests: dict[str, tuple[set[int], dict[int, PairedTest | None]]] = field(default_factory=dict, repr=False)
    """:meth:`tests_against_best` of the board's own frame, per column (the app, the marks and the
    export columns ask for the same tests)."""

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

    def short_header(self, key: str) -> str:
        """A narrow header for the app (``Avg. multi-hop · n=30``, ``HotpotQA · n=10``): the
        coverage of an average is in :meth:`coverage`, shown under the table."""
        lo, hi = self.n_range(key)
        n = f"n={lo}" if lo == hi else f"n={lo}–{hi}"
        label = next((g.label for g, _ in self.averages if g.key == key), dataset_label(key))
        return f"{label} · {n}"

    def shown_keys(self) -> list[str]:
        """The score columns worth showing: an average over a single dataset repeats that
        dataset's column (same values, same interval), so it is left out."""
        return [k for k in self.score_keys if len(self.members(k)) > 1 or k in self.datasets]

    def interval_method(self, key: str) -> str:
        """The 95% interval method behind a score column (the module docstring of
        :mod:`leaderboards.views` gives the reasons): for 0/1 metrics Wilson score per dataset and
        stratified Agresti-Coull for an average of several datasets; else percentile bootstrap."""
        if not self.binary:
            if key in self.datasets:
                return "percentile bootstrap over questions (1000 resamples, seed 0)"
            return "percentile bootstrap over the pooled questions, datasets weighted equally (1000 resamples, seed 0)"
        if key in self.datasets or len(self.members(key)) == 1:
            return "Wilson score"
        return "stratified Agresti-Coull"

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

    def paired_with(self, key: str, a: tuple[str, str], b: tuple[str, str]) -> PairedTest | None:
        """Row ``b`` against row ``a`` on a score column, on the questions both scored
        (:func:`harness.metrics.paired.paired_test`: exact McNemar for 0/1 values, else the paired
        bootstrap; an average weights each dataset equally). None when either lacks a dataset."""
        shared = self._shared(key, a, b)
        if shared is None:
            return None
        keys, xa, xb, weights = shared
        return paired_exact(xa, xb, keys=keys, weights=weights)

    def _shared(
        self, key: str, a: tuple[str, str], b: tuple[str, str]
    ) -> tuple[list[tuple[str, str]], np.ndarray, np.ndarray, np.ndarray] | None:
        """The questions rows ``a`` and ``b`` both scored in a score column: their ``(dataset,
        sample_id)`` keys, both rows' values and each question's weight (an average weights
        every dataset equally); None when either lacks a dataset or they share no question."""
        qa, qb = self.questions.get(a, {}), self.questions.get(b, {})
        keys: list[tuple[str, str]] = []
        xa: list[float] = []
        xb: list[float] = []
        sizes: list[int] = []
        for d in self.members(key):
            if d not in qa or d not in qb:
                return None
            common = [s for s in qa[d] if s in qb[d]]
            if not common:
                return None
            keys += [(d, s) for s in common]
            xa += [qa[d][s] for s in common]
            xb += [qb[d][s] for s in common]
            sizes += [len(common)] * len(common)
        n, k = len(xa), len(self.members(key))
        weights = np.array([n / (k * m) for m in sizes])
        return keys, np.array(xa), np.array(xb), weights

    def shared_diff(self, key: str, a: tuple[str, str], b: tuple[str, str]) -> float | None:
        """Mean of ``b - a`` on the questions both rows scored (datasets weighted equally); None
        when they share none. What "better" means between a partial row and a complete one."""
        shared = self._shared(key, a, b)
        if shared is None:
            return None
        _, xa, xb, w = shared
        return float(np.mean((xb - xa) * w))

    def best_and_ties(
        self, key: str, frame: pd.DataFrame | None = None, *, holm: bool = False
    ) -> tuple[set[int], set[int]]:
        """Row positions (in ``frame``, default the board's) of the best score in a column and of
        the scores the paired test does not separate from it (``≈``): each row against the best
        row on the questions both scored, at 0.05 per pair (uncorrected; ``holm``: Holm's
        correction across the column's rows). The tests are :meth:`tests_against_best`; a column
        whose every score is equal has no best and no tie (:meth:`all_equal`)."""
        if self.all_equal(key, frame):  # no row is better than another: nothing to mark
            return set(), set()
        best, tests = self.tests_against_best(key, frame)
        pvals = {i: t.p for i, t in tests.items() if t is not None}
        if holm and pvals:
            pvals = dict(zip(pvals, paired_holm(list(pvals.values())), strict=True))
        return best, {i for i, p in pvals.items() if p >= ALPHA}

    def tests_against_best(
        self, key: str, frame: pd.DataFrame | None = None
    ) -> tuple[set[int], dict[int, PairedTest | None]]:
        """The best rows' positions in a column and, for every other row with a score, its paired
        test against the (first) best row (None: no questions in common)."""
        if frame is None and key in self._tests:
            return self._tests[key]
        df = self.frame if frame is None else frame
        col = df[key].to_numpy(float)
        if not len(col) or np.all(np.isnan(col)):
            return set(), {}
        rows = list(zip(df["method"], df["model"], strict=True))
        best = self._best(key, col, rows)
        ref = rows[min(best)]
        tests = {
            i: self.paired_with(key, ref, rows[i])
            for i, v in enumerate(col)
            if i not in best and not math.isnan(v)
        }
        if frame is None:
            self._tests[key] = (best, tests)
        return best, tests

    def _best(self, key: str, col: np.ndarray, rows: list[tuple[str, str]]) -> set[int]:
        """The best rows of a column. When every row has the same n (the usual case): the rows
        with the highest score. When some row is partial (fewer questions), "better" is decided
        on the questions both rows answered: the fullest rows start (highest score first), and a
        row whose mean on the questions it shares with the current best is higher takes its
        place; the best is that row and every row equal to it on the shared questions (a partial
        run that scored 4/8 where the best scored 6/8 on those eight is not best, whatever its
        score over its eight questions alone)."""
        present = [i for i, v in enumerate(col) if not math.isnan(v)]
        cell = self.cells.get
        ns = {i: (c.n if (c := cell((*rows[i], key))) is not None else 0) for i in present}
        if len(set(ns.values())) <= 1:
            top = np.nanmax(col)
            return {i for i in present if col[i] == top}
        order = sorted(present, key=lambda i: (-ns[i], -col[i], i))
        champ = order[0]
        for i in order[1:]:
            d = self.shared_diff(key, rows[champ], rows[i])
            if d is not None and d > _EQUAL:
                champ = i
        best = {champ}
        for i in present:
            d = None if i == champ else self.shared_diff(key, rows[champ], rows[i])
            if d is not None and abs(d) <= _EQUAL:
                best.add(i)
        return best

    def all_equal(self, key: str, frame: pd.DataFrame | None = None) -> bool:
        """Every row with a score in the column has the same score (no row is best: the exports
        bold nothing, rather than every cell of a column of zeros)."""
        df = self.frame if frame is None else frame
        col = df[key].to_numpy(float)
        vals = col[~np.isnan(col)]
        return len(vals) > 1 and bool(np.all(vals == vals[0]))

    def paired_frame(self, *, holm: bool = False) -> tuple[pd.DataFrame, list[Column]]:
        """Per score column, what the marks rest on, for the data exports: ``<key>_n`` (the
        row's questions), ``<key>_p`` (its paired test against the column's best row on the
        questions both answered; empty for the best row itself and where none is shared;
        Holm-adjusted with ``holm``), ``<key>_tie`` (not separated from the best: the ``≈``)
        and ``<key>_best``; rows in :attr:`frame`'s order."""
        out: dict[str, list[object]] = {}
        cols: list[Column] = []
        rows = list(zip(self.frame["method"], self.frame["model"], strict=True))
        for key in self.score_keys:
            best, ties = self.best_and_ties(key, holm=holm)
            _, tests = (set(), {}) if not best else self.tests_against_best(key)
            pvals = {i: t.p for i, t in tests.items() if t is not None}
            if holm and pvals:
                pvals = dict(zip(pvals, paired_holm(list(pvals.values())), strict=True))
            ns = [
                (c.n if (c := self.cells.get((*r, key))) is not None and not math.isnan(c.mean) else None)
                for r in rows
            ]
            out[f"{key}_n"] = ns
            out[f"{key}_p"] = [pvals.get(i, math.nan) for i in range(len(rows))]
            out[f"{key}_tie"] = [i in ties for i in range(len(rows))]
            out[f"{key}_best"] = [i in best for i in range(len(rows))]
            test = (
                "exact McNemar"
                if self.binary
                else "exact sign-flip (bootstrap above 30 non-zero differences)"
            )
            cols += [
                Column(key=f"{key}_n", label=f"{key} n", kind="count", help="questions behind the score"),
                Column(key=f"{key}_p", label=f"{key} p vs best", kind="number", help=f"{test}, paired"),
                Column(key=f"{key}_tie", label=f"{key} tie", kind="text", help="p >= 0.05 against the best"),
                Column(key=f"{key}_best", label=f"{key} best", kind="text", help="the column's best"),
            ]
        return pd.DataFrame(out, index=self.frame.index), cols

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


def tie_rule(binary: bool, *, holm: bool = False) -> str:
    """What a tie mark means, as the captions say it (the app's and the exports')."""
    test = (
        "exact McNemar"
        if binary
        else "exact sign-flip permutation test; the seeded paired bootstrap above 30 non-zero differences"
    )
    correction = (
        "with Holm's correction across the column's rows"
        if holm
        else "not corrected for multiple comparisons"
    )
    return (
        f"not separated from the best by a paired test ({test}) on the questions both answered, "
        f"p >= 0.05 per pair, {correction}."
    )


def protocol_rows(protocol: dict) -> pd.DataFrame:
    """The protocol's settings as ``setting, value`` rows for reading: nested objects flattened to
    dotted names (``retriever.kind``), lists of plain values joined with ``, ``, other lists and
    ``None`` as compact JSON / ``—``. The order is the JSON's."""
    rows: list[tuple[str, str]] = []

    def walk(prefix: str, value: object) -> None:
        if isinstance(value, dict) and value:
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        elif isinstance(value, list) and all(not isinstance(x, (dict, list)) for x in value):
            rows.append((prefix, ", ".join(str(x) for x in value) if value else "—"))
        elif value is None or value == {}:
            rows.append((prefix, "—"))
        elif isinstance(value, (dict, list)):
            rows.append((prefix, json.dumps(value, separators=(", ", ": "))))
        else:
            rows.append((prefix, str(value)))

    walk("", protocol)
    return pd.DataFrame(rows, columns=["setting", "value"])


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
    records: dict[str, dict] | None = None,
) -> Leaderboard:
    """The leaderboard of ``metric`` from :func:`queries.latest_values` rows of one protocol.

    ``row_stats`` (:func:`queries.latest_row_stats`) fills answered %, valid-format %, errors and
    partial-run marks; ``protocol`` (the protocol's JSON as a dict) the retriever and top-k;
    ``records`` (:func:`queries.run_records`: run id -> record) each row's training state
    (:func:`harness.results.training_state.training_of`; a run without a record is its base
    model's) and so its type; the label never decides it."""
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
    rows, cells, questions = [], {}, {}
    for (method, model), g in v.groupby(ROW_KEY, sort=True):
        per = {d: gd["value"].to_numpy(dtype=np.float64) for d, gd in g.groupby("dataset")}
        questions[(str(method), str(model))] = {
            str(d): dict(zip(gd["sample_id"].astype(str), gd["value"].astype(float), strict=True))
            for d, gd in g.groupby("dataset")
        }
        label = ", ".join(sorted({str(x) for x in g["label"] if x}))
        states = sorted(
            {str(training_of(str(method), (records or {}).get(str(run), {}))) for run in set(g["run_id"])}
        )
        training = states[0] if len(states) == 1 else " / ".join(states)  # runs of one row differ: say so
        retrieves = uses_retrieval(str(method))
        st = stats.loc[(method, model)] if stats is not None and (method, model) in stats.index else None
        row: dict[str, object] = {
            "method": method,
            "model": model,
            "label": label,
            "size": model_size(str(model)),
            "type": type_of(training if len(states) == 1 else None),
            "training": training if training != "None" else "",
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
            agg = dataset_aggregate(per.get(d, np.array([])), n_resamples, binary=binary)  # none: NaN
            cells[(method, model, d)] = agg
            row.update({d: agg.mean, f"{d}_lo": agg.lo, f"{d}_hi": agg.hi})
        for grp, members in averages:
            have = all(d in per for d in members)
            agg = (
                macro_aggregate([per[d] for d in members], n_resamples, binary=binary)
                if have
                else nan_aggregate()
            )
            cells[(method, model, grp.key)] = agg
            row.update({grp.key: agg.mean, f"{grp.key}_lo": agg.lo, f"{grp.key}_hi": agg.hi})
        rows.append(row)
    keys = [*(g.key for g, _ in averages), *datasets]
    fixed = [c.key for c in LEADERBOARD_COLUMNS]
    cols = [*fixed, "runs", "training"] + [f"{k}{s}" for k in keys for s in ("", "_lo", "_hi")]
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
        questions=questions,
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
        records=queries.run_records(store, sorted(set(values["run_id"]))),
        **kw,  # type: ignore[arg-type]
    )


def resolve_metric(store, protocol_id: str, metric: str, *, include_partial: bool = False) -> str:
    """The stored metric ``metric`` names, case-insensitively (``EM`` -> ``em``); a clear error
    listing the stored ones otherwise. The metrics are :func:`shown_metrics`."""
    from leaderboards.schema import find_metric

    known = shown_metrics(store, protocol_id, include_partial=include_partial)
    found = find_metric(metric, known)
    if found is None:
        from harness.choices import did_you_mean

        raise ConfigError(
            f"no values of metric {metric!r}{did_you_mean(metric, known)} under protocol {protocol_id}; "
            "metrics stored: " + (", ".join(known) or "none")
        )
    return found


def ordered_metrics(store, protocol_id: str, *, include_partial: bool = False) -> list[str]:
    """The metrics stored under ``protocol_id`` in the runs the views show (:func:`shown_metrics`),
    the protocol's primary metric first
    (the one the app opens on and ``harness export`` uses by default), then
    :func:`leaderboards.schema.order_metrics`."""
    from harness.metrics.registry import stored_metric_name
    from leaderboards.schema import order_metrics

    raw = queries.protocol_json(store, protocol_id)
    proto = json.loads(raw) if raw else {}
    primary = (
        stored_metric_name(proto["primary_metric"], proto["top_k"]) if "primary_metric" in proto else None
    )
    return order_metrics(shown_metrics(store, protocol_id, include_partial=include_partial), primary)


def shown_metrics(store, protocol_id: str, *, include_partial: bool = False) -> list[str]:
    """The metrics of the runs a view shows: those of the latest complete runs (a failed or partial
    rerun never hides them); with ``include_partial`` also those of partial runs where no complete run
    of the same method, model and dataset exists."""
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


# -- reported vs reproduced ------------------------------------------------------------------------
PAPER_AVERAGES: dict[str, tuple[str, ...]] = {
    "avg": DATASET_ORDER,
    "avg_singlehop": SINGLEHOP,
    "avg_multihop": MULTIHOP,
}
"""What a paper's average covers (``harness/results/reported.py``: ``avg`` is all seven sets)."""

COMPOSITE_METRICS: dict[str, tuple[str, ...]] = {
    "em_f1_mean": ("em", "f1"),
    "em_f1_squad_mean": ("em", "f1_squad"),  # R-Search's "Avg." (its F1 has no yes/no rule)
}
"""A reported metric that is the mean of measured metrics -> those metrics."""


__all__ = [
    "COMPOSITE_METRICS",
    "Leaderboard",
    "PAPER_AVERAGES",
    "build_leaderboard",
    "choose_protocol",
    "leaderboard_from_db",
    "ordered_metrics",
    "protocol_name",
    "protocol_rows",
    "resolve_metric",
    "shown_metrics",
    "tie_rule",
]
