"""Named, versioned judge prompts: the harness default, and the registry the papers' own join.

A :class:`JudgePrompt` fixes everything that decides a verdict: the system and user texts, how the
fields are filled from (question, golds, prediction), the reply parser, the token limit and
whether logit scoring is used. Its ``prompt_hash`` (8 hex of sha256 over all of these) goes into
the metric name ``judge@<model>:<hash>`` and the cache key, so a changed prompt is a new metric.

Placeholders are ``{name}`` for the names the prompt's fill function returns; every other brace is
literal text (JSON examples need no escaping), and substituted values are never re-substituted.

Registered prompts (``harness judge --list-prompts``: :func:`describe_prompts`):

* ``default``: the harness judge in the ReSearch style (question, the full gold list, the
  prediction; a JSON verdict with a rationale; plain Yes/No accepted as ``fallback_parse``).
* ``r1_searcher``: R1-Searcher's True/False prompt (``evaluation/metric_calc_gpt_as_judge.py``),
  a judge of the field that no method here trains with.
* a paper's own prompts, verbatim, in its folder (``methods/<paper>/judge.py``), registered from
  its manifest (``PLUGIN = Plugin(judge_prompts={...})``) on first use.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from harness import plugins
from harness.errors import ConfigError
from harness.judge.parsers import JSON_VERDICT, TRUE_FALSE, Labels, Parser
from harness.metrics.normalize import r1searcher_bool_mapping
from harness.registry import Registry

Fields = dict[str, str]


@dataclass(frozen=True)
class Fill:
    """A named function (question, golds, text) -> the template's fields; the name is hashed."""

    name: str
    fn: Callable[[str, Sequence[str], str], Fields]

    def __call__(self, question: str, golds: Sequence[str], text: str) -> Fields:
        return self.fn(question, golds, text)


@dataclass(frozen=True)
class JudgePrompt:
    """One judge prompt. ``target``: what the judged text is, the extracted ``prediction`` or the
    whole ``response`` (trajectory judges). ``labels``: the label words for logit scoring (None:
    the prompt cannot be logit-scored). ``scoring="logit"`` (see :meth:`with_logit_scoring`) makes
    the score P(positive label) from the server's log-probabilities instead of 1/0."""

    id: str
    version: str
    system: str | None
    user_template: str
    parser: Parser
    fill: Fill
    source: str
    target: Literal["prediction", "response"] = "prediction"
    max_tokens: int = 256
    json_mode: bool = False
    labels: Labels | None = None
    scoring: Literal["verdict", "logit"] = "verdict"
    notes: str = ""

    @property
    def prompt_hash(self) -> str:
        blob = json.dumps(
            {
                "system": self.system,
                "user": self.user_template,
                "parser": self.parser.name,
                "fill": self.fill.name,
                "max_tokens": self.max_tokens,
                "json_mode": self.json_mode,
                "scoring": self.scoring,
                "labels": dataclasses.asdict(self.labels)
                if self.scoring == "logit" and self.labels
                else None,
            },
            sort_keys=True,
            ensure_ascii=False,
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:8]

    @property
    def name(self) -> str:
        """``id`` plus ``+logit`` when logit-scored (stored as ``judgements.prompt_id``)."""
        return f"{self.id}+logit" if self.scoring == "logit" else self.id

    def with_logit_scoring(self) -> JudgePrompt:
        if self.labels is None:
            raise ConfigError(f"judge prompt {self.id!r} has no label words, so it cannot be logit-scored")
        return dataclasses.replace(self, scoring="logit")

    def messages(self, question: str, golds: Sequence[str], text: str) -> list[dict[str, str]]:
        """The chat messages for one item."""
        fields = self.fill(question, golds, text)
        user = _substitute(self.user_template, fields)
        out = [] if self.system is None else [{"role": "system", "content": self.system}]
        out.append({"role": "user", "content": user})
        return out


def _substitute(template: str, fields: Fields) -> str:
    names = "|".join(re.escape(k) for k in sorted(fields, key=len, reverse=True))
    used = set(re.findall(r"\{(" + names + r")\}", template)) if fields else set()
    missing = set(fields) - used
    if missing:
        raise ConfigError(f"judge template lacks the placeholder(s) {sorted(missing)}")
    return re.sub(r"\{(" + names + r")\}", lambda m: fields[m.group(1)], template)


# -- fills ---------------------------------------------------------------------------------------
def _plain(question: str, golds: Sequence[str], text: str) -> Fields:
    return {"question": question, "golds": json.dumps(list(golds), ensure_ascii=False), "prediction": text}


def _r1_searcher(question: str, golds: Sequence[str], text: str) -> Fields:
    # the code formats the dataset's answer field as is (a string; a list would print as a Python
    # list) after mapping boolean golds to "yes"/"no" (SsmallSong/R1-Searcher@7822872
    # evaluation/metric_calc_gpt_as_judge.py)
    mapped = [r1searcher_bool_mapping(g) for g in golds]
    reference = mapped[0] if len(mapped) == 1 else str(mapped)
    return {"question": question, "reference": reference, "prediction": text}


PLAIN = Fill("plain.v1", _plain)
R1_SEARCHER_FILL = Fill("r1_searcher_reference.v1", _r1_searcher)

YES_NO_LABELS = Labels(positive=("yes",), negative=("no",))


# -- the prompts ---------------------------------------------------------------------------------
DEFAULT_SYSTEM = (
    "You grade the answers of question-answering systems. You compare a predicted answer with a "
    "list of gold answers and decide whether the prediction is correct. Reply with one JSON object "
    "and nothing else."
)
DEFAULT_USER = """\
Question: {question}
Gold answers (matching any one of them is enough): {golds}
Predicted answer: {prediction}

The predicted answer is correct if it means the same as at least one gold answer, even when the \
wording differs (an alias, an abbreviation, a different but equivalent format, or extra detail \
that does not contradict it). It is incorrect if it names a different entity or value, is less \
specific than the gold answer, hedges between several answers, or does not answer the question.

Reply with a JSON object: {"rationale": "<one short sentence>", "judgement": "correct" or "incorrect"}"""

DEFAULT = JudgePrompt(
    id="default",
    version="1",
    system=DEFAULT_SYSTEM,
    user_template=DEFAULT_USER,
    parser=JSON_VERDICT,
    fill=PLAIN,
    source="harness; the ReSearch judge's design (Agent-RL/ReCall@4bdb872 scripts/evaluation/llm_judge.py): "
    "the full gold list, semantic equivalence to any item, a JSON verdict with a rationale",
    max_tokens=256,
    labels=Labels(positive=("correct",), negative=("incorrect",), after=r'"judge?ment"\s*:\s*"?'),
)

R1_SEARCHER = JudgePrompt(
    id="r1_searcher",
    version="1",
    system=None,
    # verbatim as the code sends it, including the indentation left before the closing quotes
    user_template=(
        "Given a Question and its Golden Answer, verify whether the Predicted Answer is correct.\n"
        "The prediction is correct if it fully aligns with the meaning and key information of the "
        "Golden Answer.\n"
        "Respond with True if the prediction is correct and False otherwise.\n"
        "\n"
        "Question: {question}\n"
        "Golden Answer: {reference}\n"
        "Predicted Answer: {prediction}\n"
        "    "
    ),
    parser=TRUE_FALSE,
    fill=R1_SEARCHER_FILL,
    source="SsmallSong/R1-Searcher@7822872 evaluation/metric_calc_gpt_as_judge.py (text as in the code's "
    "forks); ACC_L with gpt-4o-mini, one user message, boolean golds mapped to yes/no",
    max_tokens=16,
    labels=Labels(positive=("true",), negative=("false",)),
    notes="the reply's first word must be True or False; anything else is 'unparseable'",
)

JUDGE_PROMPTS: Registry[JudgePrompt] = Registry("judge prompt", discover=plugins.register("judge_prompts"))
for _p in (DEFAULT, R1_SEARCHER):
    JUDGE_PROMPTS.register(_p.id, _p)


def get_prompt(name: str) -> JudgePrompt:
    """A registered prompt; ``<id>+logit`` is its logit-scored variant."""
    base, plus, mode = name.partition("+")
    prompt = JUDGE_PROMPTS.get(base)
    if prompt.id != base:
        raise ConfigError(
            f"judge prompt {base!r} is registered as a prompt with id {prompt.id!r}; make them equal"
        )
    if not plus:
        return prompt
    if mode != "logit":
        raise ConfigError(f"judge prompt {name!r}: the only variant is '<id>+logit'")
    return prompt.with_logit_scoring()


def prompt_hash(name: str) -> str:
    """The hash of the registered prompt ``name`` (:func:`get_prompt`), what a judge metric's name
    carries (``judge@<model>:<hash>``)."""
    return get_prompt(name).prompt_hash


def describe_prompts() -> list[tuple[str, str, str, str, str]]:
    """Rows ``(id, version, hash, target, source)``."""
    out = []
    for n in JUDGE_PROMPTS.names():
        p = JUDGE_PROMPTS.get(n)
        out.append((p.id, p.version, p.prompt_hash, p.target, p.source))
    return out
