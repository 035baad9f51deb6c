"""R-Search's "Acc" (``acc_substring_lower``): QingFei1/R-Search@ecba08d ``src/eval/utils.py:18-30``
``acc_score`` counts a prediction correct when ``any(ans.lower() in pred.lower() for ans in answer)``:
lower-casing only, no punctuation, article or whitespace normalisation (unlike ``cover_em``)."""

from __future__ import annotations

import pytest

from harness.metrics.answer import acc_substring_lower
from harness.metrics.registry import get_metric, score_answer


def upstream(pred: str, golds: list[str]) -> float:
    """utils.py:22-24, one question."""
    return 1.0 if any(ans.lower() in pred.lower() for ans in golds) else 0.0


@pytest.mark.parametrize(
    "pred,golds,acc,cover",
    [
        ("The U.S. Army", ["u.s."], 1.0, 1.0),
        ("us army", ["U.S."], 0.0, 1.0),  # cover_em strips the dots; Acc does not
        ("It was the Beatles.", ["Beatles"], 1.0, 1.0),
        ("the  beatles", ["The Beatles"], 0.0, 1.0),  # two spaces: not a substring before normalising
        ("party", ["art"], 1.0, 1.0),  # a substring, not a word
        ("Paris", ["Lyon", "paris"], 1.0, 1.0),  # any alias
        ("Paris", ["Lyon"], 0.0, 0.0),
    ],
)
def test_matches_upstream_and_differs_from_cover_em(pred, golds, acc, cover):
    assert acc_substring_lower(pred, golds) == upstream(pred, golds) == acc
    assert score_answer(pred, golds, ("acc_substring_lower", "cover_em")) == {
        "acc_substring_lower": acc,
        "cover_em": cover,
    }


def test_empty_prediction_and_empty_gold_score_zero():
    # upstream `"" in pred` is always true; our rule: an empty prediction or gold never counts
    assert acc_substring_lower("", ["Paris"]) == 0.0
    assert acc_substring_lower("anything", [""]) == 0.0 and upstream("anything", [""]) == 1.0


def test_registered_with_its_source():
    m = get_metric("acc_substring_lower")
    assert (m.version, m.kind, m.in_default_protocols) == ("1", "answer", False)
    assert "QingFei1/R-Search@ecba08d src/eval/utils.py:18-30" in m.source
