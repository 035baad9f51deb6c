"""Tag dialects: how a model asks for a search, how results come back, how it answers.

A dialect is data, not code: the engine is one implementation parameterised by it. Methods
define their own dialect constants (with citations) in their folders. The defaults of
:class:`TagDialect` are the field's common tags and correction message, first published by
Search-R1 (``methods/search_r1/render.py`` binds them as Search-R1's dialect).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

# The correction message for an output with neither a search nor an answer, as Search-R1 words it
# (PeterGriffinJin/Search-R1@a14dc3a search_r1/llm_agent/generation.py, execute_predictions);
# R-Search reuses it verbatim.
DEFAULT_INVALID_MESSAGE = (
    "\nMy previous action is invalid. If I want to search, I should put the query between "
    "<search> and </search>. If I want to give the final answer, I should put the answer "
    "between <answer> and </answer>. Let me try again.\n"
)


@dataclass(frozen=True)
class TagDialect:
    """The tags of one protocol.

    ``obs_prefix``/``obs_suffix`` wrap the rendered documents (Search-R1:
    ``"\\n\\n<information>"`` + docs + ``"</information>\\n\\n"``). Generation stops at the query
    or answer closing tag (Search-R1 generates freely and cuts after the first ``</search>``, else
    the first ``</answer>``; stopping at whichever closes first yields the same text except when
    an answer closes before a search does, where we end at the answer — the model's first action).
    """

    name: str
    query_open: str = "<search>"
    query_close: str = "</search>"
    answer_open: str = "<answer>"
    answer_close: str = "</answer>"
    obs_prefix: str = "\n\n<information>"
    obs_suffix: str = "</information>\n\n"
    invalid_message: str = DEFAULT_INVALID_MESSAGE
    # extra stop strings a method needs (e.g. an <evaluate> step); they end a turn without an action
    extra_stops: tuple[str, ...] = ()

    @property
    def stops(self) -> list[str]:
        return [self.query_close, self.answer_close, *self.extra_stops]

    @cached_property
    def _action_re(self) -> re.Pattern[str]:
        q = f"{re.escape(self.query_open)}(.*?){re.escape(self.query_close)}"
        a = f"{re.escape(self.answer_open)}(.*?){re.escape(self.answer_close)}"
        return re.compile(f"{q}|{a}", re.DOTALL)

    def parse_action(self, segment: str) -> tuple[str, str]:
        """The first complete action in a generated segment: ``("search", query)``,
        ``("answer", text)`` or ``("invalid", "")`` (Search-R1's first-match rule)."""
        m = self._action_re.search(segment)
        if m is None:
            return "invalid", ""
        if m.group(1) is not None:
            return "search", m.group(1).strip()
        return "answer", m.group(2).strip()
