"""Named, versioned judge prompts: the default one and the papers' own, verbatim.

A :class:`JudgePrompt` fixes everything that decides a verdict: the system and user texts, how the
fields are filled from (question, golds, prediction), the reply parser, the token limit and
whether logit scoring is used. Its ``prompt_hash`` (8 hex of sha256 over all of these) goes into
the metric name ``judge@<model>:<hash>`` and the cache key, so a changed prompt is a new metric.

Placeholders are ``{name}`` for the names the prompt's fill function returns; every other brace is
literal text (JSON examples need no escaping), and substituted values are never re-substituted.

Registered prompts (``harness list``-style: :func:`describe_prompts`):

* ``default``: the harness judge in the ReSearch style (question, the full gold list, the
  prediction; a JSON verdict with a rationale; plain Yes/No accepted as ``fallback_parse``).
* ``when_to_search``: When-to-Search's YES/NO prompt (paper App. B.4 "Instruction for Judge LLM").
* ``r1_searcher``: R1-Searcher's True/False prompt (``evaluation/metric_calc_gpt_as_judge.py``).
* ``tiresrag_r1``: TIRESRAG-R1's evaluation judge (paper Fig. 13, App. C.2).
* ``arena``: ARENA's yes/no judge (arXiv 2505.13258 Table 8; ren258/ARENA@53f9569 src/gpt_eval.py).
* ``tiresrag_r1_sufficiency`` / ``tiresrag_r1_thinking``: TIRESRAG-R1's reward judges (paper
  Figs. 11, 12), which read the trajectory (``target="response"``), not the extracted answer.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from harness.errors import ConfigError
from harness.judge.parsers import (
    ARENA_YES_NO,
    JSON_VERDICT,
    SUFFICIENCY_JSON,
    TRUE_FALSE,
    TRUE_OR_YES,
    UNIT_FLOAT,
    YES_NO,
    Labels,
    Parser,
)
from harness.metrics.normalize import normalize_answer, r1searcher_bool_mapping
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


def _when_to_search(question: str, golds: Sequence[str], text: str) -> Fields:
    # paper App. B.4 fills in a normalised prediction and golds (SQuAD normalisation); the join "; " is ours
    return {
        "normalized_prediction": normalize_answer(text),
        "normalized_golden": "; ".join(normalize_answer(g) for g in golds),
    }


def _r1_searcher(question: str, golds: Sequence[str], text: str) -> Fields:
    # the code formats the dataset's answer field as is (a string; a list would print as a Python
    # list) after mapping boolean golds to "yes"/"no" (SsmallSong/R1-Searcher@7822872
    # evaluation/metric_calc_gpt_as_judge.py)
    mapped = [r1searcher_bool_mapping(g) for g in golds]
    reference = mapped[0] if len(mapped) == 1 else str(mapped)
    return {"question": question, "reference": reference, "prediction": text}


def _tiresrag(question: str, golds: Sequence[str], text: str) -> Fields:
    # TIRESRAG-R1 paper Fig. 13 does not say how several golds are filled in; joined " / " (ours)
    return {"question": question, "reference": " / ".join(golds), "prediction": text}


def _arena(question: str, golds: Sequence[str], text: str) -> Fields:
    # ren258/ARENA@53f9569 src/gpt_eval.py: {correct_answer} is the Python str() of the gold list
    return {"correct_answer": str(list(golds)), "model_response": text}


_ANSWER_SPAN = re.compile(r"<answer>.*?</answer>", re.DOTALL)
_INFORMATION = re.compile(r"<information>(.*?)</information>", re.DOTALL)


def _sufficiency(question: str, golds: Sequence[str], text: str) -> Fields:
    # probe2/TIRESRAG-R1@a457873 (OpenRLHF-RAG/.../ppo_utils/experience_maker.py,
    # reward/sufficient_thinking_reward.py): the full response with every <answer> span removed; one gold
    return {"question": question, "answer": " / ".join(golds), "references": _ANSWER_SPAN.sub("", text)}


def _thinking(question: str, golds: Sequence[str], text: str) -> Fields:
    # reward/sufficient_thinking_reward.py: <information> contents vs everything else, answers removed
    body = _ANSWER_SPAN.sub("", text)
    information = "\n".join(m.strip() for m in _INFORMATION.findall(body))
    thinking = "\n".join(p.strip() for p in _INFORMATION.split(body)[::2] if p.strip())
    return {"information": information, "question": question, "thinking_process": thinking}


PLAIN = Fill("plain.v1", _plain)
WHEN_TO_SEARCH_FILL = Fill("when_to_search_normalized.v1", _when_to_search)
R1_SEARCHER_FILL = Fill("r1_searcher_reference.v1", _r1_searcher)
TIRESRAG_FILL = Fill("tiresrag_reference_slash.v1", _tiresrag)
ARENA_FILL = Fill("arena_gold_list_repr.v1", _arena)
SUFFICIENCY_FILL = Fill("tiresrag_sufficiency.v1", _sufficiency)
THINKING_FILL = Fill("tiresrag_thinking.v1", _thinking)

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

WHEN_TO_SEARCH = JudgePrompt(
    id="when_to_search",
    version="1",
    system=None,
    # verbatim paper App. B.4 text; the line breaks (lost in our copy of the paper) are ours; arrows U+2192
    user_template=(
        "You are an evaluation assistant. Your task is to determine whether the given prediction "
        "semantically matches any of the reference answers. This is a flexible match: even if the "
        "wording is different, if the meaning is the same, consider it a match.\n"
        "Prediction: {normalized_prediction}\n"
        "Reference Answers: {normalized_golden}\n"
        "Please answer with a single word:\n"
        "- YES \u2192 if the prediction expresses the same meaning as any of the reference answers.\n"
        "- NO \u2192 otherwise.\n"
        "Only respond with YES or NO."
    ),
    parser=YES_NO,
    fill=WHEN_TO_SEARCH_FILL,
    source="When to Search (paper App. B.4 'Instruction for Judge LLM'; line breaks ours); "
    "judge Qwen3-235B-A22B-Instruct(-2507), temperature 0, max_tokens 8",
    max_tokens=8,
    labels=YES_NO_LABELS,
    notes="the paper counts any reply not starting with YES as NO; here a reply whose first word is "
    "neither YES nor NO is 'unparseable' and counted",
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

TIRESRAG_R1 = JudgePrompt(
    id="tiresrag_r1",
    version="1",
    system=None,
    # verbatim paper Fig. 13 (App. C.2)
    user_template=(
        "Given a Question and its Golden Answer, verify whether the Predicted Answer is correct. "
        "The prediction is correct if it fully aligns with the meaning and key information of the "
        "Golden Answer. Respond with True if the prediction is correct and False otherwise.\n"
        "\n"
        "Question: {question}\n"
        "Golden Answer: {reference}\n"
        "Predicted Answer: {prediction}"
    ),
    parser=TRUE_OR_YES,
    fill=TIRESRAG_FILL,
    source="TIRESRAG-R1 paper Fig. 13 (LLM-as-Judge, GPT-4o, Table 3); ours where App. C.2 is silent: "
    "temperature 0, true/yes accepted, several golds joined",
    max_tokens=16,
    labels=Labels(positive=("true", "yes"), negative=("false", "no")),
)

ARENA = JudgePrompt(
    id="arena",
    version="1",
    system="You are an intelligent AI assistant.",
    # verbatim paper Table 8 with the code's layout: blocks joined by four newlines
    user_template=(
        "*************Consider a knowledge Q&A RAG task to test the capability of a testing model, "
        "the correct answer list is:*************\n{correct_answer}"
        "\n\n\n\n*************Here is the model's response:*************\n{model_response}"
        "\n\n\n\n*************Please check if the model's answer is correct. As long as the model's "
        "answer hits any item (or synonym) in the correct answer list, it can be considered correct. "
        'You only need to answer "yes" or "no".*************'
    ),
    parser=ARENA_YES_NO,
    fill=ARENA_FILL,
    source="ARENA paper Table 8 and its evaluation code (ren258/ARENA@53f9569 src/gpt_eval.py): "
    "GPT-4o-2024-11-20, "
    "temperature 0, the extracted <answer> text",
    max_tokens=16,
    labels=YES_NO_LABELS,
    notes="ARENA's code scores a reply with neither 'yes' nor 'no' 0.5; here it is 'unparseable'",
)

_SUFFICIENCY_SYSTEM = """\
You are an expert LLM evaluator that excels at evaluating a QUESTION, ANSWER and REFERENCES. Consider the following criteria:

Sufficient Context To The Given Answer: 1 IF the CONTEXT is sufficient to infer the ANSWER to the question and 0 IF the CONTEXT cannot be used to infer the ANSWER to the question. Make the sufficiency judgment based solely on the context, without relying on your memory to determine whether the question can be answered from the context.

First, output a list of step-by-step questions that would be used to arrive at a label for the criteria. Make sure to include questions about assumptions implicit in the QUESTION. Include questions about any mathematical calculations or arithmetic that would be required.

Next, answer each of the questions. Please note that you may answer these questions only on the basis of the given context; do not use your own outside knowledge. Make sure to work step by step through any required mathematical calculations or arithmetic. Finally, use these answers to evaluate the criteria.

EVALUATION (JSON)

EXAMPLE:

### QUESTION

In which year did the publisher of Roald Dahl's Guide to Railway Safety cease to exist?

### ANSWER

2001

### References

Roald Dahl's Guide to Railway Safety was published in 1991 by the British Railways Board. The British Railways Board had asked Roald Dahl to write the text of the booklet, and Quentin Blake to illustrate it, to help young people enjoy using the railways safely. The British Railways Board (BRB) was a nationalised industry in the United Kingdom that operated from 1963 to 2001. Until 1997 it was responsible for most railway services in Great Britain, trading under the brand name British Railways and, from 1965, British Rail. It did not operate railways in Northern Ireland, where railways were the responsibility of the Government of Northern Ireland.

### EXPLANATION

The context mentions that Roald Dahl's Guide to Railway Safety was published by the British Railways Board. It also states that the British Railways Board operated from 1963 to 2001, meaning the year it ceased to exist was 2001. Therefore, the context does provide a precise answer to the question.

### JSON

{ "Sufficient Context To The Given Answer": 1 }

Remember the instructions: You are an expert LLM evaluator that excels at evaluating a QUESTION, ANSWER and REFERENCES. Consider the following criteria: Sufficient Context: 1 IF the CONTEXT is sufficient to infer the ANSWER to the question and 0 IF the CONTEXT cannot be used to infer the ANSWER to the question. Make the sufficiency judgment based solely on the context, without relying on your memory to determine whether the question can be answered from the context.

First, output a list of step-by-step questions that would be used to arrive at a label for the criteria. Make sure to include questions about assumptions implicit in the QUESTION. Include questions about any mathematical calculations or arithmetic that would be required.

Next, answer each of the questions. Please note that you may answer these questions only on the basis of the given context; do not use your own outside knowledge. Make sure to work step by step through any required mathematical calculations or arithmetic.

Finally, use these answers to evaluate the criteria. Output the ### EXPLANATION (Text). Then, use the EXPLANATION to output the ### EVALUATION (JSON)"""

TIRESRAG_R1_SUFFICIENCY = JudgePrompt(
    id="tiresrag_r1_sufficiency",
    version="1",
    system=_SUFFICIENCY_SYSTEM,
    user_template="### QUESTION\n{question}\n### ANSWER\n{answer}\n### REFERENCES\n{references}",
    parser=SUFFICIENCY_JSON,
    fill=SUFFICIENCY_FILL,
    source="TIRESRAG-R1 paper Fig. 11 (sufficiency reward R^S and the preliminary analysis), with the "
    "code's '### ' example headers and single-brace JSON (probe2/TIRESRAG-R1@a457873)",
    target="response",
    max_tokens=4048,
    notes="the paper samples its Qwen3-8B judge at T=0.6 with thinking on; the harness judges at "
    "temperature 0 (cacheable); verdict 'sufficient'/'insufficient', score 1/0",
)

TIRESRAG_R1_THINKING = JudgePrompt(
    id="tiresrag_r1_thinking",
    version="1",
    # verbatim paper Fig. 12; the doubled braces are sent literally, as the released code does
    system="""\
You are an expert reasoning evaluator for Retrieval-Augmented Generation (RAG) tasks. Your goal is to judge the reasoning quality of the model's thinking process based on the retrieved context and question. You will assign a reward score between 0 and 1. This score reflects only the quality of the reasoning process, not whether the final answer is correct.

Evaluation Criteria:

1. Logical Soundness - Is the reasoning coherent and structured?
2. Contextual Alignment - Does it use retrieved evidence correctly?
3. Error Awareness - Does it avoid unsupported assumptions?
4. Clarity and Precision - Is it concise, relevant, and non-redundant?

Scoring:

0.0: Completely flawed reasoning
1.0: Perfect reasoning
Intermediate (e.g., 0.3, 0.7) are allowed.

Important:

- Judge only the thinking process, not the answer.
- Reward accurate, grounded, and structured reasoning.

Your Output:

A single float-type score from {{0.0, 0.1, 0.2, ..., 1.0}}.
No explanation. Only the score.""",
    user_template=(
        "INPUT:\n### CONTEXT\n{information}\n### QUESTION\n{question}\n"
        "### MODEL THINKING PROCESS\n{thinking_process}"
    ),
    parser=UNIT_FLOAT,
    fill=THINKING_FILL,
    source="TIRESRAG-R1 paper Fig. 12 (thinking reward R^T); input split as its code "
    "(probe2/TIRESRAG-R1@a457873 reward/sufficient_thinking_reward.py)",
    target="response",
    max_tokens=4048,
    notes="a score in [0, 1], no verdict; out-of-range or non-numeric replies are 'unparseable' "
    "(the code scores them 0)",
)

JUDGE_PROMPTS: Registry[JudgePrompt] = Registry("judge prompt")
for _p in (
    DEFAULT,
    WHEN_TO_SEARCH,
    R1_SEARCHER,
    TIRESRAG_R1,
    ARENA,
    TIRESRAG_R1_SUFFICIENCY,
    TIRESRAG_R1_THINKING,
):
    JUDGE_PROMPTS.register(_p.id, _p)


def get_prompt(name: str) -> JudgePrompt:
    """A registered prompt; ``<id>+logit`` is its logit-scored variant."""
    base, plus, mode = name.partition("+")
    prompt = JUDGE_PROMPTS.get(base)
    if not plus:
        return prompt
    if mode != "logit":
        raise ConfigError(f"judge prompt {name!r}: the only variant is '<id>+logit'")
    return prompt.with_logit_scoring()


def describe_prompts() -> list[tuple[str, str, str, str, str]]:
    """Rows ``(id, version, hash, target, source)``."""
    out = []
    for n in JUDGE_PROMPTS.names():
        p = JUDGE_PROMPTS.get(n)
        out.append((p.id, p.version, p.prompt_hash, p.target, p.source))
    return out
