"""The paired test the board, the exports and ``harness compare`` share: exact where it can be.

:func:`paired_exact` is the one entry point. On the same questions (``a[i]``, ``b[i]``: question i,
named by ``keys[i]``):

- 0/1 values: exact McNemar (:func:`harness.metrics.paired.paired_test`), exact at any n;
- other values (F1, judge scores) with at most :data:`EXACT_MAX_NONZERO` non-zero (weighted)
  differences: the exact paired permutation test, i.e. the sign-flip test of the mean difference
  (under "no difference" each difference is as likely positive as negative, so every one of the
  ``2^k`` sign patterns of the ``k`` non-zero differences is equally likely; p is the share whose
  ``|sum|`` reaches the observed one, two-sided). Enumerated by meet in the middle (the sums of the
  two halves' ``2^(k/2)`` patterns, one sorted and searched), so ``k = 30`` costs about 65,000
  sums, not a billion;
- above that: the seeded paired bootstrap of :func:`harness.metrics.paired.paired_test`.

Why by hand: scipy's ``permutation_test(permutation_type="samples")`` enumerates all ``2^n``
patterns (zeros included) and switches to random draws above ``n_resamples``; neither is exact at
n = 40 with 12 non-zero differences. At n = 10 the bootstrap is too liberal: on the showcase,
ircot vs direct on HotpotQA F1 had bootstrap p = 0.006 where the exact sign-flip p is 0.125 (5
non-zero differences, 4 of them one way).

Order: the values are sorted by ``keys`` first, so the bootstrap (above the exact range) and the
difference's interval draw the same resamples whoever calls (the board built its arrays in sample
position order and ``compare`` in merge order: 5 of 44 showcase pairs got different p).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from harness.metrics.paired import PairedTest, paired_test

EXACT_MAX_NONZERO = 30
"""The most non-zero paired differences the sign-flip test enumerates (2 x 2^15 half sums)."""
SIGN_FLIP = "exact sign-flip"


def _half_sums(d: np.ndarray) -> np.ndarray:
    """Every signed sum ``sum(s_i d_i)``, ``s_i = +-1``, over the ``2^len(d)`` sign patterns."""
    sums = np.zeros(1)
    for x in d:
        sums = np.concatenate([sums + x, sums - x])
    return sums


def sign_flip_p(diffs: Sequence[float] | np.ndarray) -> float:
    """The exact two-sided sign-flip p-value of the mean of ``diffs`` (paired differences; zeros
    carry no sign and are dropped): the share of the ``2^k`` sign patterns of the ``k`` non-zero
    differences whose ``|sum|`` is at least the observed ``|sum|``. No non-zero difference: 1.
    More than :data:`EXACT_MAX_NONZERO`: a ValueError (use :func:`paired_exact`)."""
    d = np.asarray(diffs, dtype=np.float64)
    d = d[d != 0]
    k = len(d)
    if k == 0:
        return 1.0
    if k > EXACT_MAX_NONZERO:
        raise ValueError(f"{k} non-zero differences: over the exact limit of {EXACT_MAX_NONZERO}")
    observed = abs(float(d.sum()))
    # a pattern's sum equal to the observed one up to rounding counts as reaching it
    tol = 1e-9 * max(1.0, float(np.abs(d).sum()))
    left, right = _half_sums(d[: k // 2]), np.sort(_half_sums(d[k // 2 :]))
    # |l + r| >= observed - tol  <=>  r >= observed - tol - l  or  r <= -(observed - tol) - l
    t = observed - tol
    upper = len(right) - np.searchsorted(right, t - left, side="left")
    lower = np.searchsorted(right, -t - left, side="right")
    # when t <= 0 every pattern reaches it; the two counts would overlap
    hits = np.where(t <= 0, len(right), np.minimum(len(right), upper + lower))
    return float(min(1.0, hits.sum() / (len(left) * len(right))))


def paired_exact(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    *,
    keys: Sequence[object] | None = None,
    weights: Sequence[float] | np.ndarray | None = None,
) -> PairedTest:
    """``b`` against ``a`` on the same questions, exact where the module docstring says: McNemar
    for 0/1 values, the sign-flip test for up to :data:`EXACT_MAX_NONZERO` non-zero differences,
    else the seeded paired bootstrap. ``keys`` (one per question, e.g. ``(dataset, sample_id)``)
    fix the order first, so every caller gets the same draws; ``weights``: an average over
    datasets (each question weighted ``N / (D n_d)``), applied to the differences the sign-flip
    test permutes as to the bootstrap's."""
    va, vb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    w = None if weights is None else np.asarray(weights, dtype=np.float64)
    if keys is not None:
        if len(keys) != len(va):
            raise ValueError(f"keys must name every question: {len(keys)} keys for {len(va)} values")
        order = sorted(range(len(va)), key=lambda i: tuple(map(str, _as_tuple(keys[i]))))
        va, vb = va[order], vb[order]
        w = None if w is None else w[order]
    t = paired_test(va, vb, weights=w)
    if t.test != "paired bootstrap":
        return t
    d = vb - va if w is None else (vb - va) * w
    if int(np.count_nonzero(d)) > EXACT_MAX_NONZERO:
        return t
    return PairedTest(SIGN_FLIP, t.n, t.diff, sign_flip_p(d), t.b_better, t.a_better)


def _as_tuple(k: object) -> tuple:
    return k if isinstance(k, tuple) else (k,)


__all__ = ["EXACT_MAX_NONZERO", "SIGN_FLIP", "paired_exact", "sign_flip_p"]
