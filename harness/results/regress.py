"""Score regression checks against a committed baseline (``harness regress``).

The baseline (``results/baseline.json``) holds, for every (method, model, protocol_id, dataset,
metric) of a small fixed run, the mean and the per-question values. ``compare`` pairs the current
latest run's values with the baseline's on the same questions and decides:

- ``FAIL``: the key is missing from the database, the current run lacks some of the baseline's
  questions, or the score dropped beyond noise: the paired-bootstrap 95% interval of
  ``current - baseline`` lies entirely below zero *and* the drop exceeds ``tolerance``. For an
  entry stored without per-question values, a drop of more than ``tolerance`` fails.
- ``improved``: the interval lies entirely above zero (passes; refresh with ``--update``).
- ``ok``: otherwise.
- ``new``: a key in the database that the baseline does not have (informational).

Besides one comparison per dataset, each (method, model, protocol, metric) with several datasets
gets a pooled comparison over all its questions (dataset ``all (pooled)``): a small CI run has few
questions per dataset, and a drop spread over datasets is only visible pooled.

A deterministic run (greedy decoding, fixed data) reproduces every value, so the gate is exact on
the same machine; on another machine small numeric differences flip a few answers both ways, and
the paired interval absorbs them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ValidationError

from harness.errors import ConfigError
from harness.metrics.bootstrap import Aggregate
from harness.metrics.paired import paired_bootstrap_diff
from harness.secrets import redact

BASELINE_FORMAT = 1
KEY = ("method", "model", "protocol_id", "dataset", "metric")
Verdict = Literal["ok", "improved", "new", "FAIL"]


class BaselineEntry(BaseModel):
    method: str
    model: str
    protocol_id: str
    protocol_name: str
    dataset: str
    metric: str
    n: int
    mean: float
    values: dict[str, float] | None = None  # sample_id -> value; None = compare means with the tolerance

    def key(self) -> tuple[str, ...]:
        return (self.method, self.model, self.protocol_id, self.dataset, self.metric)


class Baseline(BaseModel):
    format: int = BASELINE_FORMAT
    created_at: str
    tolerance: float = 0.0
    runs: dict[str, str] = {}  # run_id -> the command that produced it (provenance)
    reasons: list[str] = []  # one line per deliberate update (``--update --reason``), oldest first
    entries: list[BaselineEntry]

    @classmethod
    def load(cls, path: Path) -> Baseline:
        if not path.is_file():
            raise ConfigError(
                f"{path}: no baseline file; create it with `harness regress --update --against {path}`"
            )
        try:
            b = cls.model_validate_json(path.read_text())
        except (ValidationError, ValueError) as e:
            raise ConfigError(f"{path}: not a valid baseline file ({e}); recreate it with --update") from None
        if b.format != BASELINE_FORMAT:
            raise ConfigError(f"{path}: baseline format {b.format}, this harness reads {BASELINE_FORMAT}")
        return b

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.model_dump_json(indent=1) + "\n")


@dataclass(frozen=True)
class Comparison:
    method: str
    model: str
    protocol_id: str
    dataset: str
    metric: str
    n: int
    baseline: float | None
    current: float | None
    diff: Aggregate | None  # paired current - baseline with its interval
    verdict: Verdict
    detail: str = ""

    @property
    def delta(self) -> float | None:
        if self.diff is not None:
            return self.diff.mean
        if self.baseline is None or self.current is None:
            return None
        return self.current - self.baseline

    @property
    def failed(self) -> bool:
        return self.verdict == "FAIL"


def baseline_from_values(
    values: pd.DataFrame,
    *,
    tolerance: float = 0.0,
    runs: dict[str, str] | None = None,
    per_question: bool = True,
    reasons: list[str] | None = None,
) -> Baseline:
    """A baseline from :func:`leaderboards.queries.latest_values` rows."""
    entries = []
    for key, g in values.groupby(list(KEY), sort=True):
        method, model, protocol_id, dataset, metric = (str(x) for x in key)
        vals = {str(s): float(v) for s, v in zip(g["sample_id"], g["value"], strict=True)}
        entries.append(
            BaselineEntry(
                method=method,
                model=model,
                protocol_id=protocol_id,
                protocol_name=str(g["protocol_name"].iloc[0]),
                dataset=dataset,
                metric=metric,
                n=len(vals),
                mean=float(np.mean(list(vals.values()))),
                values=vals if per_question else None,
            )
        )
    return Baseline(
        created_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        tolerance=tolerance,
        # a committed file: no credentials, no paths of the machine that wrote it
        runs={run_id: portable_command(redact(command)) for run_id, command in (runs or {}).items()},
        reasons=list(reasons or []),
        entries=entries,
    )


def portable_command(command: str) -> str:
    """``command`` without the paths of the machine that ran it, for a committed baseline: the
    program becomes ``harness`` (also for ``python -m harness``), and every absolute or
    home-relative path keeps only its file name after ``<path>/``
    (``/tmp/ci-4/.tox/py/bin/harness run --db /tmp/x/ci.duckdb`` -> ``harness run --db <path>/ci.duckdb``)."""
    import shlex

    words = shlex.split(command)
    if len(words) >= 3 and words[1:3] == ["-m", "harness"]:
        words = ["harness", *words[3:]]
    elif words and Path(words[0]).name == "harness":
        words[0] = "harness"
    out = []
    for w in words:
        key, eq, value = w.partition("=") if w.startswith("--") else ("", "", w)
        if value.startswith(("/", "~")):
            value = f"<path>/{Path(value).name}"
        out.append(f"{key}{eq}{value}")
    return shlex.join(out)


def compare(
    baseline: Baseline,
    current: pd.DataFrame,
    *,
    tolerance: float | None = None,
    n_resamples: int = 2000,
    seed: int = 0,
    partial: pd.DataFrame | None = None,
) -> list[Comparison]:
    """Compare every baseline entry with the current latest values (same columns as ``latest_values``).

    ``partial``: the latest values including runs that did not end complete; a baseline key found
    only there fails with a detail naming those runs (it is never compared silently)."""
    tol = baseline.tolerance if tolerance is None else tolerance
    if tol < 0:
        raise ConfigError(f"tolerance must be >= 0, got {tol}")
    groups = (
        {tuple(str(x) for x in k): g for k, g in current.groupby(list(KEY), sort=False)}
        if len(current)
        else {}
    )
    out = []
    seen = set()
    for e in baseline.entries:
        seen.add(e.key())
        g = groups.get(e.key())
        if g is None:
            out.append(
                Comparison(
                    *_key(e),
                    n=e.n,
                    baseline=e.mean,
                    current=None,
                    diff=None,
                    verdict="FAIL",
                    detail=f"missing: no run of {e.method} ({e.model}) on {e.dataset} with {e.metric} "
                    f"under protocol {e.protocol_name} ({e.protocol_id}) in the database"
                    + (_only_partial(e, partial) or _other_protocols(e, groups)),
                )
            )
            continue
        cur = dict(zip(g["sample_id"].astype(str), g["value"].astype(float), strict=True))
        out.append(_compare_entry(e, cur, tol, n_resamples, seed))
    out.extend(_pooled(baseline, groups, tol, n_resamples, seed))
    for key, g in groups.items():
        if key not in seen:
            method, model, protocol_id, dataset, metric = key
            out.append(
                Comparison(
                    method,
                    model,
                    protocol_id,
                    dataset,
                    metric,
                    n=len(g),
                    baseline=None,
                    current=float(g["value"].mean()),
                    diff=None,
                    verdict="new",
                    detail="not in the baseline",
                )
            )
    return out


POOLED = "all (pooled)"


def _pooled(baseline: Baseline, groups: dict, tol: float, n_resamples: int, seed: int) -> list[Comparison]:
    """One more paired comparison per (method, model, protocol, metric) over the questions of all
    its datasets together: a small CI run has few questions per dataset, and a drop spread over
    datasets is only visible pooled."""
    by: dict[tuple[str, str, str, str], list[BaselineEntry]] = {}
    for e in baseline.entries:
        if e.values is not None:
            by.setdefault((e.method, e.model, e.protocol_id, e.metric), []).append(e)
    out = []
    for (method, model, protocol_id, metric), entries in sorted(by.items()):
        if len(entries) < 2:
            continue
        values = {f"{e.dataset}/{s}": v for e in entries for s, v in (e.values or {}).items()}
        pooled = BaselineEntry(
            method=method,
            model=model,
            protocol_id=protocol_id,
            protocol_name=entries[0].protocol_name,
            dataset=POOLED,
            metric=metric,
            n=len(values),
            mean=float(np.mean(list(values.values()))),
            values=values,
        )
        cur: dict[str, float] = {}
        for e in entries:
            g = groups.get(e.key())
            if g is not None:
                cur.update(
                    {
                        f"{e.dataset}/{s}": float(v)
                        for s, v in zip(g["sample_id"].astype(str), g["value"], strict=True)
                    }
                )
        out.append(_compare_entry(pooled, cur, tol, n_resamples, seed))
    return out


def _only_partial(e: BaselineEntry, partial: pd.DataFrame | None) -> str:
    """A note when the key exists only in runs that did not end complete."""
    if partial is None or partial.empty:
        return ""
    m = partial
    for col, v in zip(KEY, e.key(), strict=True):
        m = m[m[col].astype(str) == v]
    if m.empty:
        return ""
    runs = ", ".join(sorted(set(m["run_id"].astype(str))))
    return (
        f" that ended complete; only run {runs} has it, and it did not finish (killed, failed, or with "
        "failed samples): finish it with `harness run ... --resume`"
    )


def _other_protocols(e: BaselineEntry, groups: dict) -> str:
    """A hint when the same method, model, dataset and metric exist under other protocol ids."""
    others = sorted(
        {k[2] for k in groups if (k[0], k[1], k[3], k[4]) == (e.method, e.model, e.dataset, e.metric)}
    )
    if not others:
        return ""
    return (
        f"; it has them under protocol {', '.join(others)}: a protocol setting changed (corpus, retriever, "
        "selection, decoding or a metric version); if intended, rewrite the baseline with --update"
    )


def _key(e: BaselineEntry) -> tuple[str, str, str, str, str]:
    return (e.method, e.model, e.protocol_id, e.dataset, e.metric)


def _compare_entry(
    e: BaselineEntry, cur: dict[str, float], tol: float, n_resamples: int, seed: int
) -> Comparison:
    eps = 1e-12
    if e.values is None:
        current = float(np.mean(list(cur.values())))
        delta = current - e.mean
        verdict: Verdict = "FAIL" if delta < -tol - eps else ("improved" if delta > tol + eps else "ok")
        detail = (
            f"dropped {-delta:.4f} > tolerance {tol}"
            if verdict == "FAIL"
            else "means (no per-question values)"
        )
        return Comparison(
            *_key(e), n=len(cur), baseline=e.mean, current=current, diff=None, verdict=verdict, detail=detail
        )
    missing = [s for s in e.values if s not in cur]
    if missing:
        return Comparison(
            *_key(e),
            n=e.n,
            baseline=e.mean,
            current=None,
            diff=None,
            verdict="FAIL",
            detail=f"the current run lacks {len(missing)} of the baseline's {e.n} questions (e.g. {missing[0]})",
        )
    ids = list(e.values)
    base = np.array([e.values[s] for s in ids])
    now = np.array([cur[s] for s in ids])
    diff = paired_bootstrap_diff(base, now, n_resamples=n_resamples, seed=seed)
    changed = int(np.sum(base != now))
    if diff.hi < -eps and diff.mean < -tol - eps:
        verdict, detail = "FAIL", f"dropped beyond noise ({changed} questions changed)"
    elif diff.lo > eps:
        verdict, detail = (
            "improved",
            f"improved beyond noise ({changed} questions changed); refresh with --update",
        )
    else:
        verdict, detail = "ok", "identical" if changed == 0 else f"{changed} questions changed, within noise"
    return Comparison(
        *_key(e),
        n=len(ids),
        baseline=float(base.mean()),
        current=float(now.mean()),
        diff=diff,
        verdict=verdict,
        detail=detail,
    )


def table(comparisons: list[Comparison]) -> pd.DataFrame:
    """Every comparison as rows (failures first), the columns of the printed markdown table."""
    order = {"FAIL": 0, "improved": 1, "ok": 2, "new": 3}
    rows = []
    for c in sorted(
        comparisons, key=lambda c: (order[c.verdict], c.method, c.model, c.protocol_id, c.dataset, c.metric)
    ):
        rows.append(
            {
                "verdict": f"**{c.verdict}**" if c.failed else c.verdict,
                "method": c.method,
                "model": c.model,
                "protocol": c.protocol_id,
                "dataset": c.dataset,
                "metric": c.metric,
                "n": str(c.n),
                "baseline": _num(c.baseline),
                "current": _num(c.current),
                "delta": "" if c.delta is None else f"{c.delta:+.4f}",
                "95% CI (paired)": "" if c.diff is None else f"[{c.diff.lo:+.4f}, {c.diff.hi:+.4f}]",
                "detail": c.detail,
            }
        )
    return pd.DataFrame(rows, columns=list(TABLE_COLUMNS))


TABLE_COLUMNS = (
    "verdict",
    "method",
    "model",
    "protocol",
    "dataset",
    "metric",
    "n",
    "baseline",
    "current",
    "delta",
    "95% CI (paired)",
    "detail",
)


def markdown(comparisons: list[Comparison]) -> str:
    """A markdown table of every comparison (failures first)."""
    from harness.results.tables import markdown_table

    return markdown_table(table(comparisons))


def _num(x: float | None) -> str:
    return "" if x is None or math.isnan(x) else f"{x:.4f}"
