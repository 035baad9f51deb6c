"""TIRESRAG-R1's judges: the evaluation judge (paper Fig. 13) and the two reward judges that read
the trajectory (sufficiency, Fig. 11; thinking, Fig. 12), with their fills and the sufficiency
reply parser (registered from ``methods/tiresrag_r1/__init__.py``)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from harness.api import TRUE_OR_YES, UNIT_FLOAT, Fields, Fill, JudgePrompt, Labels, ParsedReply, Parser

_SUFFICIENT = re.compile(r'\{\s*"sufficient context to the given answer"\s*:\s*([01])\s*\}')


def _parse_sufficiency(body: str) -> ParsedReply:
    """TIRESRAG-R1's sufficiency object; the last one wins (its code takes the first, on a reply
    that still holds the thinking block: probe2/TIRESRAG-R1@a457873 reward/sufficient_thinking_reward.py).
    No object: unparseable
    (its code scores 0)."""
    found = _SUFFICIENT.findall(body.lower())
    if not found:
        return ParsedReply("unparseable")
    v = int(found[-1])
    return ParsedReply("ok", "sufficient" if v else "insufficient", float(v))


SUFFICIENCY_JSON = Parser("tiresrag_sufficiency_json.v1", _parse_sufficiency)


def _tiresrag(question: str, golds: Sequence[str], text: str) -> Fields:
    # TIRESRAG-R1 paper Fig. 13 does not say how several golds are filled in; joined " / " (ours)
    return {"question": question, "reference": " / ".join(golds), "prediction": text}


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


TIRESRAG_FILL = Fill("tiresrag_reference_slash.v1", _tiresrag)
SUFFICIENCY_FILL = Fill("tiresrag_sufficiency.v1", _sufficiency)
THINKING_FILL = Fill("tiresrag_thinking.v1", _thinking)


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
