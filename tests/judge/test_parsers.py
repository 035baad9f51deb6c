"""Reply parsers and logit scores: every branch, on exact strings."""

from __future__ import annotations

import math

import pytest

from harness.judge.parsers import (
    JSON_VERDICT,
    TRUE_FALSE,
    TRUE_OR_YES,
    UNIT_FLOAT,
    YES_NO,
    Labels,
    ParsedReply,
    TokenLogprobs,
    logit_score,
)
from methods.arena.judge import ARENA_YES_NO
from methods.tiresrag_r1.judge import SUFFICIENCY_JSON


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (
            '{"rationale": "same city", "judgement": "correct"}',
            ParsedReply("ok", "correct", 1.0, "same city"),
        ),
        (
            '```json\n{"rationale": "r", "judgement": "Incorrect"}\n```',
            ParsedReply("ok", "incorrect", 0.0, "r"),
        ),
        # prose around it, the last verdict object wins, the US spelling is accepted
        (
            'Draft: {"judgement": "correct"} Final: {"judgment": "incorrect"}',
            ParsedReply("ok", "incorrect", 0.0),
        ),
        (
            '<think>{"judgement": "incorrect"}</think>{"judgement": "correct"}',
            ParsedReply("ok", "correct", 1.0),
        ),
        ("Yes, it is the same person.", ParsedReply("fallback_parse", "correct", 1.0)),
        ("**No**", ParsedReply("fallback_parse", "incorrect", 0.0)),
        ("Correct.", ParsedReply("fallback_parse", "correct", 1.0)),
        ('{"rationale": "r", "judgement": "partially"}', ParsedReply("unparseable", rationale="r")),
        ("The answer is correct.", ParsedReply("unparseable")),
        ('{"rationale": "no verdict"}', ParsedReply("unparseable")),
        ("", ParsedReply("empty")),
        ("  \n<think>hmm</think>  ", ParsedReply("empty")),
    ],
)
def test_json_verdict(reply, expected):
    assert JSON_VERDICT(reply) == expected


def test_first_word_parsers_are_strict():
    assert YES_NO("YES") == ParsedReply("ok", "correct", 1.0)
    assert YES_NO(" no.") == ParsedReply("ok", "incorrect", 0.0)
    assert YES_NO("Maybe YES") == ParsedReply("unparseable")
    assert YES_NO("YESTERDAY") == ParsedReply("unparseable")  # a word, not a prefix
    assert TRUE_FALSE("True") == ParsedReply("ok", "correct", 1.0)
    assert TRUE_FALSE("yes") == ParsedReply("unparseable")  # R1-Searcher asks for True/False only
    assert TRUE_OR_YES("yes") == ParsedReply("ok", "correct", 1.0)
    assert TRUE_OR_YES("False, because") == ParsedReply("ok", "incorrect", 0.0)
    assert TRUE_OR_YES("") == ParsedReply("empty")


def test_arena_rule_is_substring_yes_then_no():
    assert ARENA_YES_NO("The answer: yes") == ParsedReply("ok", "correct", 1.0)
    assert ARENA_YES_NO("I don't know") == ParsedReply("ok", "incorrect", 0.0)  # 'no' in 'know': its rule
    assert ARENA_YES_NO("Correct") == ParsedReply("unparseable")  # ARENA scores this 0.5; not here


def test_tiresrag_reward_parsers():
    reply = '### EXPLANATION\n...\n### JSON\n{ "Sufficient Context To The Given Answer": 1 }'
    assert SUFFICIENCY_JSON(reply) == ParsedReply("ok", "sufficient", 1.0)
    assert SUFFICIENCY_JSON('{"Sufficient Context To The Given Answer": 0}') == ParsedReply(
        "ok", "insufficient", 0.0
    )
    assert SUFFICIENCY_JSON("sufficient") == ParsedReply("unparseable")
    assert UNIT_FLOAT("<think>ok</think> 0.7") == ParsedReply("ok", None, 0.7)
    assert UNIT_FLOAT("1.5") == ParsedReply("unparseable")
    assert UNIT_FLOAT("0.7 because") == ParsedReply("unparseable")


def _tok(token, *alts):
    return TokenLogprobs(token, tuple((t, math.log(p)) for t, p in alts))


def test_logit_score_first_token():
    labels = Labels(("yes",), ("no",))
    toks = [_tok("Yes", ("Yes", 0.6), ("No", 0.2), ("The", 0.1), (" yes", 0.05)), _tok(".", (".", 1.0))]
    assert logit_score(toks, labels) == pytest.approx(0.65 / 0.85)
    # leading whitespace / markup tokens are skipped to the first word token
    toks = [_tok("**", ("**", 0.9)), _tok("No", ("No", 0.5), ("Yes", 0.5))]
    assert logit_score(toks, labels) == pytest.approx(0.5)
    assert logit_score([_tok("The", ("The", 0.9), ("A", 0.1))], labels) is None
    assert logit_score([], labels) is None


def test_logit_score_after_a_marker():
    labels = Labels(("correct",), ("incorrect",), after=r'"judge?ment"\s*:\s*"?')
    toks = [
        _tok('{"', ('{"', 1.0)),
        _tok("judgement", ("judgement", 1.0)),
        _tok('":', ('":', 1.0)),
        _tok(' "', (' "', 1.0)),
        _tok("in", ("in", 0.3), ("correct", 0.6), ("c", 0.05)),
        _tok("correct", ("correct", 1.0)),
    ]
    assert logit_score(toks, labels) == pytest.approx(0.65 / 0.95)
    assert logit_score(toks[:2], labels) is None  # the marker never completes
