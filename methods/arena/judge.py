"""ARENA's judge: its yes/no prompt (paper Table 8, with its code's layout) and its reply rule
(registered as ``arena`` from ``methods/arena/__init__.py``)."""

from __future__ import annotations

from collections.abc import Sequence

from harness.api import YES_NO_LABELS, Fields, Fill, JudgePrompt, ParsedReply, Parser, labelled


def _parse_arena(body: str) -> ParsedReply:
    """ARENA's rule (its evaluation code): ``yes`` anywhere -> correct, else ``no`` anywhere ->
    incorrect. Its code scores anything else 0.5; here that is ``unparseable`` (not scored)."""
    low = body.lower()
    if "yes" in low:
        return labelled("ok", True)
    if "no" in low:
        return labelled("ok", False)
    return ParsedReply("unparseable")


ARENA_YES_NO = Parser("arena_substring_yes_no.v1", _parse_arena)


def _arena(question: str, golds: Sequence[str], text: str) -> Fields:
    # ren258/ARENA@53f9569 src/gpt_eval.py: {correct_answer} is the Python str() of the gold list
    return {"correct_answer": str(list(golds)), "model_response": text}


ARENA_FILL = Fill("arena_gold_list_repr.v1", _arena)

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
