"""Bootstrap confidence intervals for aggregates (percentile method), vectorised with numpy.

Deterministic given the seed: the same values, ``n_resamples``, ``alpha`` and ``seed`` give the
same interval on any machine (numpy's PCG64 stream). Resamples are drawn in chunks of bounded size,
so 10k values x 1000 resamples never holds more than a few MB of indices.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

_CHUNK_ELEMENTS = 2_000_000  # indices drawn per chunk (8 MB of int32, and 16 MB of counts)
N_RESAMPLES = 1000  # every bootstrap's default
BY_CATEGORY_MIN_N = 20_000  # samples from which resample_means may draw counts by category
Z95 = 1.959963984540054  # the standard normal's 97.5% quantile


@dataclass(frozen=True)
class Aggregate:
    """A sample mean with its bootstrap interval ``[lo, hi]`` over ``n`` values."""

    mean: float
    lo: float
    hi: float
    n: int

    @property
    def half_width(self) -> float:
        return (self.hi - self.lo) / 2

    def to_dict(self) -> dict[str, float | int]:
        return {"mean": self.mean, "lo": self.lo, "hi": self.hi, "n": self.n}

    def __str__(self) -> str:
        return f"{self.mean:.4f} [{self.lo:.4f}, {self.hi:.4f}] (n={self.n})"


def _as_matrix(columns: Sequence[Sequence[float]] | np.ndarray) -> np.ndarray:
    m = np.asarray(columns, dtype=np.float64)
    if m.ndim != 2:
        raise ValueError("expected a 2-D array: one row of per-sample values per metric")
    if m.shape[1] == 0:
        raise ValueError("cannot aggregate zero values")
    if not np.all(np.isfinite(m)):
        raise ValueError("values contain NaN or infinity")
    return m


def _check(n_resamples: int, alpha: float) -> None:
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be at least 1, got {n_resamples}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")


def resample_means(
    matrix: Sequence[Sequence[float]] | np.ndarray, n_resamples: int = N_RESAMPLES, seed: int = 0
) -> np.ndarray:
    """The bootstrap distribution: ``(rows, n_resamples)`` means of each row of ``matrix`` (metrics x
    samples) over the same resamples of the samples (numpy's PCG64 stream from ``seed``). Every
    bootstrap here (intervals, :mod:`harness.metrics.paired`) draws through this one function.

    A resample is what its counts say (how often each sample was drawn: a multinomial draw), and one
    matrix product gives every metric's resampled sum at once. Two ways to draw the counts, chosen
    by the data alone:

    - **by index** (below ``BY_CATEGORY_MIN_N`` samples, or with many distinct samples): ``n``
      indices a resample, counted. Drawn as int32 where ``n`` allows: numpy draws a range under
      2**32 with the same 32-bit generator whatever the dtype, so these are the indices int64 (and
      every interval recorded before) would give. The means equal a gather's up to float rounding
      of the sum (exactly, for 0/1 metrics).
    - **by category** (``n >= BY_CATEGORY_MIN_N`` and at most ``n // 8`` distinct samples, a
      sample being its column of metric values: EM, cover-EM, F1 on short answers): the counts of
      each distinct sample, drawn at once as ``Multinomial(n, count_j / n)``. Resampling ``n``
      samples uniformly and then grouping them gives exactly this distribution, so the intervals
      equal the index draw's within Monte-Carlo error; the draws themselves differ. On 100,000
      answers (em, f1, cover_em) it costs a few hundredths of a second instead of about a second:
      the index draw's cost is ``n`` random numbers a resample, this one's the number of distinct
      samples. Chosen only for large ``n`` so that every interval on fewer samples (the records
      and tables already committed) keeps its draw."""
    _check(n_resamples, 0.05)
    m = _as_matrix(matrix)
    n = m.shape[1]
    rng = np.random.default_rng(seed)
    means = np.empty((m.shape[0], n_resamples), dtype=np.float64)
    grouped = _distinct_samples(m) if n >= BY_CATEGORY_MIN_N else None
    if grouped is not None:
        values, sizes = grouped  # distinct samples x metrics, and how many samples each stands for
        p = sizes / n
        chunk = max(1, _CHUNK_ELEMENTS // len(sizes))
        for start in range(0, n_resamples, chunk):
            stop = min(start + chunk, n_resamples)
            drawn = rng.multinomial(n, p, size=stop - start)
            means[:, start:stop] = (drawn @ values).T / n
        return means
    chunk = max(1, _CHUNK_ELEMENTS // n)
    dtype = np.int32 if n < 2**31 else np.int64
    values = np.ascontiguousarray(m.T)  # samples x metrics
    counts = np.empty((min(chunk, n_resamples), n), dtype=np.float64)
    for start in range(0, n_resamples, chunk):
        stop = min(start + chunk, n_resamples)
        idx = rng.integers(0, n, size=(stop - start, n), dtype=dtype)
        for i in range(stop - start):
            counts[i] = np.bincount(idx[i], minlength=n)
        means[:, start:stop] = (counts[: stop - start] @ values).T / n
    return means


def _distinct_samples(m: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The distinct columns of ``m`` (metrics x samples) as rows (distinct x metrics, in sorted
    order) with how often each occurs; None when there are more than ``n // 8`` of them. Each
    metric's values are coded by ``np.unique`` and the codes combined one metric at a time (the
    combined code is re-numbered after each, so it stays below ``n``)."""
    n = m.shape[1]
    limit = n // 8
    key = np.zeros(n, dtype=np.int64)
    for row in m:
        uniq, code = np.unique(row, return_inverse=True)
        if len(uniq) > limit:
            return None
        uniq, key = np.unique(key * len(uniq) + code, return_inverse=True)
        if len(uniq) > limit:
            return None
    _, first, sizes = np.unique(key, return_index=True, return_counts=True)
    return np.ascontiguousarray(m[:, first].T), sizes.astype(np.float64)


def bootstrap_matrix(
    matrix: Sequence[Sequence[float]] | np.ndarray,
    n_resamples: int = N_RESAMPLES,
    alpha: float = 0.05,
    seed: int = 0,
) -> list[Aggregate]:
    """One interval per row of ``matrix`` (metrics x samples), all rows sharing the same resamples."""
    _check(n_resamples, alpha)
    m = _as_matrix(matrix)
    means = resample_means(m, n_resamples, seed)
    lo = np.quantile(means, alpha / 2, axis=1)
    hi = np.quantile(means, 1 - alpha / 2, axis=1)
    point = m.mean(axis=1)
    return [Aggregate(float(point[i]), float(lo[i]), float(hi[i]), m.shape[1]) for i in range(m.shape[0])]


def bootstrap_ci(
    values: Sequence[float] | np.ndarray, n_resamples: int = N_RESAMPLES, alpha: float = 0.05, seed: int = 0
) -> Aggregate:
    """Mean of ``values`` with a ``1 - alpha`` percentile-bootstrap interval."""
    return bootstrap_matrix([values], n_resamples=n_resamples, alpha=alpha, seed=seed)[0]


def bootstrap_columns(
    columns: Mapping[str, Sequence[float]], n_resamples: int = N_RESAMPLES, alpha: float = 0.05, seed: int = 0
) -> dict[str, Aggregate]:
    """``{name: Aggregate}`` for several metrics over the same samples (shared resamples)."""
    names = list(columns)
    lengths = {len(columns[k]) for k in names}
    if len(lengths) > 1:
        raise ValueError(f"columns have different lengths: {sorted(lengths)}")
    aggs = bootstrap_matrix([columns[k] for k in names], n_resamples=n_resamples, alpha=alpha, seed=seed)
    return dict(zip(names, aggs, strict=True))


def wilson_ci(values: Sequence[float] | np.ndarray, alpha: float = 0.05) -> Aggregate:
    """Mean of 0/1 ``values`` with the ``1 - alpha`` Wilson score interval
    (``scipy.stats.binomtest(k, n).proportion_ci(method="wilson")``). For a 0/1 metric on few
    questions the percentile bootstrap degenerates: 0 of 3 gives [0, 0], Wilson [0, 0.561]."""
    from scipy.stats import binomtest

    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1 or len(v) == 0:
        raise ValueError(f"wilson_ci needs a non-empty 1-D array of 0/1 values, got shape {v.shape}")
    if not np.all((v == 0) | (v == 1)):
        raise ValueError("wilson_ci needs 0/1 values (a binary metric); use bootstrap_ci for others")
    _check(1, alpha)
    n, k = len(v), int(v.sum())
    ci = binomtest(k, n).proportion_ci(confidence_level=1 - alpha, method="wilson")
    return Aggregate(k / n, float(ci.low), float(ci.high), n)


def nan_aggregate() -> Aggregate:
    """No values: NaN mean and interval, n 0."""
    return Aggregate(math.nan, math.nan, math.nan, 0)


def is_binary(values: np.ndarray) -> bool:
    """Every value is 0 or 1 (EM, cover-EM, a judge's verdict)."""
    return bool(len(values)) and bool(np.all((values == 0) | (values == 1)))


def dataset_aggregate(
    values: np.ndarray, n_resamples: int = N_RESAMPLES, *, binary: bool = False
) -> Aggregate:
    """Mean of one dataset's per-question values with its 95% interval (Wilson when ``binary``);
    :func:`nan_aggregate` when there are none (every sample failed, or the dataset was not run)."""
    if not len(values):
        return nan_aggregate()
    if binary:
        return wilson_ci(values)
    return bootstrap_ci(values, n_resamples=n_resamples)


def macro_aggregate(
    per_dataset: list[np.ndarray], n_resamples: int = N_RESAMPLES, *, binary: bool = False
) -> Aggregate:
    """Unweighted mean of dataset means (the papers' "Avg."), with its 95% interval.

    0/1 values (``binary``): a stratified Agresti-Coull interval: Agresti & Coull's (1998) two added
    successes and two added failures, spread evenly over the D datasets (2/D of each per dataset),
    variances summed with weight 1/D^2, clipped to [0, 1]. Spread, the total adjustment is the
    single-sample one; added per dataset, it would pull the centre so far that the interval could
    miss its own score (four datasets at 4 of 4: 100 with [60, 90]). One dataset: Wilson.
    Otherwise the percentile bootstrap of the pooled questions, each weighted ``N / (D * n_d)`` so
    that every dataset counts equally, as in the point estimate."""
    sizes = [len(v) for v in per_dataset]
    if not per_dataset or min(sizes) == 0:
        return nan_aggregate()
    total, d = sum(sizes), len(per_dataset)
    exact = float(np.mean([v.mean() for v in per_dataset]))  # the same number without float drift
    if binary:
        if d == 1:
            return wilson_ci(per_dataset[0])
        add = 2 / d  # successes and failures added per dataset (see :func:`macro_aggregate`)
        tilde = [(v.sum() + add) / (len(v) + 2 * add) for v in per_dataset]
        var = sum(p * (1 - p) / (len(v) + 2 * add) for p, v in zip(tilde, per_dataset, strict=True)) / d**2
        centre, half = float(np.mean(tilde)), Z95 * math.sqrt(var)
        return Aggregate(exact, max(0.0, centre - half), min(1.0, centre + half), total)
    pooled = np.concatenate([v * (total / (d * len(v))) for v in per_dataset])
    agg = bootstrap_ci(pooled, n_resamples=n_resamples)
    return Aggregate(exact, agg.lo, agg.hi, total)
