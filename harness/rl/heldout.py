"""Held-out evaluation of training checkpoints, read from an eval run's stored samples.

``harness run`` scores a checkpoint on the held-out questions and stores per-question metrics;
:func:`heldout_report` reads them back as the numbers a learning run is judged by: EM with its
bootstrap interval (:func:`harness.metrics.bootstrap.bootstrap_ci`, the leaderboard's), the share
of questions answered, and a reward-hack guard over the predictions (normalised): the share of the
most frequent answer and the entropy (bits) of the answer distribution. A policy that collapses to
one string ("and" for every question) has a top-answer share near 1 and entropy near 0.
:func:`record_heldout` writes them into ``train_steps`` of the training run (metrics
``heldout/*`` at the step of the checkpoint), so the training page draws held-out EM per
checkpoint beside the reward curves.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.errors import ConfigError
from harness.metrics.bootstrap import Aggregate, bootstrap_ci
from harness.metrics.normalize import normalize_answer


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
    run_id: str
    em: Aggregate
    f1: Aggregate
    answers: AnswerStats
    sample_ids: tuple[str, ...]

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
            f"{label}: EM {self.em.mean:.3f} [{self.em.lo:.3f}, {self.em.hi:.3f}] (n={self.em.n}), "
            f"F1 {self.f1.mean:.3f}, answered {a.answered:.0%}, top answer {a.top_answer!r} "
            f"{a.top_share:.0%}, entropy {a.entropy_bits:.2f} bits"
        )


def heldout_report(store: Any, eval_run_id: str) -> HeldoutReport:
    """EM / F1 with bootstrap intervals and the answer statistics of one eval run."""
    from harness.queries import scored_predictions

    df = scored_predictions(store, eval_run_id)
    if not len(df):
        raise ConfigError(f"eval run {eval_run_id!r} has no scored samples")
    return HeldoutReport(
        run_id=eval_run_id,
        em=bootstrap_ci(df["em"].to_numpy(dtype=float)),
        f1=bootstrap_ci(df["f1"].to_numpy(dtype=float)),
        answers=answer_stats([p if isinstance(p, str) else None for p in df["prediction"]]),
        sample_ids=tuple(df["sample_id"]),
    )


def record_heldout(store: Any, train_run_id: str, step: int, report: HeldoutReport) -> dict[str, float]:
    """Write the report's ``heldout/*`` metrics into ``train_steps`` of ``train_run_id`` at ``step``."""
    m = report.metrics()
    store.add_train_steps(train_run_id, step, m)
    return m
