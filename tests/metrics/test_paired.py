"""Paired tests (harness.metrics.paired) against scipy / statsmodels on fixed cases: exact McNemar,
the paired percentile bootstrap, Holm; all-concordant and tiny-n cases included."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest, bootstrap

from harness.metrics.paired import (
    BOOTSTRAP,
    MCNEMAR,
    bootstrap_p,
    holm,
    mcnemar_exact,
    paired_bootstrap_diff,
    paired_test,
)


def _rel(actual: float, expected: float, rel: float = 1e-12) -> None:
    assert abs(actual - expected) <= rel * max(abs(expected), 1e-300), (actual, expected)


def _pairs(b_only: int, a_only: int, both: int, neither: int) -> tuple[np.ndarray, np.ndarray]:
    a = [0] * b_only + [1] * a_only + [1] * both + [0] * neither
    b = [1] * b_only + [0] * a_only + [1] * both + [0] * neither
    return np.array(a, float), np.array(b, float)


@pytest.mark.parametrize(
    ("b_only", "a_only", "expected"),
    [
        (7, 0, 2 * 0.5**7),  # ircot vs sure on the 10-question showcase: 0.015625
        (9, 1, 2 * (1 + 10) / 2**10),  # ircot vs search_o1 there: 0.021484375
        (1, 0, 1.0),  # tiny n: one discordant pair proves nothing
        (2, 0, 0.5),
        (3, 3, 1.0),
        (0, 0, 1.0),  # all concordant
    ],
)
def test_mcnemar_is_the_exact_binomial_test_of_the_discordant_pairs(b_only, a_only, expected) -> None:
    a, b = _pairs(b_only, a_only, both=4, neither=5)
    t = paired_test(a, b)
    assert t.test == MCNEMAR
    assert (t.b_better, t.a_better, t.n) == (b_only, a_only, b_only + a_only + 9)
    _rel(t.p, expected)
    if b_only + a_only:
        _rel(t.p, binomtest(b_only, b_only + a_only, 0.5).pvalue)
    assert t.diff.mean == pytest.approx((b_only - a_only) / t.n, rel=1e-12, abs=0)
    assert t.separated() == (expected < 0.05)
    # the test is symmetric: swapping the runs swaps the counts, not p
    s = paired_test(b, a)
    assert (s.b_better, s.a_better) == (a_only, b_only) and s.p == t.p


def test_mcnemar_matches_statsmodels() -> None:
    sm = pytest.importorskip("statsmodels.stats.contingency_tables")
    for b_only, a_only in [(7, 0), (9, 1), (12, 5), (0, 0), (1, 0), (30, 18)]:
        table = [[4, b_only], [a_only, 5]]
        _rel(mcnemar_exact(b_only, a_only), float(sm.mcnemar(table, exact=True).pvalue))


def test_all_concordant_pairs_are_not_separated() -> None:
    a = np.array([1, 0, 1, 1, 0], float)
    t = paired_test(a, a.copy())
    assert (t.p, t.b_better, t.a_better, t.diff.mean, t.diff.lo, t.diff.hi) == (1.0, 0, 0, 0.0, 0.0, 0.0)
    f = np.array([0.2, 0.5, 0.9])
    u = paired_test(f, f.copy())
    assert u.test == BOOTSTRAP and u.p == 1.0 and (u.diff.lo, u.diff.hi) == (0.0, 0.0)


@pytest.mark.parametrize("n", [2, 5, 37, 400])
def test_paired_bootstrap_equals_scipy(n: int) -> None:
    rng = np.random.default_rng(n)
    a, b = rng.random(n), rng.random(n)
    ref = bootstrap(
        (a, b),
        lambda x, y, axis=-1: np.mean(y - x, axis=axis),
        paired=True,
        vectorized=True,
        method="percentile",
        n_resamples=1000,
        rng=np.random.default_rng(0),
    ).confidence_interval
    t = paired_test(a, b)
    assert t.test == BOOTSTRAP and t.n == n
    _rel(t.diff.lo, float(ref.low))
    _rel(t.diff.hi, float(ref.high))
    _rel(t.diff.mean, float(np.mean(b - a)))
    assert paired_bootstrap_diff(a, b) == t.diff  # the gate's and the training page's difference


def test_bootstrap_p_counts_the_far_side_of_zero() -> None:
    assert bootstrap_p(np.array([0.1, 0.2, 0.3])) == 2 * 1 / 4  # no resample at or below 0: (0+1)/(B+1)
    assert bootstrap_p(np.array([-0.1, 0.2, 0.3, 0.4])) == 2 * 2 / 5
    assert bootstrap_p(np.zeros(9)) == 1.0
    # consistent with the interval: a shift far from 0 is separated, a centred one not
    rng = np.random.default_rng(3)
    a = rng.random(200)
    assert paired_test(a, a + 0.05 + 0.01 * rng.standard_normal(200)).separated()
    assert not paired_test(a, a + 0.01 * rng.standard_normal(200)).separated()


def test_weights_give_the_macro_average_difference() -> None:
    # two datasets of 2 and 4 questions, each weighted N / (D n_d): the mean of the two means
    a = np.array([0.0, 0.0, 0.5, 0.5, 0.5, 0.5])
    b = np.array([1.0, 0.0, 0.5, 0.5, 0.5, 1.0])
    w = np.array([6 / 4] * 2 + [6 / 8] * 4)
    t = paired_test(a, b, weights=w)
    _rel(t.diff.mean, (0.5 + 0.125) / 2)


def test_holm_matches_the_step_down_rule() -> None:
    # sorted: 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 = 0.04 -> non-decreasing 0.06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02], rel=1e-12)
    assert holm([0.5, 0.9]) == [1.0, 1.0]
    assert holm([]) == []


def test_holm_matches_statsmodels() -> None:
    mt = pytest.importorskip("statsmodels.stats.multitest")
    p = [0.015625, 0.021484375, 0.2, 0.0003, 0.049, 1.0]
    assert holm(p) == pytest.approx(list(mt.multipletests(p, method="holm")[1]), rel=1e-12)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: paired_test([1.0, 0.0], [1.0]), "equal length"),
        (lambda: paired_test([], []), "at least one question"),
        (lambda: paired_test([0.1, 0.2], [0.3, 0.4], weights=[1.0]), "one value per question"),
        (lambda: holm([0.2, 1.5]), "p-values in [0, 1]"),
        (lambda: mcnemar_exact(-1, 2), ">= 0"),
    ],
)
def test_errors_are_one_line(call, message) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        call()
