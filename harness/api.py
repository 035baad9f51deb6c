"""The plugin API: the one module of the engine that ``methods/<paper>/`` and ``baselines/`` import.

A plugin imports what it uses from here (``from harness.api import Protocol, TrainableMethod``),
and its manifest (``__init__.py``) imports ``harness.plugins.Plugin``; nothing else of
``harness``. ``tests/test_architecture.py`` checks both, so an engine module can move without
editing a paper folder: only this file follows it. The names are grouped by what a method does
with them; each is documented where it is defined.

:class:`TrainableMethod` is the engine's contract (:class:`harness.method.TrainableMethod`) with
the defaults that read the plugin's own files: ``recipes()`` from the ``recipes.yaml`` beside the
method's module (:func:`harness.rl.recipe_files.method_recipes`) and ``reported()`` /
``reported_file()`` from its ``reported.yaml`` (:func:`harness.results.reported.read_reported`, its
judge columns named by :func:`harness.judge.prompts.prompt_hash`). They live here and not in
``harness/method.py`` because the readers are layers above the contract (``docs/architecture.md``).
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness import method as _contract
from harness.data.benches import Bench, Selection, train_entry
from harness.data.context import ContextParagraph, example_context, has_context
from harness.errors import ConfigError
from harness.eval.protocol import mini
from harness.judge.parsers import (
    TRUE_OR_YES,
    UNIT_FLOAT,
    YES_NO,
    Labels,
    ParsedReply,
    Parser,
    labelled,
    strip_think,
)
from harness.judge.prompts import YES_NO_LABELS, Fields, Fill, JudgePrompt
from harness.llm.base import Backend
from harness.method import Method, MethodSpec, RewardBreakdown, RewardContext, format_question, reward_fn
from harness.metrics.answer import exact_match, f1, f1_squad
from harness.metrics.normalize import normalize_answer, normalize_answer_r1searcher
from harness.metrics.registry import metric_versions
from harness.protocol import CorpusRef, Decoding, Protocol
from harness.retrieval.base import Retriever
from harness.retrieval.spec import E5_BASE_V2, MINILM, DenseSpec
from harness.rollout.base import RolloutConfig, RunContext
from harness.rollout.dialect import DEFAULT_INVALID_MESSAGE, TagDialect
from harness.rollout.engine import TagRolloutConfig, append_generated, generate_turn, run_tag_rollouts
from harness.rollout.extract import (
    Extraction,
    extract_after,
    extract_boxed,
    extract_first_line,
    extract_tagged,
)
from harness.rollout.hooks import Budget, Refusal, TurnBudget, TurnPolicy
from harness.rollout.render import RENDERERS, first_line_and_rest, stripped_observations
from harness.rollout.segments import SegmentLoopConfig, run_segment_rollouts, stopped_at
from harness.rollout.single import answer_once
from harness.rollout.state import Observation, RolloutState
from harness.types import (
    Completion,
    ExtractionStatus,
    Hit,
    QAExample,
    SamplingParams,
    Trajectory,
    Turn,
    join_contents,
)

if TYPE_CHECKING:
    from harness.judge.reward import RewardJudge
    from harness.results.reported import ReportedFile
    from harness.retrieval.cache import CachedRetriever, ResultCache
    from harness.retrieval.encoder import load_encoder
    from harness.retrieval.factory import make_protocol_retriever
    from harness.rl.advantages import SeqAdjust
    from harness.rl.recipe import Recipe

# Names whose modules bring in torch, duckdb or a model library: imported on first use
# (``harness.api.RewardJudge``, or ``from harness.api import RewardJudge`` inside the function that
# needs it), so that listing or loading a method stays light. The same imports are written out
# under TYPE_CHECKING above, for type checkers and for the architecture test's import graph.
_LAZY = {
    "RewardJudge": "harness.judge.reward",
    "CachedRetriever": "harness.retrieval.cache",
    "ResultCache": "harness.retrieval.cache",
    "load_encoder": "harness.retrieval.encoder",
    "make_protocol_retriever": "harness.retrieval.factory",
    "SeqAdjust": "harness.rl.advantages",
    "Recipe": "harness.rl.recipe",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'harness.api' has no attribute {name!r} (the plugin API is its __all__)")


class TrainableMethod(_contract.TrainableMethod):
    """A trained (RL) method: :class:`harness.method.TrainableMethod` with its recipes and
    published numbers read from the files beside its module (see the module docstring)."""

    def recipes(self) -> dict[str, Recipe]:
        from harness.rl.recipe_files import method_recipes

        return method_recipes(self)

    def reported_file(self) -> ReportedFile | None:
        from harness.judge.prompts import prompt_hash
        from harness.results.reported import read_reported

        path = Path(inspect.getfile(type(self))).with_name("reported.yaml")
        return read_reported(path, prompt_hash=prompt_hash) if path.is_file() else None

    def reported(self) -> list[Any]:
        f = self.reported_file()
        return f.rows() if f is not None else []


__all__ = [
    # the method contract
    "Method",
    "TrainableMethod",
    "MethodSpec",
    "RunContext",
    "RewardBreakdown",
    "RewardContext",
    "reward_fn",
    "format_question",
    "ConfigError",
    # the records that flow
    "QAExample",
    "Trajectory",
    "Turn",
    "Completion",
    "Hit",
    "join_contents",
    "SamplingParams",
    "ExtractionStatus",
    "Backend",
    "Retriever",
    # protocols, benches, data
    "Protocol",
    "CorpusRef",
    "Decoding",
    "mini",
    "Bench",
    "Selection",
    "train_entry",
    "ContextParagraph",
    "example_context",
    "has_context",
    # retrieval a method builds itself
    "CachedRetriever",
    "ResultCache",
    "load_encoder",
    "make_protocol_retriever",
    "DenseSpec",
    "E5_BASE_V2",
    "MINILM",
    # the rollout engine and its hooks
    "RolloutConfig",
    "TagRolloutConfig",
    "RolloutState",
    "Observation",
    "run_tag_rollouts",
    "generate_turn",
    "append_generated",
    "SegmentLoopConfig",
    "run_segment_rollouts",
    "stopped_at",
    "answer_once",
    "TagDialect",
    "DEFAULT_INVALID_MESSAGE",
    "Budget",
    "Refusal",
    "TurnBudget",
    "TurnPolicy",
    "RENDERERS",
    "first_line_and_rest",
    "stripped_observations",
    "Extraction",
    "extract_tagged",
    "extract_after",
    "extract_boxed",
    "extract_first_line",
    # metrics
    "exact_match",
    "f1",
    "f1_squad",
    "normalize_answer",
    "normalize_answer_r1searcher",
    "metric_versions",
    # judges
    "JudgePrompt",
    "Fields",
    "Fill",
    "YES_NO_LABELS",
    "Labels",
    "ParsedReply",
    "Parser",
    "labelled",
    "strip_think",
    "TRUE_OR_YES",
    "UNIT_FLOAT",
    "YES_NO",
    "RewardJudge",
    # training
    "Recipe",
    "SeqAdjust",
]
