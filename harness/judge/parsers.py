"""Turning a judge's reply into a verdict, and first-token probabilities into a score.

Every parser returns a :class:`ParsedReply` with a ``status``; a reply that does not say what the
prompt asked for is ``"unparseable"`` (or ``"empty"``), never silently scored 0 or 1. Thinking
blocks (``<think>...</think>``, Qwen3 and R1-style judges) are removed before parsing.

Statuses a verdict can carry (stored in ``judgements.status``):

* ``ok``: the reply says what the prompt asks for (scored);
* ``fallback_parse``: a JSON prompt answered with a plain label (``Yes``/``No``, ``Correct``/...)
  as its first word (scored, counted apart);
* ``unparseable``: anything else (not scored); ``truncated``: the same, and the reply hit the
  token limit (raise the prompt's ``max_tokens``); ``empty``: nothing but whitespace (not scored);
* ``timeout`` / ``error``: the request failed after its retries (not scored; asked again on the
  next pass);
* ``no_prediction``: an empty prediction, scored 0 without asking (as EM scores it; never stored);
* ``no_logprobs``: logit scoring was asked for, but neither label was among the first token's
  alternatives (or the server returned none): the verdict is kept, the score is not.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

JudgeStatus = Literal[
    "ok",
    "fallback_parse",
    "unparseable",
    "truncated",
    "empty",
    "timeout",
    "error",
    "no_prediction",
    "no_logprobs",
]
SCORED_STATUSES: frozenset[str] = frozenset({"ok", "fallback_parse", "no_prediction"})
# a failed request is transient: it is stored (and counted) but asked again on the next pass
RETRY_STATUSES: frozenset[str] = frozenset({"timeout", "error"})

CORRECT, INCORRECT = "correct", "incorrect"
VERDICT_SCORE = {CORRECT: 1.0, INCORRECT: 0.0}

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
_FIRST_WORD = re.compile(r"^[\W_]*([A-Za-z]+)")


@dataclass(frozen=True)
class ParsedReply:
    status: JudgeStatus
    verdict: str | None = None
    score: float | None = None
    rationale: str | None = None


@dataclass(frozen=True)
class Parser:
    """A named reply parser; the name goes into the prompt hash."""

    name: str
    fn: Callable[[str], ParsedReply]

    def __call__(self, text: str) -> ParsedReply:
        body = strip_think(text).strip()
        if not body:
            return ParsedReply("empty")
        return self.fn(body)


def strip_think(text: str) -> str:
    """The reply without complete ``<think>...</think>`` blocks."""
    return _THINK.sub("", text)


def first_word(text: str) -> str:
    """The first alphabetic word, lower-cased, after leading markup (``**``, quotes, ``#``...)."""
    m = _FIRST_WORD.match(text)
    return m.group(1).lower() if m else ""


def labelled(status: JudgeStatus, correct: bool, rationale: str | None = None) -> ParsedReply:
    """A verdict with its score: correct 1.0, incorrect 0.0."""
    verdict = CORRECT if correct else INCORRECT
    return ParsedReply(status, verdict, VERDICT_SCORE[verdict], rationale)


def _first_word_parser(positive: set[str], negative: set[str]) -> Callable[[str], ParsedReply]:
    def parse(body: str) -> ParsedReply:
        w = first_word(body)
        if w in positive:
            return labelled("ok", True)
        if w in negative:
            return labelled("ok", False)
        return ParsedReply("unparseable")

    return parse


_PLAIN_POSITIVE = {"yes", "correct", "true"}
_PLAIN_NEGATIVE = {"no", "incorrect", "false"}


def _json_objects(text: str) -> list[dict]:
    """Every JSON object that starts at a ``{`` in ``text`` (code fences and prose around it are fine)."""
    dec = json.JSONDecoder()
    out = []
    for m in re.finditer(r"\{", text):
        try:
            obj, _ = dec.raw_decode(text, m.start())
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


def _parse_json_verdict(body: str) -> ParsedReply:
    """``{"rationale": ..., "judgement": "correct"|"incorrect"}`` (the last such object wins);
    else a plain label as the first word (``fallback_parse``)."""
    for obj in reversed(_json_objects(body)):
        lowered = {str(k).lower(): v for k, v in obj.items()}
        if "judgement" not in lowered and "judgment" not in lowered:
            continue
        value = lowered.get("judgement", lowered.get("judgment"))
        rationale = lowered.get("rationale")
        rationale = rationale if isinstance(rationale, str) else None
        label = value.strip().lower() if isinstance(value, str) else ""
        if label in (CORRECT, INCORRECT):
            return labelled("ok", label == CORRECT, rationale)
        return ParsedReply("unparseable", rationale=rationale)
    w = first_word(body)
    if w in _PLAIN_POSITIVE:
        return labelled("fallback_parse", True)
    if w in _PLAIN_NEGATIVE:
        return labelled("fallback_parse", False)
    return ParsedReply("unparseable")


def _parse_unit_float(body: str) -> ParsedReply:
    """A bare number in [0, 1] (TIRESRAG-R1's thinking score). Anything else, including a number
    outside [0, 1], is unparseable (its code scores a failure 0 and does not clip)."""
    try:
        x = float(body)
    except ValueError:
        return ParsedReply("unparseable")
    if not (0.0 <= x <= 1.0) or math.isnan(x):
        return ParsedReply("unparseable")
    return ParsedReply("ok", None, x)


JSON_VERDICT = Parser("json_verdict.v1", _parse_json_verdict)
YES_NO = Parser("yes_no_first_word.v1", _first_word_parser({"yes"}, {"no"}))
TRUE_FALSE = Parser("true_false_first_word.v1", _first_word_parser({"true"}, {"false"}))
TRUE_OR_YES = Parser("true_yes_false_no_first_word.v1", _first_word_parser({"true", "yes"}, {"false", "no"}))
UNIT_FLOAT = Parser("unit_float.v1", _parse_unit_float)


# -- logit-weighted scores ---------------------------------------------------------------------
@dataclass(frozen=True)
class TokenLogprobs:
    """One generated token and the server's top alternatives at its position ``(text, logprob)``."""

    token: str
    top: tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class Labels:
    """Label words for logit scoring: probability mass on ``positive`` vs ``negative``.

    ``after``: a regex; the scored position is the first word token after its match in the reply
    (e.g. after ``"judgement": "``). None: the first word token of the reply."""

    positive: tuple[str, ...]
    negative: tuple[str, ...]
    after: str | None = None


_LETTERS = re.compile(r"[A-Za-z]+")


def _side(token: str, labels: Labels) -> int:
    """+1 if ``token`` starts a positive label only, -1 a negative one only, else 0."""
    m = _LETTERS.search(token)
    if m is None or token[: m.start()].strip(" \"'*`") != "":
        return 0
    t = m.group(0).lower()
    pos = any(lbl.startswith(t) for lbl in labels.positive)
    neg = any(lbl.startswith(t) for lbl in labels.negative)
    if pos and not neg:
        return 1
    if neg and not pos:
        return -1
    return 0


def logit_score(tokens: Sequence[TokenLogprobs], labels: Labels) -> float | None:
    """P(positive) / (P(positive) + P(negative)) over the alternatives at the label position;
    None when the position is not found or neither label is among the alternatives."""
    start = 0
    if labels.after is not None:
        text = "".join(t.token for t in tokens)
        m = re.search(labels.after, text)
        if m is None:
            return None
        start = m.end()
    pos = 0
    for t in tokens:
        end = pos + len(t.token)
        if end > start and _LETTERS.search(t.token[max(0, start - pos) :]):
            p_pos = sum(math.exp(lp) for s, lp in t.top if _side(s, labels) > 0)
            p_neg = sum(math.exp(lp) for s, lp in t.top if _side(s, labels) < 0)
            if p_pos + p_neg == 0.0:
                return None
            return p_pos / (p_pos + p_neg)
        pos = end
    return None
