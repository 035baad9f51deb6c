"""The fast paths of ``harness score`` give exactly the values of the plain definitions: block
normalisation (``normalize_many``), block scoring (``score_many``, each distinct gold normalised
once) and the counts-and-matrix-product bootstrap (the same indices as a gather)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from harness.metrics import answer
from harness.metrics.answer import AnswerPair, GoldMemo, score_many
from harness.metrics.bootstrap import bootstrap_matrix, resample_means
from harness.metrics.normalize import (
    normalize_answer,
    normalize_answer_r1searcher,
    normalize_many,
    normalize_many_r1searcher,
)

# strings where joining a block could go wrong: final sigma (context-dependent lower-casing),
# articles at the joins, the separator itself, whitespace only, booleans (R1-Searcher's mapping)
TRICKY = [
    "ΟΔΟΣ",
    "Σ",
    "aΣ",
    "a",
    "the",
    "The a an",
    "",
    "   ",
    "True",
    "False",
    "a\x00the",
    "x\x00",
    "U.S. Army",
    "\u2018Hamlet\u2019 an",
    "New_York the",
    "ÉCOLE Normale",
    "  Paris\t\nFrance  ",
    "!!!",
    "don\u00b4t",
]


def _random_strings(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    words = ["the", "a", "an", "Σ", "ΟΔΟΣ", "U.S.", "yes", "no", "True", "Paris", "x_y", "1,000", "‘q’", " "]
    return [
        "".join(rng.choice(words) + rng.choice(["", " ", "-", "."]) for _ in range(rng.randint(0, 6)))
        for _ in range(n)
    ]


@pytest.mark.parametrize("strings", [TRICKY, [s for s in TRICKY if "\x00" not in s], _random_strings(5000)])
def test_normalize_many_equals_one_at_a_time(strings: list[str]) -> None:
    assert normalize_many(strings) == [normalize_answer(s) for s in strings]
    assert normalize_many_r1searcher(strings) == [normalize_answer_r1searcher(s) for s in strings]


def test_score_many_equals_answer_pairs_for_every_metric() -> None:
    fns = list(answer._NEEDS)
    strings = TRICKY + _random_strings(3000, seed=1)
    rng = random.Random(2)
    preds = [rng.choice(strings) for _ in range(3000)]
    golds = [[rng.choice(strings) for _ in range(rng.randint(1, 4))] for _ in range(3000)]
    memo = GoldMemo()
    fast = score_many(preds[:1500], golds[:1500], fns, memo) + score_many(
        preds[1500:], golds[1500:], fns, memo
    )
    plain = [[fn(AnswerPair(p, g)) for fn in fns] for p, g in zip(preds, golds, strict=True)]
    assert fast == plain
    assert sum(v[0] for v in plain) > 0  # some exact matches: the comparison is not of zeros only


def test_score_many_keeps_its_memo_bounded(monkeypatch) -> None:
    monkeypatch.setattr(answer, "_MEMO_LIMIT", 10)
    memo = GoldMemo()
    golds = [[f"gold {i}", f"alias {i}"] for i in range(30)]
    values = score_many(
        [f"gold {i}" for i in range(30)], golds, [answer.em_pair, answer.cover_em_tokens_pair], memo
    )
    assert values == [[1.0, 1.0]] * 30
    assert len(memo.squad) <= 60 and len(memo.r1) <= 60
    assert score_many(["x"], [["x"] * 12], [answer.em_pair], memo) == [[1.0]]


def test_score_many_refuses_a_single_string_or_no_golds() -> None:
    with pytest.raises(TypeError, match="not a single string"):
        score_many(["x"], ["x"], [answer.em_pair])
    with pytest.raises(ValueError, match="golds is empty"):
        score_many(["x"], [[]], [answer.em_pair])


def _gather_means(m: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    """The bootstrap as it was: int64 indices, one gather per metric (chunks of 2M indices)."""
    n = m.shape[1]
    rng = np.random.default_rng(seed)
    out = np.empty((m.shape[0], n_resamples))
    chunk = max(1, 2_000_000 // n)
    for start in range(0, n_resamples, chunk):
        stop = min(start + chunk, n_resamples)
        idx = rng.integers(0, n, size=(stop - start, n))
        for r in range(m.shape[0]):
            out[r, start:stop] = m[r][idx].mean(axis=1)
    return out


@pytest.mark.parametrize("n", [1, 7, 5000, 100_003])
def test_resample_means_are_the_gathers_means(n: int) -> None:
    rng = np.random.default_rng(5)
    m = np.stack([(rng.random(n) < 0.4).astype(float), rng.random(n)])
    fast, slow = resample_means(m, 40, seed=3), _gather_means(m, 40, seed=3)
    assert np.array_equal(fast[0], slow[0])  # a 0/1 metric: the same sums exactly
    np.testing.assert_allclose(fast[1], slow[1], rtol=1e-12, atol=0)
    aggs = bootstrap_matrix(m, 40, seed=3)
    assert aggs[0].lo == np.quantile(slow[0], 0.025) and aggs[0].hi == np.quantile(slow[0], 0.975)
