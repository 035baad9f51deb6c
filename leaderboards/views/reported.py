"""Reported vs reproduced: the papers' published numbers beside ours, per paper table."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.metrics.bootstrap import Aggregate
from leaderboards import queries
from leaderboards.schema import (
    REPORTED_COLUMNS,
    is_fraction_metric,
    metric_label,
    order_datasets,
)
from leaderboards.views.common import _nan_aggregate, corpus_text, retriever_text
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


__all__ = [
    "ReportedPivot",
    "_isnan",
    "_measured",
    "_model_key",
    "build_reported",
    "format_value",
    "metric_parts",
    "no_comparison_reason",
    "paper_protocol",
    "protocol_differences",
    "reported_boards",
    "reported_pivots",
]
