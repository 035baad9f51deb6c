"""Judging the predictions of stored runs, and how the judge agrees with EM and cover-EM.

:func:`judge_runs` judges every sample of the given runs (the cached verdicts are reused), writes
``judge@<model>:<hash>`` into ``sample_metrics`` for the scored ones, and returns the verdicts and
the agreement: per method x dataset and string metric, how many samples the judge calls correct
or incorrect while the metric says 1 or 0, and how many the judge did not score.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from harness.errors import ConfigError
from harness.judge.core import Judge, JudgeItem, JudgeOutcome
from harness.results import queries
from harness.results.store import Store

AGREEMENT_METRICS = ("em", "cover_em")


@dataclass(frozen=True)
class StoredSample:
    run_id: str
    method: str
    dataset: str
    sample_id: str
    question: str
    answers: tuple[str, ...]
    prediction: str
    response: str


@dataclass
class JudgeRunReport:
    metric: str
    judge_model: str
    run_ids: list[str]
    samples: list[StoredSample]
    outcome: JudgeOutcome
    metric_rows: int
    agreement: pd.DataFrame  # method, dataset, metric, n, judge_correct|incorrect x metric 1|0, not_scored
    scores: pd.DataFrame  # method, dataset, n, scored, judge (mean over scored)

    @property
    def status_counts(self) -> Counter[str]:
        return self.outcome.status_counts


def resolve_runs(
    store: Store, *, run_ids: Sequence[str] = (), method: str | None = None, bench: str | None = None
) -> list[str]:
    """``run_ids`` as given (each must exist), or the newest eval run of each method in ``method``
    (a comma list) on ``bench``."""
    if run_ids:
        missing = [r for r in run_ids if store.get_run(r) is None]
        if missing:
            raise ConfigError(f"{store.path}: no run {', '.join(missing)} (see `harness run` output)")
        return list(run_ids)
    if not method or not bench:
        raise ConfigError("name the runs to judge: --run RUN_ID, or --method M --bench B")
    out = []
    for m in [x.strip() for x in method.split(",") if x.strip()]:
        run_id = queries.newest_eval_run(store, m, bench)
        if run_id is None:
            raise ConfigError(f"{store.path}: no run of method {m!r} on bench {bench!r}")
        out.append(run_id)
    return out


def load_samples(store: Store, run_ids: Sequence[str]) -> list[StoredSample]:
    """The stored samples of ``run_ids`` to judge; failed samples (stored as errors) have no
    prediction and are left out, never judged as empty answers."""
    rows = queries.judgeable_samples(store, run_ids)
    return [
        StoredSample(
            run_id=r[0],
            method=r[1],
            dataset=r[2],
            sample_id=r[3],
            question=r[4] or "",
            answers=tuple(r[5] or ()),
            prediction=r[6] or "",
            response=r[7] or "",
        )
        for r in rows
    ]


def judge_runs(store: Store, run_ids: Sequence[str], judge: Judge) -> JudgeRunReport:
    """Judge every stored sample of ``run_ids``; write the scores; report agreement."""
    samples = load_samples(store, run_ids)
    use_response = judge.prompt.target == "response"
    items = [JudgeItem(s.question, s.answers, s.response if use_response else s.prediction) for s in samples]
    outcome = judge.judge(items)
    rows = [
        (s.run_id, s.dataset, s.sample_id, judge.metric_name, float(j.score))
        for s, j in zip(samples, outcome.judgements, strict=True)
        if j.scored and j.score is not None
    ]
    store.add_sample_metrics(rows)
    reference = _reference_metrics(store, run_ids)
    return JudgeRunReport(
        metric=judge.metric_name,
        judge_model=judge.model,
        run_ids=list(run_ids),
        samples=samples,
        outcome=outcome,
        metric_rows=len(rows),
        agreement=agreement(samples, outcome, reference),
        scores=_scores(samples, outcome),
    )


def _reference_metrics(store: Store, run_ids: Sequence[str]) -> dict[tuple[str, str, str, str], float]:
    df = queries.metric_values(store, run_ids, AGREEMENT_METRICS)
    return {(r.run_id, r.dataset, r.sample_id, r.metric): float(r.value) for r in df.itertuples(index=False)}


AGREEMENT_COLUMNS = [
    "method",
    "dataset",
    "metric",
    "n",
    "judge_correct_metric_1",
    "judge_correct_metric_0",
    "judge_incorrect_metric_1",
    "judge_incorrect_metric_0",
    "not_scored",
    "agreement",
]


def agreement(
    samples: Sequence[StoredSample],
    outcome: JudgeOutcome,
    reference: dict[tuple[str, str, str, str], float],
) -> pd.DataFrame:
    """Confusion counts of the judge's verdict (correct / incorrect / not scored) against each
    string metric (1 / 0), per method x dataset x metric; ``agreement`` is the share of scored
    samples where both agree. Samples without a verdict label (score-only prompts) are left out."""
    counts: dict[tuple[str, str, str], Counter[str]] = {}
    for s, j in zip(samples, outcome.judgements, strict=True):
        for metric in AGREEMENT_METRICS:
            ref = reference.get((s.run_id, s.dataset, s.sample_id, metric))
            if ref is None:
                continue
            c = counts.setdefault((s.method, s.dataset, metric), Counter())
            c["n"] += 1
            if not j.scored or j.verdict not in ("correct", "incorrect"):
                c["not_scored"] += 1
                continue
            c[f"judge_{j.verdict}_metric_{1 if ref >= 0.5 else 0}"] += 1
    rows = []
    for (method, dataset, metric), c in sorted(counts.items()):
        scored = c["n"] - c["not_scored"]
        agree = c["judge_correct_metric_1"] + c["judge_incorrect_metric_0"]
        rows.append(
            [method, dataset, metric, *(c[k] for k in AGREEMENT_COLUMNS[3:9])]
            + [agree / scored if scored else None]
        )
    return pd.DataFrame(rows, columns=AGREEMENT_COLUMNS)


def _scores(samples: Sequence[StoredSample], outcome: JudgeOutcome) -> pd.DataFrame:
    acc: dict[tuple[str, str], list[float | None]] = {}
    for s, j in zip(samples, outcome.judgements, strict=True):
        acc.setdefault((s.method, s.dataset), []).append(j.score if j.scored else None)
    rows = []
    for (method, dataset), vals in sorted(acc.items()):
        scored = [v for v in vals if v is not None]
        rows.append([method, dataset, len(vals), len(scored), sum(scored) / len(scored) if scored else None])
    return pd.DataFrame(rows, columns=["method", "dataset", "n", "scored", "judge"])
