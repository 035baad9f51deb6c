"""Document renderers: how retrieved passages are shown to the model. Part of every method spec.

Each renderer takes hits in rank order and returns the text placed inside the observation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from harness import plugins
from harness.registry import Registry
from harness.types import Hit

Renderer = Callable[[Sequence[Hit]], str]
# The harness' own renderers are registered below; a paper's own are registered from its folder
# (``PLUGIN = Plugin(renderers={...})`` in ``methods/<paper>/__init__.py``) on first use.
RENDERERS: Registry[Renderer] = Registry("renderer", discover=plugins.register("renderers"))


def first_line_and_rest(contents: str) -> tuple[str, str]:
    """A passage's ``contents`` split into its first line (the title, as stored) and the rest."""
    lines = contents.split("\n")
    return lines[0], "\n".join(lines[1:])


@RENDERERS.register("numbered")
def render_numbered(hits: Sequence[Hit]) -> str:
    """``({i})Title: {title} Text: {text}`` (FlashRAG ``ReasoningPipeline`` / R1-Searcher)."""
    return "".join(f"({i})Title: {h.title} Text: {h.text}\n" for i, h in enumerate(hits, 1))
