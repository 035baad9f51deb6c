"""Two scorings of the same questions, compared question by question (``harness compare``).

A side is an evaluation run (its id) or a method's latest runs under one protocol (its name, as
the leaderboard shows it). Both sides must be under the same protocol and scored with the same
metric (:func:`harness.results.comparable.ours_differs`); the comparison is on the questions both
scored, per dataset and over every dataset both ran (each question weighted so that datasets count
equally, as the papers' "Avg."), with the board's paired test (:func:`harness.metrics.exact.
paired_exact`): exact McNemar for 0/1 metrics, the exact sign-flip test for other metrics while the
non-zero differences are few enough to enumerate, the seeded paired bootstrap above that.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from harness.errors import ConfigError
from harness.metrics.exact import paired_exact
from harness.metrics.paired import PairedTest
from harness.results import queries
from harness.results.comparable import ours_differs
from harness.results.store import Store
from harness.results.training_state import training_of

PER_QUESTION_COLUMNS = (
    "dataset",
    "sample_id",
    "question",
    "a_value",
    "b_value",
    "a_prediction",
    "b_prediction",
)


@dataclass(frozen=True)
class Side:
    """One side: ``spec`` as given, the method, model, protocol and the runs its values come from;
    ``values``: ``dataset, sample_id, question, prediction, value``."""

    spec: str
    method: str
    model: str
    protocol_id: str
    protocol_name: str
    run_ids: tuple[str, ...]
    values: pd.DataFrame
    training: str = ""  # harness.results.training_state: none, untrained, trained (<algorithm>)


@dataclass(frozen=True)
class Comparison:
    """``b - a`` on ``metric``: one paired test per dataset both scored and one over all of them
    (``overall``); ``changed``: the questions whose value differs (:data:`PER_QUESTION_COLUMNS`);
    ``only_one``: questions scored by one side only (left out of every test)."""

    a: Side
    b: Side
    metric: str
    per_dataset: list[tuple[str, PairedTest]]
    overall: PairedTest
    changed: pd.DataFrame
    only_one: int


def _side_of_run(store: Store, run: pd.Series, metric: str) -> Side:
    vals = queries.paired_values(store, [str(run["run_id"])], metric)
    return Side(
        spec=str(run["run_id"]),
        method=str(run["method"]),
        model=str(run["model"]),
        protocol_id=str(run["protocol_id"]),
        protocol_name=str(run["protocol_name"]),
        run_ids=(str(run["run_id"]),),
        values=vals,
    )


def _side_of_method(store: Store, spec: str, protocol_id: str, metric: str, model: str | None) -> Side:
    latest = queries.latest_runs(store, protocol_id, complete_only=True)
    mine = latest[latest["method"] == spec]
    if mine.empty:
        methods = ", ".join(sorted(set(latest["method"]))) or "none"
        raise ConfigError(
            f"{spec!r} is neither an evaluation run id in {store.path} nor a method with complete runs "
            f"under protocol {protocol_id}; methods there: {methods}"
        )
    if model is not None:
        mine = mine[mine["model"] == model]
        if mine.empty:
            raise ConfigError(f"no complete runs of {spec} with model {model!r} under protocol {protocol_id}")
    models = sorted(set(mine["model"]))
    if len(models) > 1:
        raise ConfigError(
            f"{spec} ran with several models under {protocol_id}: {', '.join(models)}; pick one with --model"
        )
    run_ids = tuple(sorted(set(mine["run_id"])))
    return Side(
        spec=spec,
        method=spec,
        model=models[0],
        protocol_id=protocol_id,
        protocol_name=str(mine.iloc[0]["protocol_name"]),
        run_ids=run_ids,
        values=queries.paired_values(store, list(run_ids), metric),
    )


def _default_metric(store: Store, protocol_id: str) -> str:
    from harness.metrics.registry import stored_metric_name

    raw = queries.protocol_json(store, protocol_id)
    proto = json.loads(raw) if raw else {}
    if "primary_metric" not in proto:
        raise ConfigError(f"protocol {protocol_id} records no primary metric; pass --metric")
    return stored_metric_name(proto["primary_metric"], proto["top_k"])


def resolve_sides(
    store: Store,
    spec_a: str,
    spec_b: str,
    *,
    metric: str | None = None,
    protocol: str | None = None,
    model: str | None = None,
) -> tuple[Side, Side, str]:
    """Both sides and the metric. A spec that is an evaluation run id is that run; otherwise a
    method's latest complete runs under ``protocol`` (an id or name; default: a run side's
    protocol, else the only one stored). ``metric`` default: the protocol's primary metric."""
    runs = {s: queries.eval_run(store, s) for s in (spec_a, spec_b)}
    pid = None
    if protocol is not None:
        pid = queries.choose_protocol(store, protocol)
    else:
        for df in runs.values():
            if not df.empty:
                pid = str(df.iloc[0]["protocol_id"])
                break
        if pid is None:
            pid = queries.choose_protocol(store, None)
    chosen = metric if metric is not None else _default_metric(store, pid)
    sides = []
    for spec in (spec_a, spec_b):
        df = runs[spec]
        sides.append(
            _side_of_run(store, df.iloc[0], chosen)
            if not df.empty
            else _side_of_method(store, spec, pid, chosen, model)
        )
    records = queries.run_records(store, [r for s in sides for r in s.run_ids])
    sides = [
        replace(
            s,
            training=" / ".join(sorted({str(training_of(s.method, records.get(r, {}))) for r in s.run_ids})),
        )
        for s in sides
    ]
    a, b = sides
    if a.spec == b.spec:
        raise ConfigError(f"RUN_A and RUN_B are the same ({a.spec}); compare two different runs or methods")
    reasons = ours_differs(a.protocol_id, b.protocol_id)
    if reasons:
        raise ConfigError(f"{a.spec} and {b.spec} are not comparable: {'; '.join(reasons)}")
    for s in (a, b):
        if s.values.empty:
            known = queries.metrics_present(store, s.protocol_id)
            raise ConfigError(
                f"{s.spec}: no values of metric {chosen!r}; metrics stored under {s.protocol_id}: "
                + (", ".join(known) or "none")
            )
    return a, b, chosen


def compare(a: Side, b: Side, metric: str, datasets: list[str] | None = None) -> Comparison:
    """The paired comparison of ``b`` against ``a`` on the questions both scored (of ``datasets``
    only, when given: e.g. the multi-hop average's three)."""
    key = ["dataset", "sample_id"]
    cols = [*key, "question", "prediction", "value"]
    va, vb = a.values[cols], b.values[cols]
    if datasets is not None:
        have = set(va["dataset"]) | set(vb["dataset"])
        unknown = [d for d in datasets if d not in have]
        if unknown:
            raise ConfigError(
                f"--datasets: {', '.join(unknown)} not scored by {a.spec} or {b.spec}; "
                f"they have {', '.join(sorted(have))}"
            )
        va, vb = va[va["dataset"].isin(datasets)], vb[vb["dataset"].isin(datasets)]
    both = va.merge(vb, on=key, how="outer", suffixes=("_a", "_b"), indicator=True)
    only_one = int((both["_merge"] != "both").sum())
    paired = both[both["_merge"] == "both"].reset_index(drop=True)
    if paired.empty:
        raise ConfigError(f"{a.spec} and {b.spec} scored no question in common; nothing to compare")
    datasets = list(dict.fromkeys(paired["dataset"]))
    per = []
    keys = list(zip(paired["dataset"].astype(str), paired["sample_id"].astype(str), strict=True))
    for d in datasets:
        g = paired[paired["dataset"] == d]
        gkeys = [keys[i] for i in g.index]
        per.append((d, paired_exact(g["value_a"].to_numpy(float), g["value_b"].to_numpy(float), keys=gkeys)))
    sizes = paired["dataset"].map(paired["dataset"].value_counts())
    weights = (len(paired) / (len(datasets) * sizes)).to_numpy(float)
    overall = paired_exact(
        paired["value_a"].to_numpy(float), paired["value_b"].to_numpy(float), keys=keys, weights=weights
    )
    diff = paired[np.abs(paired["value_a"] - paired["value_b"]) > 0]
    changed = pd.DataFrame(
        {
            "dataset": diff["dataset"],
            "sample_id": diff["sample_id"],
            "question": diff["question_a"],
            "a_value": diff["value_a"],
            "b_value": diff["value_b"],
            "a_prediction": diff["prediction_a"],
            "b_prediction": diff["prediction_b"],
        },
        columns=list(PER_QUESTION_COLUMNS),
    ).reset_index(drop=True)
    return Comparison(a, b, metric, per, overall, changed, only_one)


def write_per_question(c: Comparison, path: Path) -> None:
    """The changed questions to ``path``: CSV, or JSON Lines when it ends ``.jsonl``; the value and
    prediction columns are named by the sides (``a`` is RUN_A)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = c.changed.to_dict("records")
    if path.suffix == ".jsonl":
        with path.open("w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps({**r, "a": c.a.spec, "b": c.b.spec}, ensure_ascii=False) + "\n")
        return
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=["a", "b", *PER_QUESTION_COLUMNS])
        w.writeheader()
        for r in rows:
            w.writerow({"a": c.a.spec, "b": c.b.spec, **r})


__all__ = ["PER_QUESTION_COLUMNS", "Comparison", "Side", "compare", "resolve_sides", "write_per_question"]
