"""Reported vs reproduced: the papers' published numbers beside ours, per paper table."""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from harness.metrics.bootstrap import Aggregate
from harness.results.agreement import AGREES, DIFFERS, INCONCLUSIVE, MARGIN, agreement
from harness.results.comparable import (
    field_of,
    model_key,
    not_comparable,
    paper_setting,
    protocol_setting,
    run_setting,
    setting_differs,
)
from leaderboards import queries
from leaderboards.schema import (
    REPORTED_COLUMNS,
    dataset_label,
    is_fraction_metric,
    metric_label,
    order_datasets,
)
from leaderboards.views.common import macro_aggregate, nan_aggregate
from leaderboards.views.leaderboard import (
    COMPOSITE_METRICS,
    PAPER_AVERAGES,
    Leaderboard,
    build_leaderboard,
    protocol_name,
)


def metric_parts(metric: str) -> tuple[str, ...]:
    """The measured metrics a reported metric needs: its parts for a composite, else itself."""
    return COMPOSITE_METRICS.get(metric, (metric,))


def paper_protocol(paper: str) -> dict | None:
    """The registered protocol that produced ``paper``'s numbers, as a dict: its released evaluation
    (``<paper>-released``) when registered, else ``<paper>-eval``, else the paper's name without
    underscores (e.g. ``searchr1``); None when none is registered."""
    from harness.eval.protocol import PROTOCOLS, preset

    for name in (f"{paper}-released", f"{paper}-eval", paper.replace("_", "")):
        if name in PROTOCOLS.names():
            return json.loads(preset(name).model_dump_json())
    return None


_model_key = model_key  # the comparability rule's model names (harness.results.comparable)

PROTOCOL_FIELDS = ("corpus", "retriever", "top_k")
"""The setting fields a protocol pins (:func:`protocol_differences`)."""


def protocol_differences(paper: dict | None, ours: dict | None) -> list[str]:
    """What differs between a paper's protocol and ours: corpus, retriever, top-k
    (:func:`harness.results.comparable.setting_differs` on those fields)."""
    if paper is None or ours is None:
        return ["paper protocol not registered"] if ours is not None else []
    return setting_differs(protocol_setting(paper), protocol_setting(ours), PROTOCOL_FIELDS)


PAPER_SETTING = ("", "", "")
"""The key suffix of a paper's file-level setting in :func:`registered_settings`:
``(paper, *PAPER_SETTING)``, for a row the file does not list (a database's own rows)."""


def registered_settings() -> dict[tuple[str, str, str, str], dict[str, object]]:
    """``(paper, setting, method, model) -> recorded setting`` from every registered paper's
    ``reported.yaml`` (:meth:`harness.results.reported.ReportedFile.settings`), and each file's own
    setting under ``(paper, *PAPER_SETTING)``."""
    from leaderboards.reported_sync import registered_files

    out = {}
    for f in registered_files():
        out[(f.paper, *PAPER_SETTING)] = f.setting
        out.update({(f.paper, *k): v for k, v in f.settings().items()})
    return out


def build_reported(
    reported: pd.DataFrame,
    boards: dict[str, Leaderboard],
    *,
    match_model: bool = False,
    protocol: dict | None = None,
    samples: Samples | None = None,
    recorded: dict[tuple[str, str, str, str], dict[str, object]] | None = None,
) -> pd.DataFrame:
    """Each published number next to the measured one for the same method, dataset and metric.

    ``boards`` maps metric name -> leaderboard of the chosen ``protocol`` (its JSON as a dict). A
    row is matched to every measured model of the method (one output row each; only the paper's
    model when ``match_model``). The difference ``diff`` is given only when the comparison is like
    with like (:mod:`harness.results.comparable`): the row's setting (``recorded``: default the
    registered papers' ``reported.yaml`` settings, :func:`registered_settings`; else the paper's
    protocol) matches our run on corpus, retriever, top-k, prompt variant, model, metric variant
    and training state, and for an average the datasets are the same (a seven-set average against
    our three-set one gets none); ``differs`` names every field that is not the same. Values keep the metric's unit: fractions for EM-like metrics, raw numbers
    for counts (``unit``). A composite metric (:data:`COMPOSITE_METRICS`, e.g. R-Search's
    ``em_f1_squad_mean``) is the mean of its measured parts.

    Like with like: a row is compared only with the metric variant it names (``f1`` is never
    compared with ``f1_squad``). A row whose method ran under the protocol but whose metric our runs
    did not compute gets no number and says so in ``differs`` ("metric f1_squad not computed by
    our runs"), instead of silently showing nothing.

    Averages over the same datasets: for each paper row and each of our models with numbers on at
    least two of the datasets the paper reports for that row, one more row (``dataset`` =
    :data:`SHARED_AVG`, ``coverage`` naming the datasets) holds the mean of the paper's numbers
    over exactly those datasets beside our mean over the same ones, with its 95% interval from
    ``samples`` (:func:`reported_samples`; the leaderboard's :func:`macro_aggregate`; without
    samples a 0/1 metric's interval is rebuilt exactly from each dataset's mean and n, any other
    has none). The paper's own average (``avg``: seven sets) is never compared with ours.
    """
    key_of = {g.reported_name: g.key for b in boards.values() for g, _ in b.averages}
    ran = {me for b in boards.values() for (me, _m, _k) in b.cells}
    training_of = {
        (str(me), str(mo)): (str(t) or None)
        for b in boards.values()
        for me, mo, t in zip(b.frame["method"], b.frame["model"], b.frame["training"], strict=True)
    }
    if recorded is None:
        recorded = registered_settings()
    out = []
    for r in reported.itertuples(index=False):
        key = key_of.get(r.dataset, r.dataset)
        matches = _measured(boards, r.method, r.model, key, r.metric, match_model)
        theirs = paper_setting(
            paper=r.paper,
            method=r.method,
            model=r.model,
            metric=r.metric,
            recorded=recorded.get(
                (r.paper, r.setting, r.method, r.model), recorded.get((r.paper, *PAPER_SETTING))
            ),
        )
        missing = [p for p in metric_parts(r.metric) if p not in boards]
        not_computed = (
            [f"metric {r.metric} not computed by our runs (missing: {', '.join(missing)})"]
            if missing and r.method in ran
            else []
        )
        if not matches:
            matches = [("", nan_aggregate(), ())]
        for model, agg, members in matches:
            differs = [*not_computed]
            if model:
                ours = run_setting(
                    protocol,
                    method=r.method,
                    model=model,
                    metric=r.metric,
                    training=training_of.get((r.method, model)),
                )
                differs += setting_differs(theirs, ours)
            paper_cover = PAPER_AVERAGES.get(r.dataset)
            if model and paper_cover is not None and set(members) != set(paper_cover):
                differs.append(f"coverage {len(paper_cover)} vs {len(members)} sets")
            like = bool(model) and not differs
            unit = "fraction" if is_fraction_metric(r.metric) else "count"
            verdict = agreement(r.value, agg.lo, agg.hi, fraction=unit == "fraction") if like else None
            out.append(
                {
                    "paper": r.paper,
                    "setting": r.setting,
                    "method": r.method,
                    "model": r.model,
                    "dataset": r.dataset,
                    "metric": r.metric,
                    "unit": unit,
                    "reported": r.value,
                    "measured": agg.mean,
                    "measured_lo": agg.lo,
                    "measured_hi": agg.hi,
                    "diff": agg.mean - r.value if like else math.nan,
                    "agreement": verdict.verdict if verdict else "",
                    "power": verdict.power if verdict else math.nan,
                    "n": agg.n,
                    "measured_model": model,
                    "coverage": ", ".join(members) if paper_cover is not None else "",
                    "differs": "; ".join(differs),
                    "source": r.source,
                    "note": r.note,
                }
            )
    out += _shared_average_rows(out, boards, samples or {})
    return pd.DataFrame(out, columns=[c.key for c in REPORTED_COLUMNS])


SHARED_AVG = "avg_shared"
"""The ``dataset`` of a row averaging the datasets both the paper and our runs have for it."""
SHARED_AVG_NOTE = "mean over the datasets both sides have; the paper's side computed here from its numbers"

Samples = dict[str, dict[tuple[str, str, str], np.ndarray]]
"""metric -> (method, model, dataset) -> per-question values (:func:`reported_samples`)."""


def _shared_average_rows(rows: list[dict], boards: dict[str, Leaderboard], samples: Samples) -> list[dict]:
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        if r["measured_model"] and r["dataset"] not in PAPER_AVERAGES:
            key = (r["paper"], r["setting"], r["method"], r["model"], r["metric"], r["measured_model"])
            groups.setdefault(key, []).append(r)
    out = []
    for (_paper, _setting, method, _model, metric, ours), recs in groups.items():
        both = [r for r in recs if not _isnan(r["reported"]) and not _isnan(r["measured"])]
        names = order_datasets(sorted({r["dataset"] for r in both}))
        if len(names) < 2:
            continue
        by_name = {r["dataset"]: r for r in both}
        agg = _shared_aggregate(boards, samples, method, ours, metric, names)
        reported = float(np.mean([by_name[d]["reported"] for d in names]))
        like = all(not _isnan(by_name[d]["diff"]) for d in names)
        first = by_name[names[0]]
        differs = [d for d in str(first["differs"]).split("; ") if d and not d.startswith("coverage")]
        verdict = agreement(reported, agg.lo, agg.hi, fraction=first["unit"] == "fraction") if like else None
        out.append(
            {
                **first,
                "dataset": SHARED_AVG,
                "reported": reported,
                "measured": agg.mean,
                "measured_lo": agg.lo,
                "measured_hi": agg.hi,
                "diff": agg.mean - reported if like else math.nan,
                "agreement": verdict.verdict if verdict else "",
                "power": verdict.power if verdict else math.nan,
                "n": agg.n,
                "coverage": ", ".join(names),
                "differs": "; ".join(differs),
                "note": SHARED_AVG_NOTE,
            }
        )
    return out


def _shared_aggregate(
    boards: dict[str, Leaderboard], samples: Samples, method: str, model: str, metric: str, names: list[str]
) -> Aggregate:
    """Our unweighted mean over ``names`` with the leaderboard's interval for an average."""
    parts = metric_parts(metric)
    aggs = []
    for part in parts:
        board = boards[part]
        values = samples.get(part, {})
        per = [values.get((method, model, d)) for d in names]
        if all(v is not None and len(v) for v in per):
            aggs.append(macro_aggregate(per, binary=board.binary))  # type: ignore[arg-type]
        elif board.binary:  # k of n ones per dataset: the interval needs no more than that
            cells = [board.cells[(method, model, d)] for d in names]
            per01 = [np.r_[np.ones(round(c.mean * c.n)), np.zeros(c.n - round(c.mean * c.n))] for c in cells]
            aggs.append(macro_aggregate(per01, binary=True))
        else:
            cells = [board.cells[(method, model, d)] for d in names]
            aggs.append(
                Aggregate(
                    float(np.mean([c.mean for c in cells])), math.nan, math.nan, sum(c.n for c in cells)
                )
            )
    if len(aggs) == 1:
        return aggs[0]
    return Aggregate(float(np.mean([a.mean for a in aggs])), math.nan, math.nan, aggs[0].n)


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
    if unit in ("fraction", "%"):
        return f"{100 * value:{sign}.1f}"
    return f"{value:{sign}.2f}".rstrip("0").rstrip(".")


def interval_text(lo: float, hi: float, unit: str) -> str:
    """``[lo, hi]`` in the unit (% with one decimal); '' without an interval."""
    if _isnan(lo) or _isnan(hi):
        return ""
    return f"[{format_value(lo, unit)}, {format_value(hi, unit)}]"


@dataclass(frozen=True)
class PivotCell:
    """One cell of a reported pivot: the paper's number and, on a row of one of our models, ours
    with its 95% interval and n, and the difference when like with like."""

    unit: str
    reported: float = math.nan
    ours: float = math.nan
    lo: float = math.nan
    hi: float = math.nan
    n: int = 0
    diff: float = math.nan
    measured: bool = False  # a row of our model that has this dataset
    agreement: str = ""  # agrees / differs / inconclusive (harness.results.agreement), with a diff

    def ours_text(self) -> str:
        """``60.0 [31.3, 83.2] n=10``; '—' on a row of ours without a number here."""
        if _isnan(self.ours):
            return "—"
        return (
            " ".join(
                x
                for x in (format_value(self.ours, self.unit), interval_text(self.lo, self.hi, self.unit))
                if x
            )
            + f" n={self.n}"
        )

    def diff_text(self) -> str:
        return format_value(self.diff, self.unit, signed=True) or "—"

    def text(self) -> str:
        """One line for the exports: ``reported / ours [lo, hi] n=N / difference`` (the paper's
        number alone where we have no run of the dataset)."""
        rep = format_value(self.reported, self.unit)
        if not self.measured:
            return rep
        verdict = f" ({self.agreement})" if self.agreement else ""
        return f"{rep or '—'} / {self.ours_text()} / {self.diff_text()}{verdict}"


def column_label(key: str) -> str:
    """A pivot column's header: the dataset's name; ``Avg. (paper)`` for the paper's own averages;
    ``Avg. (shared sets)`` for :data:`SHARED_AVG`."""
    if key == SHARED_AVG:
        return "Avg. (shared sets)"
    if key in PAPER_AVERAGES:
        return f"{dataset_label(key)} (paper)"
    return dataset_label(key)


@dataclass(frozen=True)
class ReportedPivot:
    """One paper table and metric as the paper prints it: one row per paper row (method, paper
    model) and model of ours (all the paper's datasets in that row), one column per dataset, the
    paper's averages (its numbers only), then the average over the datasets both sides have."""

    paper: str
    setting: str
    metric: str
    unit: str
    source: str
    frame: pd.DataFrame  # method, model, ours, one text column per dataset (PivotCell.text), differs
    datasets: list[str]
    n_compared: int  # cells with a difference
    n_measured: int  # cells with an own number
    protocol_differs: str = ""  # corpus / retriever / top-k differences (the same for every row)
    cells: dict[tuple[int, str], PivotCell] = field(default_factory=dict)  # (row position, dataset)
    shared: str = ""  # the datasets of the shared average when every row has the same, else ''

    @property
    def title(self) -> str:
        unit = "in %" if self.unit in ("fraction", "%") else "raw counts"
        return f"{self.setting} · {metric_label(self.metric)} ({unit})"

    @property
    def labels(self) -> list[str]:
        return [column_label(d) for d in self.datasets]


def agrees(reported: float, lo: float, hi: float, *, fraction: bool = True) -> bool:
    """Our 95% interval lies within the margin of the paper's number (the equivalence test of
    :mod:`harness.results.agreement`); "inside our interval" is not agreement."""
    v = agreement(reported, lo, hi, fraction=fraction)
    return v is not None and v.verdict == AGREES


SUMMARY_COLUMNS = [
    "paper",
    "paper_rows",
    "with_ours",
    "comparable_rows",
    "compared",
    "agree",
    "differ",
    "inconclusive",
]
SUMMARY_LABELS = {
    "paper": "Paper",
    "paper_rows": "Paper rows",
    "with_ours": "Rows with our number",
    "comparable_rows": "Rows with a comparable number",
    "compared": "Comparable numbers",
    "agree": f"Agree (our 95% interval within ±{100 * MARGIN:.0f} points of the paper's)",
    "differ": "Differ (the paper's number outside our 95% interval)",
    "inconclusive": "Inconclusive (neither: too few questions)",
}


def reported_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per paper, from :func:`build_reported`'s table: its rows (one per table, method and model,
    as printed), how many have a number of ours, how many a comparable one (a difference), the
    comparable numbers and how many of them agree, differ or are inconclusive (:mod:`harness.results.agreement`). The shared averages are not
    counted (they repeat their datasets)."""
    out = []
    t = table[table["dataset"] != SHARED_AVG]
    for paper, g in t.groupby("paper", sort=True):
        key = ["setting", "method", "model"]
        rows = g.drop_duplicates(key)
        ours = g[g["measured"].notna()].drop_duplicates(key)
        comp = g[g["diff"].notna()]
        verdicts = Counter(str(v) for v in comp["agreement"])
        out.append(
            {
                "paper": paper,
                "paper_rows": len(rows),
                "with_ours": len(ours),
                "comparable_rows": len(comp.drop_duplicates(key)),
                "compared": len(comp),
                "agree": verdicts[AGREES],
                "differ": verdicts[DIFFERS],
                "inconclusive": verdicts[INCONCLUSIVE],
            }
        )
    return pd.DataFrame(out, columns=SUMMARY_COLUMNS)


def summary_html(summary: pd.DataFrame) -> str:
    """The cross-paper summary as a plain HTML table (``rar-reported rar-summary``)."""
    from html import escape

    out = ['<table class="rar-reported rar-summary">', "<thead><tr>"]
    out += [f"<th>{escape(SUMMARY_LABELS[c])}</th>" for c in SUMMARY_COLUMNS]
    out.append("</tr></thead><tbody>")
    for r in summary.to_dict("records"):
        out.append("<tr>" + "".join(f"<td>{escape(str(r[c]))}</td>" for c in SUMMARY_COLUMNS) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def registered_row_order() -> dict[tuple[str, str, str, str], int]:
    """``(paper, setting, method, model) -> position`` of each row in its paper's ``reported.yaml``
    (the paper's own row order)."""
    from leaderboards.reported_sync import registered_files

    out: dict[tuple[str, str, str, str], int] = {}
    for f in registered_files():
        for k in f.settings():  # file order: tables, then rows
            out.setdefault((f.paper, *k), len(out))
    return out


def reported_pivots(table: pd.DataFrame) -> list[ReportedPivot]:
    """The long ``build_reported`` table as one pivot per (paper, table, metric), in table order.
    (Plain Python over the records: a pandas group-by per pivot is ~50x slower on 2,000 rows.)

    A paper row is never split: a dataset we did not run fills the row of each of our models with
    the paper's number alone. Ours is never put in a paper-average cell (``avg``: the paper's
    seven sets); the :data:`SHARED_AVG` column compares the datasets both sides have."""
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for r in table.to_dict("records"):
        groups.setdefault((r["paper"], r["setting"], r["metric"]), []).append(r)
    protocol_level = ("corpus", "retriever", "top-k", "paper protocol")
    order = registered_row_order()
    out = []
    for (paper, setting, metric), recs in groups.items():
        unit = str(recs[0]["unit"])
        present = {r["dataset"] for r in recs}
        datasets = [
            *order_datasets(sorted(present - set(PAPER_AVERAGES) - {SHARED_AVG})),
            *(d for d in PAPER_AVERAGES if d in present),
            *([SHARED_AVG] if SHARED_AVG in present else []),
        ]
        by_row: dict[tuple[str, str], list[dict]] = {}
        for r in recs:
            by_row.setdefault((str(r["method"]), str(r["model"])), []).append(r)
        known = len(order)
        by_row = dict(
            sorted(by_row.items(), key=lambda kv: order.get((str(paper), str(setting), *kv[0]), known))
        )  # the paper's row order (rows the files do not list keep theirs, after)
        rows: list[dict[str, object]] = []
        cells: dict[tuple[int, str], PivotCell] = {}
        proto: list[str] = []
        shared_sets: set[str] = set()
        n_compared = n_measured = 0
        for (method, model), rrecs in by_row.items():
            ours_models = sorted({str(r["measured_model"]) for r in rrecs if r["measured_model"]}) or [""]
            for ours in ours_models:
                i = len(rows)
                row: dict[str, object] = {"method": method, "model": model, "ours": ours or "—"}
                seen: list[str] = []
                for d in datasets:
                    mine = [r for r in rrecs if r["dataset"] == d and r["measured_model"] == ours]
                    if ours and not mine and d == SHARED_AVG:
                        continue
                    paper_only = [r for r in rrecs if r["dataset"] == d]
                    if not mine and not paper_only:
                        continue
                    r = (mine or paper_only)[0]
                    measured = bool(mine) and bool(ours) and d not in PAPER_AVERAGES
                    cell = PivotCell(unit=unit, reported=r["reported"], measured=measured)
                    if measured:
                        cell = PivotCell(
                            unit=unit,
                            reported=r["reported"],
                            ours=r["measured"],
                            lo=r["measured_lo"],
                            hi=r["measured_hi"],
                            n=int(r["n"] or 0),
                            diff=r["diff"],
                            measured=True,
                            agreement=str(r.get("agreement") or ""),
                        )
                        n_measured += not _isnan(r["measured"])
                        n_compared += not _isnan(r["diff"])
                        if d == SHARED_AVG:
                            shared_sets.add(str(r["coverage"]))
                    if measured or not ours:  # this row's own record (coverage: a paper average vs ours)
                        seen += [
                            x
                            for x in str(r["differs"] or "").split("; ")
                            if x and not x.startswith("coverage") and x not in seen
                        ]
                    cells[(i, d)] = cell
                    row[d] = cell.text()
                proto += [x for x in seen if x.startswith(protocol_level) and x not in proto]
                detail = [x for x in seen if not x.startswith(protocol_level)]
                row["differs"] = (
                    (not_comparable(seen) + (f" ({'; '.join(detail)})" if detail else "")) if seen else ""
                )
                rows.append(row)
        frame = pd.DataFrame(rows, columns=["method", "model", "ours", *datasets, "differs"])
        out.append(
            ReportedPivot(
                paper=str(paper),
                setting=str(setting),
                metric=str(metric),
                unit=unit,
                source=str(recs[0]["source"]),
                frame=frame.fillna(""),
                datasets=datasets,
                n_compared=n_compared,
                n_measured=n_measured,
                protocol_differs="; ".join(proto),
                cells=cells,
                shared=(
                    ", ".join(dataset_label(x) for x in next(iter(shared_sets)).split(", "))
                    if len(shared_sets) == 1
                    else ""
                ),
            )
        )
    return out


def pivot_html(p: ReportedPivot) -> str:
    """The pivot as a plain HTML table for the app: every row shown (no inner scrolling), text
    wrapping inside its cell (no clipped column). A cell: the paper's number; ours with its 95%
    interval; n and ours − paper (``Δ``, or ``Δ —`` when not like with like). Our number is shown
    once per method, model of ours and column: a later paper row of the same method (another
    paper model) says "ours as above" beside its own Δ."""
    from html import escape

    head = ["method", "model (paper)", "model (ours)", *p.labels, "differs"]
    out = ['<table class="rar-reported">', "<thead><tr>"]
    out += [f"<th>{escape(h)}</th>" for h in head]
    out.append("</tr></thead><tbody>")
    shown: set[tuple] = set()
    for i, r in enumerate(p.frame.to_dict("records")):
        out.append("<tr>")
        out += [f'<td class="name">{escape(str(r[k]))}</td>' for k in ("method", "model", "ours")]
        for d in p.datasets:
            c = p.cells.get((i, d))
            if c is None:
                out.append("<td></td>")
                continue
            rep = format_value(c.reported, c.unit) or "—"
            if not c.measured:
                out.append(f'<td><span class="paper">{escape(rep)}</span></td>')
                continue
            ours = "—" if _isnan(c.ours) else format_value(c.ours, c.unit)
            ci = interval_text(c.lo, c.hi, c.unit)
            ci_html = f' <span class="ci">{escape(ci)}</span>' if ci else ""
            if _isnan(c.diff):
                delta = f"n={c.n} · Δ —"
                delta_html = f'<span class="meta">{escape(delta)}</span>'
            else:
                verdict = c.agreement or INCONCLUSIVE
                kind = "agrees" if verdict == AGREES else ("above" if c.diff > 0 else "below")
                mark = {AGREES: " ✓ agrees", DIFFERS: " ✗ differs"}.get(verdict, " ? inconclusive")
                delta_html = (
                    f'<span class="meta">n={c.n} · </span><span class="delta {kind}">Δ {escape(c.diff_text())}'
                    f"{mark}</span>"
                )
            once = (r["method"], r["ours"], d, ours, ci, c.n)
            ours_html = (
                '<span class="meta">ours as above</span>'
                if once in shown
                else f'<span class="ours">{escape(ours)}{ci_html}</span>'
            )
            shown.add(once)
            out.append(f'<td><span class="paper">{escape(rep)}</span><br>{ours_html}<br>{delta_html}</td>')
        out.append(f'<td class="differs">{escape(str(r["differs"]))}</td></tr>')
    out.append("</tbody></table>")
    return "".join(out)


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
    measured = table[table["measured"].notna() & table["differs"].astype(bool)]
    fields = Counter(
        field_of(x)
        for d in measured["differs"]
        for x in str(d).split("; ")
        if x and not x.startswith("coverage")
    )
    if fields:
        named = ", ".join(f for f, _ in fields.most_common())
        return (
            f"No row of ours is comparable with this paper's: their recorded settings differ in {named} "
            "(each row's differs column says how), so no difference is computed."
        )
    return (
        "The runs with the paper's model do not cover the same datasets as the paper's numbers "
        "(an average over other sets is not comparable), so no difference is computed."
    )


def reported_boards(store, protocol_id: str, reported: pd.DataFrame) -> dict[str, Leaderboard]:
    """One leaderboard per metric the reported numbers use that the protocol has values of, plus
    ``n_retrievals`` (search calls per question, from the samples) when a paper reports it."""
    return reported_data(store, protocol_id, reported)[0]


def reported_samples(store, protocol_id: str, reported: pd.DataFrame) -> Samples:
    """Per-question values behind :func:`reported_boards` (for the intervals of shared averages)."""
    return reported_data(store, protocol_id, reported)[1]


def reported_data(store, protocol_id: str, reported: pd.DataFrame) -> tuple[dict[str, Leaderboard], Samples]:
    """:func:`reported_boards` and :func:`reported_samples` from one query of each kind."""
    present = set(queries.metrics_present(store, protocol_id, complete_only=True))
    wanted = set(reported["metric"]) if len(reported) else set()
    wanted |= {p for m in wanted for p in metric_parts(m)}
    name = protocol_name(store, protocol_id)
    metrics = sorted(wanted & present)
    values = queries.latest_values(store, protocol_id, metrics, complete_only=True)
    frames = {m: values[values["metric"] == m] for m in metrics}
    if "n_retrievals" in wanted:
        c = queries.latest_costs(store, protocol_id, complete_only=True)
        if len(c):
            frames["n_retrievals"] = c.assign(
                protocol_id=protocol_id, protocol_name=name, metric="n_retrievals", value=c["retrievals"]
            )
    records = queries.run_records(store, sorted(set(values["run_id"])))
    boards = {
        m: build_leaderboard(v, protocol_id=protocol_id, protocol_name=name, metric=m, records=records)
        for m, v in frames.items()
    }
    samples: Samples = {
        m: {
            (str(me), str(mo), str(d)): g["value"].to_numpy(dtype=np.float64)
            for (me, mo, d), g in v.groupby(["method", "model", "dataset"], sort=False)
        }
        for m, v in frames.items()
    }
    return boards, samples


def resolve_paper(papers: list[str], name: str) -> str:
    """The paper of ``papers`` that ``name`` names (case, ``-`` for ``_`` ignored); a one-line
    ConfigError naming the near misses and every paper otherwise."""
    from harness.choices import did_you_mean
    from harness.errors import ConfigError

    norm = {p.lower().replace("-", "_"): p for p in papers}
    key = name.strip().lower().replace("-", "_")
    if key in norm:
        return norm[key]
    hint = did_you_mean(name, papers)
    raise ConfigError(f"--paper {name!r}: no such paper{hint}; papers: {', '.join(sorted(papers))}")


def default_paper(table: pd.DataFrame) -> str:
    """The paper the page opens on: one whose own method we ran (most cells with our number first),
    else the one with most cells with our number, else the first by name."""
    papers = sorted(set(table["paper"]))
    if not papers:
        raise ValueError("no published numbers")
    has = table[table["measured"].notna()]
    own = has[has["method"] == has["paper"]]
    for pool in (own, has):
        if len(pool):
            counts = has[has["paper"].isin(set(pool["paper"]))].groupby("paper").size()
            return str(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0])
    return papers[0]


__all__ = [
    "SUMMARY_COLUMNS",
    "SUMMARY_LABELS",
    "agrees",
    "registered_row_order",
    "reported_summary",
    "summary_html",
    "PAPER_SETTING",
    "PROTOCOL_FIELDS",
    "ReportedPivot",
    "registered_settings",
    "_isnan",
    "_measured",
    "_model_key",
    "build_reported",
    "column_label",
    "format_value",
    "interval_text",
    "metric_parts",
    "no_comparison_reason",
    "paper_protocol",
    "protocol_differences",
    "SHARED_AVG",
    "PivotCell",
    "Samples",
    "default_paper",
    "pivot_html",
    "reported_boards",
    "reported_data",
    "reported_samples",
    "resolve_paper",
    "reported_pivots",
]
