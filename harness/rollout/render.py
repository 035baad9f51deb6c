"""Document renderers: how retrieved passages are shown to the model. Part of every method spec.

Each renderer takes hits in rank order and returns the text placed inside the observation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from harness import plugins
from harness.registry import Registry
from harness.types import Hit

if TYPE_CHECKING:
    from harness.rollout.base import RunContext
    from harness.rollout.state import Observation, ObservationFn

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


def stripped_observations(renderer: str) -> ObservationFn:
    """An observation function for the rollout engine: the hits rendered with the registered
    renderer ``renderer``, stripped, as Search-R1's ``execute_predictions`` does before wrapping
    them (``f"\\n\\n<information>{docs.strip()}</information>\\n\\n"``), so the last document's
    trailing newline is not shown. The methods built on that code base (Eval-RAR, R-Search) share it."""
    render = RENDERERS.get(renderer)

    def observe(
        _states: Sequence[Any], _queries: list[str], hits: list[list[Hit]], _ctx: RunContext
    ) -> list[Observation]:
        return [(render(h).strip(), ()) for h in hits]

    return observe
