"""When-to-Search's judge: its YES/NO prompt (paper App. B.4) over SQuAD-normalised prediction and
golds (registered as ``when_to_search`` from ``methods/when_to_search/__init__.py``)."""

from __future__ import annotations

from collections.abc import Sequence

from harness.api import YES_NO, YES_NO_LABELS, Fields, Fill, JudgePrompt, normalize_answer


def _when_to_search(question: str, golds: Sequence[str], text: str) -> Fields:
    # paper App. B.4 fills in a normalised prediction and golds (SQuAD normalisation); the join "; " is ours
    return {
        "normalized_prediction": normalize_answer(text),
        "normalized_golden": "; ".join(normalize_answer(g) for g in golds),
    }


WHEN_TO_SEARCH_FILL = Fill("when_to_search_normalized.v1", _when_to_search)

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
