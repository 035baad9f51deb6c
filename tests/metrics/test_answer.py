"""Exact values for every answer metric, including each quirk of the upstream code (FlashRAG@1ee5249
flashrag/evaluator/, Search-R1@a14dc3a qa_em.py, R1-Searcher@7822872 evaluation/metric_calc_rule.py)."""

from __future__ import annotations

import pytest

from harness.metrics import (
    cover_em,
    cover_em_tokens,
    exact_match,
    f1,
    f1_squad,
    normalize_answer,
    normalize_answer_r1searcher,
)

# ---------------------------------------------------------------- normalisation


@pytest.mark.parametrize(
    ("text", "squad", "r1"),
    [
        ("U.S.", "us", "u s"),  # punctuation deleted (SQuAD) vs replaced by a space (R1-Searcher)
        ("The Beatles", "beatles", "beatles"),  # articles removed
        ("an apple a day", "apple day", "apple day"),
        ("Theatre, then a thesis", "theatre then thesis", "theatre then thesis"),  # whole words only
        ("A-ha", "aha", "ha"),  # SQuAD joins "a-ha" to "aha"; R1 splits it and drops the article "a"
        ("\u2018Hamlet\u2019", "\u2018hamlet\u2019", "hamlet"),  # curly quotes survive SQuAD
        ("don\u00b4t", "don\u00b4t", "don t"),  # acute accent: kept by SQuAD, a space for R1
        ("New_York", "newyork", "new york"),  # underscore is ASCII punctuation
        ("1,000", "1000", "1 000"),
        ("  Paris\t\nFrance  ", "paris france", "paris france"),
        (
            "\u201cQuoted\u201d \u2013 dash",
            "\u201cquoted\u201d \u2013 dash",
            "\u201cquoted\u201d \u2013 dash",
        ),
        ("True", "true", "yes"),  # R1-Searcher maps the exact strings True/False
        ("False", "false", "no"),
        ("true", "true", "true"),  # ... case-sensitively
        ("True story", "true story", "true story"),  # ... and only the whole string
        ("!!!", "", ""),
        ("The The", "", ""),
        ("ÉCOLE Normale", "école normale", "école normale"),
    ],
)
def test_normalisers(text: str, squad: str, r1: str) -> None:
    assert normalize_answer(text) == squad
    assert normalize_answer_r1searcher(text) == r1


# ---------------------------------------------------------------- exact match


def test_em_articles_case_punctuation() -> None:
    assert exact_match("The Beatles", ["Beatles"]) == 1.0
    assert exact_match("U.S. Army", ["US army"]) == 1.0
    assert exact_match("Paris!", ["paris"]) == 1.0
    assert exact_match("Paris, France", ["Paris"]) == 0.0


def test_em_max_over_aliases() -> None:
    assert exact_match("NYC", ["New York City", "NYC"]) == 1.0
    assert exact_match("nyc", ["New York City", "Big Apple"]) == 0.0


def test_em_curly_quotes_are_not_punctuation() -> None:
    assert exact_match("\u2018Hamlet\u2019", ["Hamlet"]) == 0.0
    assert exact_match("'Hamlet'", ["Hamlet"]) == 1.0


def test_em_does_not_map_booleans() -> None:
    assert exact_match("True", ["yes"]) == 0.0


# ---------------------------------------------------------------- token F1


def test_f1_hand_computed() -> None:
    # pred "cat sat on mat" (4 tokens), gold "cat on mat" (3): common 3, P=3/4, R=1 -> 6/7
    assert f1("the cat sat on the mat", ["cat on mat"]) == pytest.approx(6 / 7, abs=1e-15)
    # repeated tokens count once per gold occurrence: common {new:1, york:1}, P=2/3, R=1 -> 0.8
    assert f1("new new york", ["New York"]) == pytest.approx(0.8, abs=1e-15)
    # P=1/2, R=1/3 -> 2PR/(P+R) = (1/3)/(5/6) = 0.4
    assert f1("Barack Obama", ["Obama Michelle LaVaughn"]) == pytest.approx(0.4, abs=1e-15)
    assert f1("Paris", ["London"]) == 0.0
    assert f1("the Paris", ["Paris"]) == 1.0


def test_f1_max_over_aliases_of_the_f1_itself() -> None:
    # gold "Obama": P=1/3, R=1 -> 0.5; gold "Barack Obama": P=2/3, R=1 -> 0.8
    assert f1("Barack Obama Jr", ["Obama", "Barack Obama"]) == pytest.approx(0.8, abs=1e-15)
    assert f1("Barack Obama Jr", ["Barack Obama", "Obama"]) == pytest.approx(0.8, abs=1e-15)


def test_f1_hotpotqa_yes_no_rule() -> None:
    # HotpotQA rule (FlashRAG F1_Score): prediction "no" vs gold "no way" is 0 with the rule, partial
    # credit without it
    assert f1("no", ["no way"]) == 0.0
    assert f1_squad("no", ["no way"]) == pytest.approx(2 / 3, abs=1e-15)  # P=1, R=1/2
    # a special gold needs an exact (normalised) match
    assert f1("yes it is", ["yes"]) == 0.0
    assert f1_squad("yes it is", ["yes"]) == pytest.approx(0.5, abs=1e-15)  # P=1/3, R=1
    assert f1("Yes.", ["yes"]) == 1.0
    assert f1("noanswer", ["no answer"]) == 0.0
    assert f1("noanswer", ["noanswer"]) == 1.0
    # the rule applies per alias; another alias can still score
    assert f1("no", ["yes", "No."]) == 1.0
    assert f1("no way", ["no", "no way jose"]) == pytest.approx(0.8, abs=1e-15)


def test_f1_curly_quotes_block_token_match() -> None:
    assert f1("\u2018Hamlet\u2019", ["Hamlet"]) == 0.0
    assert f1("\u2018Hamlet\u2019 play", ["\u2018Hamlet\u2019"]) == pytest.approx(2 / 3, abs=1e-15)


# ---------------------------------------------------------------- cover-EM (substring)


def test_cover_em_is_a_character_substring_test() -> None:
    assert cover_em("a party", ["art"]) == 1.0  # no word boundary: "art" in "party"
    assert cover_em("Paris, France", ["paris"]) == 1.0
    assert cover_em("It is the U.S.", ["US"]) == 1.0
    assert cover_em("york new", ["New York"]) == 0.0  # order and contiguity matter
    assert cover_em("\u2018Hamlet\u2019", ["Hamlet"]) == 1.0  # substring of "‘hamlet’"
    assert cover_em("London", ["Paris", "Lond"]) == 1.0  # max over aliases
    assert cover_em("new york city", ["New_York"]) == 0.0  # "newyork" is not in "new york city"


# ---------------------------------------------------------------- cover-EM tokens (R1-Searcher)


def test_cover_em_tokens_bag_of_tokens() -> None:
    assert cover_em_tokens("a party", ["art"]) == 0.0  # tokens, not characters
    assert cover_em_tokens("york new", ["New York"]) == 1.0  # any order
    assert cover_em_tokens("New, big York", ["new york"]) == 1.0  # not contiguous
    assert cover_em_tokens("new york city", ["New_York"]) == 1.0  # underscore -> space
    assert cover_em_tokens("U.S.", ["u s"]) == 1.0
    assert cover_em_tokens("us", ["U.S."]) == 0.0  # "u s" has tokens u and s
    assert cover_em_tokens("\u2018Hamlet\u2019", ["Hamlet"]) == 1.0  # curly quotes -> spaces
    assert cover_em_tokens("True", ["yes"]) == 1.0  # bool mapping, exact string only
    assert cover_em_tokens("true", ["yes"]) == 0.0
    assert cover_em_tokens("Paris", ["London", "paris"]) == 1.0


# ---------------------------------------------------------------- edge cases


@pytest.mark.parametrize("fn", [exact_match, f1, f1_squad, cover_em, cover_em_tokens])
def test_empty_prediction_scores_zero(fn) -> None:
    assert fn("", ["!!!"]) == 0.0
    assert fn("   \n", ["Paris"]) == 0.0


@pytest.mark.parametrize("fn", [exact_match, f1, f1_squad, cover_em, cover_em_tokens])
def test_empty_golds_raise(fn) -> None:
    with pytest.raises(ValueError, match="golds is empty"):
        fn("Paris", [])
    with pytest.raises(TypeError, match="not a single string"):
        fn("Paris", "Paris")


def test_gold_that_normalises_to_empty() -> None:
    # Real HotpotQA answers "!!!" and "The The" normalise to "". Upstream cover-EM (`"" in pred`)
    # would mark every prediction correct; ours only covers a prediction that is also "".
    assert cover_em("anything at all", ["!!!"]) == 0.0
    assert cover_em("!!!", ["!!!"]) == 1.0
    assert cover_em_tokens("anything at all", ["The The"]) == 0.0
    assert cover_em_tokens("The The", ["the the"]) == 1.0
    assert exact_match("The The", ["The The"]) == 1.0  # both "" -> equal, as in SQuAD
    assert exact_match("anything", ["!!!"]) == 0.0
    assert f1("The The", ["The The"]) == 0.0  # no tokens -> 0, as every upstream F1
    assert cover_em("The The", ["The The band"]) == 0.0  # gold "band" is not in ""
    assert cover_em("The The", ["!!!"]) == 1.0
