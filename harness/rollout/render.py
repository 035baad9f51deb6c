"""Document renderers: how retrieved passages are shown to the model. Part of every method spec.

Each renderer takes hits in rank order and returns the text placed inside the observation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from harness.registry import Registry
from harness.types import Hit

Renderer = Callable[[Sequence[Hit]], str]
RENDERERS: Registry[Renderer] = Registry("renderer")


def _first_line_and_rest(contents: str) -> tuple[str, str]:
    lines = contents.split("\n")
    return lines[0], "\n".join(lines[1:])


@RENDERERS.register("search_r1")
def render_search_r1(hits: Sequence[Hit]) -> str:
    """``Doc {i}(Title: {first line}) {rest}\\n`` with the title's quotes kept
    (Search-R1 ``_passages2string``; FlashRAG ``PromptTemplate.format_reference`` and
    ``SearchR1Pipeline`` use the same string)."""
    out = []
    for i, h in enumerate(hits, 1):
        title, text = _first_line_and_rest(h.contents)
        out.append(f"Doc {i}(Title: {title}) {text}\n")
    return "".join(out)


@RENDERERS.register("r_search")
def render_r_search(hits: Sequence[Hit]) -> str:
    """``(Title: {first line}) {rest}\\n`` without rank numbers (QingFei1/R-Search@ecba08d src/eval/main.py)."""
    return "".join(f"(Title: {t}) {x}\n" for t, x in (_first_line_and_rest(h.contents) for h in hits))


@RENDERERS.register("numbered")
def render_numbered(hits: Sequence[Hit]) -> str:
    """``({i})Title: {title} Text: {text}`` (FlashRAG ``ReasoningPipeline`` / R1-Searcher)."""
    return "".join(f"({i})Title: {h.title} Text: {h.text}\n" for i, h in enumerate(hits, 1))
