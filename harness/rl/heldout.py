"""Held-out evaluation of training checkpoints, read from an eval run's stored samples.

``harness run`` scores a checkpoint on the held-out questions and stores per-question metrics;
:func:`heldout_report` reads them back as the numbers a learning run is judged by: EM with its
Wilson score interval (:func:`harness.metrics.bootstrap.wilson_ci`: EM is 0/1, and a percentile
bootstrap of 0 of 3 is [0, 0]), F1 with its percentile-bootstrap interval, the share of questions
answered, and a reward-hack guard over the predictions (normalised): the share of the most
frequent answer and the entropy (bits) of the answer distribution. A policy that collapses to one
string ("and" for every question) has a top-answer share near 1 and entropy near 0.

Two checkpoints are compared on the same questions only: :func:`paired_diff` is the paired
bootstrap (:func:`harness.metrics.paired.paired_bootstrap_diff`) of the per-question
difference, and refuses two reports over different question sets. :func:`template_majority` is
the trivial baseline every learning run is read against: for each question template (PopQA's
relation, ``qtype``) the commonest gold answer of the training split.

:func:`record_heldout` writes a report into ``train_steps`` of the training run (metrics
``heldout/*`` at the step of the checkpoint, with the paired difference against the run's
starting checkpoint when given), so the training page draws held-out EM per checkpoint beside the
reward curves.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from harness.errors import ConfigError
from harness.metrics.bootstrap import Aggregate, bootstrap_ci, wilson_ci
from harness.metrics.normalize import normalize_answer
from harness.metrics.paired import paired_bootstrap_diff
from harness.types import QAExample


@dataclass(frozen=True)
class AnswerStats:
    """Over ``n`` predictions: ``answered`` = share with a non-empty answer; ``top_answer`` the
    most frequent normalised non-empty answer and ``top_share`` its count / n; ``entropy_bits``
    of the distribution of normalised predictions (no answer counts as one outcome)."""

    n: int
    answered: float
    top_answer: str
    top_share: float
    entropy_bits: float


def answer_stats(predictions: Sequence[str | None]) -> AnswerStats:
    if not predictions:
        raise ConfigError("answer_stats of no predictions")
    norm = [normalize_answer(p) if p else "" for p in predictions]
    n = len(norm)
    counts = Counter(norm)
    answered = Counter(a for a in norm if a)
    top, top_n = answered.most_common(1)[0] if answered else ("", 0)
    entropy = -sum((c / n) * math.log2(c / n) for c in counts.values())
    return AnswerStats(
        n=n,
        answered=sum(answered.values()) / n,
        top_answer=top,
        top_share=top_n / n,
        entropy_bits=entropy + 0.0,  # no -0.0
    )


@dataclass(frozen=True)
class HeldoutReport:
    """One checkpoint's held-out scores: per question (``sample_ids``, ``predictions``,
    ``em_values``, ``f1_values``, aligned) and aggregated (``em`` with its Wilson interval, ``f1``
    with its bootstrap interval, ``answers``)."""

    run_id: str
    em: Aggregate
    f1: Aggregate
    answers: AnswerStats
    sample_ids: tuple[str, ...]
    predictions: tuple[str | None, ...] = ()
    em_values: tuple[float, ...] = ()
    f1_values: tuple[float, ...] = ()

    def metrics(self, prefix: str = "heldout/") -> dict[str, float]:
        a = self.answers
        return {
            f"{prefix}em": self.em.mean,
            f"{prefix}em_lo": self.em.lo,
            f"{prefix}em_hi": self.em.hi,
            f"{prefix}f1": self.f1.mean,
            f"{prefix}n": float(self.em.n),
            f"{prefix}answered": a.answered,
            f"{prefix}top_answer_share": a.top_share,
            f"{prefix}answer_entropy_bits": a.entropy_bits,
        }

    def line(self, label: str) -> str:
        a = self.answers
        return (
            f"{label}: EM {self.em.mean:.3f} [{self.em.lo:.3f}, {self.em.hi:.3f}] (n={self.em.n}, Wilson), "
            f"F1 {self.f1.mean:.3f}, answered {a.answered:.0%}, top answer {a.top_answer!r} "
            f"{a.top_share:.0%}, entropy {a.entropy_bits:.2f} bits"
        )


def report_from_rows(
    run_id: str,
    sample_ids: Sequence[str],
    predictions: Sequence[str | None],
    em: Sequence[float],
    f1: Sequence[float],
) -> HeldoutReport:
    """A report from per-question rows (an eval run's samples, or a committed record of them)."""
    n = len(sample_ids)
    if not n or not len(predictions) == len(em) == len(f1) == n:
        raise ConfigError(
            f"held-out rows of {run_id!r}: {n} ids, {len(predictions)} predictions, {len(em)} EM and "
            f"{len(f1)} F1 values (need the same non-zero number of each)"
        )
    if len(set(sample_ids)) != n:
        raise ConfigError(f"held-out rows of {run_id!r}: a question id occurs twice")
    preds = tuple(p if isinstance(p, str) else None for p in predictions)
    return HeldoutReport(
        run_id=run_id,
        em=wilson_ci([float(x) for x in em]),
        f1=bootstrap_ci([float(x) for x in f1]),
        answers=answer_stats(preds),
        sample_ids=tuple(sample_ids),
        predictions=preds,
        em_values=tuple(float(x) for x in em),
        f1_values=tuple(float(x) for x in f1),
    )


def heldout_report(store: Any, eval_run_id: str) -> HeldoutReport:
    """EM (Wilson) / F1 (bootstrap) intervals and the answer statistics of one eval run."""
    from harness.results.queries import scored_predictions

    df = scored_predictions(store, eval_run_id)
    if not len(df):
        raise ConfigError(f"eval run {eval_run_id!r} has no scored samples")
    return report_from_rows(
        eval_run_id, list(df["sample_id"]), list(df["prediction"]), list(df["em"]), list(df["f1"])
    )


def restrict(report: HeldoutReport, ids: Iterable[str]) -> HeldoutReport:
    """The report over the questions ``ids`` only (each must be one of its questions)."""
    keep = set(ids)
    missing = keep - set(report.sample_ids)
    if missing:
        raise ConfigError(
            f"restrict: {len(missing)} questions are not in {report.run_id!r}, e.g. {min(missing)!r}"
        )
    idx = [i for i, q in enumerate(report.sample_ids) if q in keep]
    return report_from_rows(
        report.run_id,
        [report.sample_ids[i] for i in idx],
        [report.predictions[i] for i in idx],
        [report.em_values[i] for i in idx],
        [report.f1_values[i] for i in idx],
    )


@dataclass(frozen=True)
class PairedDiff:
    """``b - a`` over the same questions: ``diff`` (mean with its paired-bootstrap 95% interval),
    ``b_only`` questions b gets right and a not, ``a_only`` the reverse (EM: the discordant pairs)."""

    metric: str
    diff: Aggregate
    b_only: int
    a_only: int

    def excludes_zero(self) -> bool:
        return self.diff.lo > 0 or self.diff.hi < 0


def paired_diff(a: HeldoutReport, b: HeldoutReport, metric: str = "em") -> PairedDiff:
    """The paired bootstrap of ``b - a`` on ``metric`` (``em`` | ``f1``), question by question;
    the two reports must cover exactly the same questions (else one ConfigError line)."""
    if metric not in ("em", "f1"):
        raise ConfigError(f"paired_diff: metric {metric!r} is not 'em' or 'f1'")
    if set(a.sample_ids) != set(b.sample_ids):
        raise ConfigError(
            f"paired_diff: {a.run_id!r} ({len(a.sample_ids)} questions) and {b.run_id!r} "
            f"({len(b.sample_ids)}) are not over the same questions; evaluate both on the same held-out ids"
        )
    va = dict(zip(a.sample_ids, getattr(a, f"{metric}_values"), strict=True))
    vb = dict(zip(b.sample_ids, getattr(b, f"{metric}_values"), strict=True))
    ids = sorted(va)
    xa, xb = [va[i] for i in ids], [vb[i] for i in ids]
    return PairedDiff(
        metric=metric,
        diff=paired_bootstrap_diff(xa, xb),
        b_only=sum(y > x for x, y in zip(xa, xb, strict=True)),
        a_only=sum(x > y for x, y in zip(xa, xb, strict=True)),
    )


def template_majority(train: Iterable[QAExample]) -> dict[str, str]:
    """Per question template (``qtype``: PopQA's relation), the commonest canonical gold answer
    (the first alias, normalised) among the training questions; ties go to the alphabetically
    first. Computed from the training split only."""
    counts: dict[str, Counter[str]] = {}
    for ex in train:
        if ex.qtype is None:
            raise ConfigError(f"template_majority: question {ex.id!r} ({ex.dataset}) has no qtype (template)")
        counts.setdefault(ex.qtype, Counter())[normalize_answer(ex.answers[0])] += 1
    return {t: min(c.items(), key=lambda kv: (-kv[1], kv[0]))[0] for t, c in counts.items()}


def template_majority_report(
    split: str, *, run_id: str = "template majority", data_dir: Any = None
) -> HeldoutReport:
    """The template-majority baseline of a split, scored on its held-out questions as ``harness
    run`` scores a prediction (EM and F1 of :mod:`harness.metrics.answer`). A held-out template the
    training part never shows gets no answer."""
    from harness.metrics.answer import exact_match, f1
    from harness.rl.split import split_examples

    majority = template_majority(split_examples(split, "train", data_dir))
    held = sorted(split_examples(split, "heldout", data_dir), key=lambda e: e.id)
    preds = [majority.get(e.qtype or "") for e in held]
    return report_from_rows(
        run_id,
        [e.id for e in held],
        preds,
        [exact_match(p, e.answers) if p else 0.0 for p, e in zip(preds, held, strict=True)],
        [f1(p, e.answers) if p else 0.0 for p, e in zip(preds, held, strict=True)],
    )


def record_heldout(
    store: Any, train_run_id: str, step: int, report: HeldoutReport, *, against: HeldoutReport | None = None
) -> dict[str, float]:
    """Write the report's ``heldout/*`` metrics into ``train_steps`` of ``train_run_id`` at ``step``;
    with ``against`` (the run's starting checkpoint, on the same questions) also the paired EM
    difference ``heldout/em_diff`` and its interval ``heldout/em_diff_lo`` .. ``heldout/em_diff_hi``."""
    m = report.metrics()
    if against is not None:
        d = paired_diff(against, report).diff
        m |= {"heldout/em_diff": d.mean, "heldout/em_diff_lo": d.lo, "heldout/em_diff_hi": d.hi}
    store.add_train_steps(train_run_id, step, m)
    return m


def record_baseline(store: Any, train_run_id: str, report: HeldoutReport) -> dict[str, float]:
    """Write a baseline's report (:func:`template_majority_report`) into ``train_steps`` of
    ``train_run_id`` as ``heldout/baseline/*`` at step 0: the training page shows it as a row of the
    held-out table, not as a checkpoint."""
    m = report.metrics(prefix="heldout/baseline/")
    store.add_train_steps(train_run_id, 0, m)
    return m
