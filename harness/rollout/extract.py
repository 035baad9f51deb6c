"""Answer extraction from the model's own text (never from the prompt or the observations).

Every extraction returns a status; failures are counted, not hidden behind fallbacks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.types import ExtractionStatus


@dataclass(frozen=True)
class Extraction:
    prediction: str
    status: ExtractionStatus


def extract_tagged(model_text: str, open_tag: str = "<answer>", close_tag: str = "</answer>") -> Extraction:
    """The text of the **last** complete ``open_tag … close_tag`` span.

    Statuses: ``ok`` (exactly one span), ``multiple_answers`` (several; the last is taken, as
    Search-R1 does), ``empty_answer`` (the span is blank), ``unclosed_tag`` (an opening tag with no
    close after it and no complete span), ``no_answer`` (no tag at all).
    """
    spans = re.findall(re.escape(open_tag) + r"(.*?)" + re.escape(close_tag), model_text, flags=re.DOTALL)
    if not spans:
        if open_tag in model_text:
            return Extraction("", "unclosed_tag")
        return Extraction("", "no_answer")
    pred = spans[-1].strip()
    if not pred:
        return Extraction("", "empty_answer")
    return Extraction(pred, "ok" if len(spans) == 1 else "multiple_answers")


def extract_after(model_text: str, marker: str) -> Extraction:
    """The text after the last ``marker`` up to the end of its line (IRCoT's "So the answer is:")."""
    idx = model_text.rfind(marker)
    if idx < 0:
        return Extraction("", "no_answer")
    rest = model_text[idx + len(marker) :].strip()
    pred = rest.split("\n", 1)[0].strip().rstrip(".").strip()
    return Extraction(pred, "ok" if pred else "empty_answer")


def extract_boxed(model_text: str) -> Extraction:
    r"""The content of the last ``\boxed{...}`` (balanced braces), with an inner ``\text{...}``
    unwrapped (Search-o1's rule: sunnynexus/Search-o1@6ced48f ``scripts/evaluate.py``)."""
    idx = model_text.rfind("\\boxed{")
    if idx < 0:
        return Extraction("", "no_answer")
    i = idx + len("\\boxed{")
    depth = 1
    j = i
    while j < len(model_text) and depth:
        if model_text[j] == "{":
            depth += 1
        elif model_text[j] == "}":
            depth -= 1
        j += 1
    if depth:
        return Extraction("", "unclosed_tag")
    inner = model_text[i : j - 1].strip()
    m = re.fullmatch(r"\\text\{(.*)\}", inner, flags=re.DOTALL)
    if m:
        inner = m.group(1).strip()
    inner = inner.strip("()").strip()
    return Extraction(inner, "ok" if inner else "empty_answer")


def extract_first_line(model_text: str) -> Extraction:
    """The first non-empty line of a direct answer (FlashRAG's ``basic_pred_parse``, which its
    benchmark runs do not use: they score the raw reply, as ``baselines.flashrag`` does)."""
    for line in model_text.strip().splitlines():
        if line.strip():
            return Extraction(line.strip(), "ok")
    return Extraction("", "no_answer")
