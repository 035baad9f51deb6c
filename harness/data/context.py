"""A question's own reader context: the ordered paragraphs its dataset ships with it.

HotpotQA and 2WikiMultihopQA (distractor setting: 10 paragraphs, gold among them) and MuSiQue
(20 paragraphs) give every question its own context. Loaded examples that have one carry it in
``example.meta["context"]``: a tuple of ``{"title", "text"}`` objects in the dataset's order
(``"passage_id"`` too when the paragraph is in the packaged closed corpus), repeats kept as the
dataset has them. It stays plain JSON so ``QAExample.to_dict()`` keeps working; it is never
written to the results store and does not enter any run or sample hash.

Readers of the context (ARENA) use :func:`example_context`, which validates it and returns
typed :class:`ContextParagraph` s.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from harness.errors import DataError
from harness.types import QAExample

META_KEY = "context"


@dataclass(frozen=True)
class ContextParagraph:
    """One paragraph of a question's own context."""

    title: str
    text: str
    passage_id: str | None = None  # its id in the packaged closed corpus, when it is there

    def to_meta(self) -> dict[str, str]:
        d = {"title": self.title, "text": self.text}
        if self.passage_id is not None:
            d["passage_id"] = self.passage_id
        return d


def context_meta(paragraphs: Iterable[ContextParagraph]) -> tuple[dict[str, str], ...]:
    """The ``meta["context"]`` value for ``paragraphs`` (in order)."""
    return tuple(p.to_meta() for p in paragraphs)


def has_context(example: QAExample) -> bool:
    return bool(example.meta.get(META_KEY))


def example_context(example: QAExample) -> tuple[ContextParagraph, ...] | None:
    """The example's own paragraphs in order, or None when it has none. A malformed value
    (not a list of objects with string ``title`` and ``text``) raises DataError naming the question."""
    raw = example.meta.get(META_KEY)
    if not raw:
        return None
    if not isinstance(raw, list | tuple):
        raise _bad(example, f"expected a list of paragraphs, got {type(raw).__name__}")
    out = []
    for i, p in enumerate(raw):
        if (
            not isinstance(p, dict)
            or not isinstance(p.get("title"), str)
            or not isinstance(p.get("text"), str)
        ):
            raise _bad(example, f"paragraph {i} is not an object with string 'title' and 'text': {p!r:.80}")
        pid: Any = p.get("passage_id")
        out.append(ContextParagraph(p["title"], p["text"], str(pid) if pid is not None else None))
    return tuple(out)


def _bad(example: QAExample, message: str) -> DataError:
    return DataError(f"{example.dataset}:{example.id}", f"meta['context']: {message}")
