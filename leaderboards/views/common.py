"""Shared by every page: intervals of aggregates, method types and labels, protocol texts, safe inline code."""

from __future__ import annotations

import re

from harness.metrics.bootstrap import (  # the intervals are the engine's (the run summary uses them too)
    N_RESAMPLES,
    Z95,
    dataset_aggregate,
    is_binary,
    macro_aggregate,
    nan_aggregate,
)
from harness.results.comparable import corpus_text, retriever_text  # re-exported: the views' names

PARETO_COSTS = ("retrievals", "tokens", "usd")
ROW_KEY = ["method", "model"]


def inline_code(text: str) -> str:
    """``text`` as one Markdown code span, rendered as text whatever it contains: the fence is one
    backtick longer than the longest backtick run inside (CommonMark), padded with a space when the
    text starts or ends with a backtick; newlines become spaces. Model output, queries and ids go
    through this, so a backtick in a prediction cannot end the span and render the rest as Markdown
    (an image link to any URL, say)."""
    text = str(text).replace("\r", " ").replace("\n", " ")
    if not text:
        return "`∅`"
    fence = "`" * (max((len(r) for r in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text[0] == "`" or text[-1] == "`" or (text[0] == " " and text[-1] == " ") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


# -- methods and protocols as the tables describe them ----------------------------------------------
METHOD_TYPES = ("prompt baseline", "trained", "untrained policy")
UNTRAINED = "untrained policy"  # the run label of an RL method scored with its base model


def paper_link(method: str) -> str:
    """A link to the method's paper (arXiv) or code (GitHub) from its declared source; '' if none."""
    from harness.methods_registry import METHODS, get_method

    if method not in METHODS.names():
        return ""
    src = get_method(method).source
    if m := re.search(r"arXiv (\d{4}\.\d{4,5})", src):
        return f"https://arxiv.org/abs/{m.group(1)}"
    if m := re.search(r"\(([\w.-]+/[\w.-]+)[ ,)]", src):
        return f"https://github.com/{m.group(1)}"
    return ""


def uses_retrieval(method: str) -> bool:
    from harness.methods_registry import METHODS, get_method

    return method not in METHODS.names() or bool(get_method(method).uses_retrieval)


def model_size(model: str) -> str:
    """The parameter count in a model name (``smollm2-135m`` -> ``135M``, ``Qwen2.5-7B`` -> ``7B``)."""
    m = re.search(r"(?<![\w.])(\d+(?:\.\d+)?)([mb])(?![a-z])", model.lower().replace("_", "-"))
    return f"{m.group(1)}{m.group(2).upper()}" if m else ""


__all__ = [
    "METHOD_TYPES",
    "N_RESAMPLES",
    "PARETO_COSTS",
    "ROW_KEY",
    "UNTRAINED",
    "Z95",
    "nan_aggregate",
    "corpus_text",
    "dataset_aggregate",
    "inline_code",
    "is_binary",
    "macro_aggregate",
    "model_size",
    "paper_link",
    "retriever_text",
    "uses_retrieval",
]
