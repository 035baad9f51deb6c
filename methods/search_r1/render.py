"""Search-R1's interaction format: its document renderer (registered as ``search_r1`` from
``methods/search_r1/__init__.py``; Eval-RAR uses it by that name) and its tag dialect."""

from __future__ import annotations

from collections.abc import Sequence

from harness.api import DEFAULT_INVALID_MESSAGE, Hit, TagDialect, first_line_and_rest

# Search-R1's tags and correction message are the harness defaults (TagDialect's field defaults).
SEARCH_R1_INVALID_MESSAGE = DEFAULT_INVALID_MESSAGE
SEARCH_R1_DIALECT = TagDialect(name="search_r1")


def render_search_r1(hits: Sequence[Hit]) -> str:
    """``Doc {i}(Title: {first line}) {rest}\\n`` with the title's quotes kept
    (PeterGriffinJin/Search-R1@a14dc3a search_r1/llm_agent/generation.py ``_passages2string``;
    FlashRAG ``PromptTemplate.format_reference`` and ``SearchR1Pipeline`` use the same string)."""
    out = []
    for i, h in enumerate(hits, 1):
        title, text = first_line_and_rest(h.contents)
        out.append(f"Doc {i}(Title: {title}) {text}\n")
    return "".join(out)
