"""Paired comparisons of two scorings of the same questions: the one place the harness decides
whether two numbers differ beyond noise (the leaderboard's best and ``≈`` marks, ``harness
compare``, the regression gate, the training page).

Every method in a table answers the same questions, so the test is paired, never a comparison of
two intervals (two overlapping 95% intervals can still differ at 0.05: ircot 7 vs sure 0
discordant questions, p = 0.016, with overlapping Wilson intervals).

- 0/1 per-question values (em, cover_em, a judge's verdict): the exact McNemar test, the two-sided
  binomial test of the discordant counts at 1/2 (``scipy.stats.binomtest(b_better, b_better +
  a_better)``; statsmodels' ``mcnemar(..., exact=True)`` gives the same p). No discordant pair:
  p = 1.
- Other values (f1, judge scores): the paired percentile bootstrap of the mean difference
  (:func:`harness.metrics.bootstrap.resample_means`, seed 0: the same draws as
  ``scipy.stats.bootstrap(..., paired=True, method="percentile")``), its two-sided p the share of
  resampled differences on the far side of 0, doubled, with the usual +1 (``2 (min(#<=0, #>=0) + 1)
  / (B + 1)``, at most 1): p < alpha exactly when the (1 - alpha) interval excludes 0, up to the
  quantile's interpolation.

Both are per pair of rows, uncorrected for multiple comparisons; :func:`holm` adjusts a family of
p-values (Holm 1979, statsmodels' ``multipletests(method="holm")``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from harness.metrics.bootstrap import N_RESAMPLES, Aggregate, bootstrap_matrix, is_binary, resample_means

ALPHA = 0.05  # each pair's level, uncorrected
MCNEMAR = "exact McNemar"
BOOTSTRAP = "paired bootstrap"


@dataclass(frozen=True)
class PairedTest:
    """``b - a`` over ``n`` questions both scored: ``diff`` (the mean difference with its paired
    bootstrap 95% interval), ``p`` (two-sided, from ``test``), ``b_better`` / ``a_better`` (the
    questions where b scores higher / lower: for 0/1 values the discordant pairs)."""

    test: str
    n: int
    diff: Aggregate
    p: float
    b_better: int
    a_better: int

    def separated(self, alpha: float = ALPHA) -> bool:
        """Different at level ``alpha`` (uncorrected)."""
        return self.p < alpha

    def to_dict(self) -> dict[str, object]:
        return {
            "test": self.test,
            "n": self.n,
            "diff": self.diff.to_dict(),
            "p": self.p,
            "b_better": self.b_better,
            "a_better": self.a_better,
        }


def _pair(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    va = np.asarray(a, dtype=np.float64)
    vb = np.asarray(b, dtype=np.float64)
    if va.shape != vb.shape or va.ndim != 1:
        raise ValueError(
            f"paired values must be two 1-D arrays of equal length, got {va.shape} and {vb.shape}"
        )
    if len(va) == 0:
        raise ValueError("a paired comparison needs at least one question scored by both")
    return va, vb


def _weighted(d: np.ndarray, weights: Sequence[float] | np.ndarray | None) -> np.ndarray:
    """``d`` with each question weighted (``weights`` averaging 1, so the mean is unchanged in
    kind): an average over datasets weights question i of dataset k by ``N / (D n_k)``."""
    if weights is None:
        return d
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != d.shape:
        raise ValueError(f"weights must have one value per question: {w.shape} vs {d.shape}")
    return d * w


def mcnemar_exact(b_better: int, a_better: int) -> float:
    """The exact McNemar p-value (two-sided) of the discordant counts."""
    from scipy.stats import binomtest

    if b_better < 0 or a_better < 0:
        raise ValueError(f"discordant counts must be >= 0, got {b_better} and {a_better}")
    n = b_better + a_better
    return 1.0 if n == 0 else float(binomtest(b_better, n, 0.5).pvalue)


def bootstrap_p(means: np.ndarray) -> float:
    """The two-sided percentile-bootstrap p-value of a difference from its resampled means."""
    b = len(means)
    far = min(int(np.sum(means <= 0)), int(np.sum(means >= 0)))
    return min(1.0, 2 * (far + 1) / (b + 1))


def paired_bootstrap_diff(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    n_resamples: int = N_RESAMPLES,
    alpha: float = 0.05,
    seed: int = 0,
) -> Aggregate:
    """Mean of ``b - a`` over the same questions (paired), with its percentile-bootstrap interval.

    ``a[i]`` and ``b[i]`` must score the same question. An interval entirely below 0 means b is
    worse than a beyond resampling noise."""
    va, vb = _pair(a, b)
    return bootstrap_matrix([vb - va], n_resamples=n_resamples, alpha=alpha, seed=seed)[0]


def paired_test(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    *,
    weights: Sequence[float] | np.ndarray | None = None,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
    test: Literal["auto", "bootstrap"] = "auto",
) -> PairedTest:
    """``b`` against ``a`` on the same questions (``a[i]``, ``b[i]``: question i): exact McNemar
    when every value is 0 or 1, else the paired bootstrap. ``weights`` (an average over datasets)
    weight each question's difference in the mean and the bootstrap; McNemar counts the discordant
    pairs pooled over the datasets (the same test as the weighted mean when datasets have equal n).
    ``test="bootstrap"``: the paired bootstrap whatever the values (a per-question mean such as
    mean@k EM is not a 0/1 outcome even when every question's k samples agree)."""
    va, vb = _pair(a, b)
    d = _weighted(vb - va, weights)
    means = resample_means([d], n_resamples, seed)[0]
    lo, hi = np.quantile(means, [0.025, 0.975])
    diff = Aggregate(float(d.mean()), float(lo), float(hi), len(d))
    b_better, a_better = int(np.sum(vb > va)), int(np.sum(va > vb))
    if test == "auto" and is_binary(va) and is_binary(vb):
        return PairedTest(MCNEMAR, len(d), diff, mcnemar_exact(b_better, a_better), b_better, a_better)
    return PairedTest(BOOTSTRAP, len(d), diff, bootstrap_p(means), b_better, a_better)


def align(a: Mapping[str, float], b: Mapping[str, float]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The questions both runs scored (ids in ``a``'s order) and their values side by side."""
    ids = [k for k in a if k in b]
    return (
        ids,
        np.array([a[k] for k in ids], dtype=np.float64),
        np.array([b[k] for k in ids], dtype=np.float64),
    )


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (Holm 1979), in the input order: the i-th smallest p times
    ``m - i + 1``, made non-decreasing, capped at 1 (statsmodels ``multipletests(p,
    method="holm")[1]``). Reject at level alpha where the adjusted p < alpha."""
    p = np.asarray(pvalues, dtype=np.float64)
    if p.ndim != 1 or np.any((p < 0) | (p > 1)) or np.any(np.isnan(p)):
        raise ValueError(f"holm needs p-values in [0, 1], got {list(pvalues)}")
    m = len(p)
    order = np.argsort(p, kind="stable")
    adjusted = np.minimum(1.0, np.maximum.accumulate(p[order] * (m - np.arange(m))))
    out = np.empty(m)
    out[order] = adjusted
    return [float(x) for x in out]


__all__ = [
    "ALPHA",
    "BOOTSTRAP",
    "MCNEMAR",
    "PairedTest",
    "align",
    "bootstrap_p",
    "holm",
    "mcnemar_exact",
    "paired_bootstrap_diff",
    "paired_test",
]
