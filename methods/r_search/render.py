"""R-Search's document renderer (registered as ``r_search`` from ``methods/r_search/__init__.py``)."""

from __future__ import annotations

from collections.abc import Sequence

from harness.api import Hit, first_line_and_rest


def render_r_search(hits: Sequence[Hit]) -> str:
    """``(Title: {first line}) {rest}\\n`` without rank numbers (QingFei1/R-Search@ecba08d
    src/eval/main.py; the observations of the paper's case study, App. C, Table 8)."""
    return "".join(f"(Title: {t}) {x}\n" for t, x in (first_line_and_rest(h.contents) for h in hits))
