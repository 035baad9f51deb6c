"""Bootstrap intervals: determinism, coverage of the mean, width against theory, paired diffs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.metrics import Aggregate, bootstrap_ci, paired_bootstrap_diff
from harness.metrics.bootstrap import bootstrap_columns, bootstrap_matrix


def _binary(n: int, p: float, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).random(n) < p).astype(float)


def test_deterministic_given_seed() -> None:
    v = _binary(500, 0.4, seed=1)
    a, b = bootstrap_ci(v, seed=3), bootstrap_ci(list(v), seed=3)
    assert a == b
    c = bootstrap_ci(v, seed=4)
    assert c.mean == a.mean and (c.lo, c.hi) != (a.lo, a.hi)


def test_interval_contains_mean_and_is_ordered() -> None:
    for seed in range(5):
        v = _binary(300, 0.3 + 0.1 * seed, seed)
        agg = bootstrap_ci(v)
        assert agg.n == 300
        assert agg.mean == pytest.approx(v.mean(), abs=1e-15)
        assert agg.lo < agg.mean < agg.hi


def test_width_matches_the_normal_approximation_and_narrows_with_n() -> None:
    # For binary values the 95% half-width is close to 1.96 * sqrt(p (1-p) / n).
    widths = {}
    for n in (100, 10_000):
        v = np.array([1.0] * int(0.3 * n) + [0.0] * (n - int(0.3 * n)))
        agg = bootstrap_ci(v, n_resamples=2000)
        expected = 1.96 * math.sqrt(0.3 * 0.7 / n)
        assert agg.half_width == pytest.approx(expected, rel=0.15)
        widths[n] = agg.half_width
    assert widths[100] / widths[10_000] == pytest.approx(10.0, rel=0.2)


def test_constant_values_have_a_zero_width_interval() -> None:
    assert bootstrap_ci([1.0] * 50) == Aggregate(1.0, 1.0, 1.0, 50)
    assert bootstrap_ci([0.25]) == Aggregate(0.25, 0.25, 0.25, 1)


def test_alpha_controls_the_width() -> None:
    v = _binary(400, 0.5, seed=2)
    assert bootstrap_ci(v, alpha=0.5).half_width < bootstrap_ci(v, alpha=0.05).half_width


def test_chunked_resampling_is_independent_of_metric_count() -> None:
    v = _binary(3000, 0.5, seed=5)
    w = _binary(3000, 0.2, seed=6)
    both = bootstrap_matrix([v, w], n_resamples=1500)
    assert both[0] == bootstrap_ci(v, n_resamples=1500)
    assert both[1] == bootstrap_ci(w, n_resamples=1500)
    cols = bootstrap_columns({"em": v, "f1": w}, n_resamples=1500)
    assert cols == {"em": both[0], "f1": both[1]}


def test_paired_difference() -> None:
    a = _binary(1000, 0.5, seed=8)
    b = a.copy()
    b[:100] = 1.0  # b fixes some of a's mistakes and never breaks a right answer
    d = paired_bootstrap_diff(a, b)
    assert d == bootstrap_ci(b - a)
    assert d.mean == pytest.approx((b - a).mean(), abs=1e-15)
    assert 0.0 < d.lo < d.mean < d.hi
    same = paired_bootstrap_diff(a, a)
    assert same == Aggregate(0.0, 0.0, 0.0, 1000)
    shifted = paired_bootstrap_diff([0.1, 0.5, 0.2], [0.2, 0.6, 0.3])
    assert shifted.lo == pytest.approx(0.1, abs=1e-12) and shifted.hi == pytest.approx(0.1, abs=1e-12)


def test_paired_is_narrower_than_unpaired_for_correlated_scores() -> None:
    a = _binary(2000, 0.5, seed=9)
    b = a.copy()
    b[:60] = 1.0
    paired = paired_bootstrap_diff(a, b)
    unpaired_half_width = math.hypot(bootstrap_ci(a).half_width, bootstrap_ci(b, seed=1).half_width)
    assert paired.half_width < unpaired_half_width / 2


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: bootstrap_ci([]), "zero values"),
        (lambda: bootstrap_ci([0.1, float("nan")]), "NaN"),
        (lambda: bootstrap_ci([1.0], n_resamples=0), "n_resamples"),
        (lambda: bootstrap_ci([1.0], alpha=1.0), "alpha"),
        (lambda: paired_bootstrap_diff([1.0, 0.0], [1.0]), "equal length"),
        (lambda: bootstrap_columns({"a": [1.0], "b": [1.0, 0.0]}), "different lengths"),
    ],
)
def test_bad_input_raises(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


def _answers_like(n: int, seed: int) -> np.ndarray:
    """Metrics x samples shaped like answer scores: EM and cover-EM 0/1 (EM implies cover-EM), F1
    on a few fractions."""
    rng = np.random.default_rng(seed)
    em = (rng.random(n) < 0.3).astype(float)
    cover = np.maximum(em, (rng.random(n) < 0.4).astype(float))
    f1 = np.where(em == 1, 1.0, rng.choice([0.0, 0.25, 1 / 3, 0.5, 2 / 3, 0.8], size=n))
    return np.stack([em, f1, cover])


def test_distinct_samples_stand_for_every_sample() -> None:
    from harness.metrics.bootstrap import _distinct_samples

    m = _answers_like(30_000, seed=1)
    grouped = _distinct_samples(m)
    assert grouped is not None
    values, sizes = grouped
    assert np.array_equal(values, np.unique(m.T, axis=0))  # the distinct columns, sorted
    assert sizes.sum() == m.shape[1]
    assert np.array_equal(values[:, [0, 2]].T @ sizes, m[[0, 2]].sum(axis=1))  # 0/1 sums exactly
    assert values[:, 1] @ sizes == pytest.approx(m[1].sum(), rel=1e-12)
    # a metric with many distinct values (a judge's probability): no grouping, the index draw
    assert _distinct_samples(np.stack([m[0], np.random.default_rng(2).random(30_000)])) is None


def test_the_category_draw_has_the_index_draws_distribution() -> None:
    """From BY_CATEGORY_MIN_N samples with few distinct ones, resample_means draws each distinct
    sample's count (a multinomial) instead of n indices: other draws, the same distribution. Both
    are compared with the index draw (the gather of tests/metrics/test_score_many.py's helper)
    within Monte-Carlo error: 4,000 resamples each, so the bootstrap distribution's centre moves by
    about 1/60 of its spread and its 2.5%/97.5% quantiles by about 1/20."""
    from harness.metrics.bootstrap import BY_CATEGORY_MIN_N, resample_means

    n, r = BY_CATEGORY_MIN_N + 1, 4000
    m = _answers_like(n, seed=3)
    by_category = resample_means(m, r, seed=0)
    rng = np.random.default_rng(0)  # the index draw, as it was: the same seed rule
    by_index = np.stack([m[:, rng.integers(0, n, size=n)].mean(axis=1) for _ in range(r)], axis=1)
    assert not np.array_equal(by_category, by_index)  # the category draw was taken
    for got, want, row in zip(by_category, by_index, m, strict=True):
        spread = want.std()
        assert spread == pytest.approx(row.std() / math.sqrt(n), rel=0.1)  # the theory's spread
        assert got.std() == pytest.approx(spread, rel=0.1)
        assert abs(got.mean() - row.mean()) < 0.1 * spread
        for q in (0.025, 0.975):
            assert abs(np.quantile(got, q) - np.quantile(want, q)) < 0.3 * spread
    below = m[:, : BY_CATEGORY_MIN_N - 1]  # fewer samples: the index draw, as every recorded interval
    rng = np.random.default_rng(0)
    idx = rng.integers(0, below.shape[1], size=(3, below.shape[1]), dtype=np.int32)
    assert np.array_equal(resample_means(below, 3, seed=0)[0], below[0][idx].mean(axis=1))
