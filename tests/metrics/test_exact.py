"""The exact paired test (:mod:`harness.metrics.exact`): the sign-flip p equals a brute-force
enumeration of every sign pattern, the bootstrap takes over above the limit, and the order the
questions arrive in does not change p or the interval."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from harness.metrics.exact import EXACT_MAX_NONZERO, SIGN_FLIP, paired_exact, sign_flip_p
from harness.metrics.paired import BOOTSTRAP, MCNEMAR


def _brute(d: np.ndarray) -> float:
    nz = d[d != 0]
    if not len(nz):
        return 1.0
    obs = abs(nz.sum())
    hits = sum(abs(np.dot(s, nz)) >= obs - 1e-9 for s in itertools.product([1, -1], repeat=len(nz)))
    return hits / 2 ** len(nz)


@pytest.mark.parametrize("seed", range(40))
def test_sign_flip_equals_brute_force_enumeration(seed) -> None:
    rng = np.random.default_rng(seed)
    d = rng.choice([-1.0, -0.5, 0.0, 0.25, 0.5, 1.0, 1 / 3], size=int(rng.integers(1, 13)))
    assert sign_flip_p(d) == pytest.approx(_brute(d), rel=1e-12)


def test_sign_flip_fixed_cases() -> None:
    assert sign_flip_p([0.5, 0.5, 0.5]) == pytest.approx(2 / 8)  # all one way: 2 of 8 as extreme
    assert sign_flip_p([0, 0, 0]) == 1.0
    assert sign_flip_p([1.0, -1.0]) == 1.0
    # the showcase's HotpotQA F1, ircot vs direct: 4 better, 1 worse; the bootstrap said 0.006
    assert sign_flip_p([1.0, 0.9, 0.8, 0.75, -0.0833]) == pytest.approx(4 / 32)


def test_paired_exact_picks_the_test() -> None:
    a01, b01 = np.array([0, 0, 1, 1, 0.0]), np.array([1, 1, 1, 0, 1.0])
    assert paired_exact(a01, b01).test == MCNEMAR
    a = np.array([0.2, 0.5, 0.0, 0.3])
    b = np.array([0.4, 0.5, 0.1, 0.9])
    t = paired_exact(a, b)
    assert t.test == SIGN_FLIP and t.p == pytest.approx(2 / 8)
    many = EXACT_MAX_NONZERO + 1
    t = paired_exact(np.zeros(many), np.linspace(0.1, 0.9, many))
    assert t.test == BOOTSTRAP


def test_order_of_the_questions_does_not_change_the_bootstrap() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.random(60), rng.random(60)
    keys = [("d", f"q{i:02d}") for i in range(60)]
    perm = rng.permutation(60)
    t1 = paired_exact(a, b, keys=keys)
    t2 = paired_exact(a[perm], b[perm], keys=[keys[i] for i in perm])
    assert t1.test == BOOTSTRAP and t1.p == t2.p and t1.diff == t2.diff
