"""Score a run's trajectories with exactly its protocol's metrics (:class:`RunScoring`).

Alternative predictions (:attr:`harness.types.Trajectory.alt_predictions`) are scored with the
same answer metrics as the prediction, stored as ``metric[name]`` (``em[first_answer]``) beside
the prediction's own (:func:`score_alternatives`).

A predictions file (``harness score``) is read and scored by :mod:`harness.eval.predictions`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.errors import ConfigError
from harness.metrics.registry import (
    DEFAULT_METRICS,
    METRICS,
    Metric,
    get_metric,
    score_answer,
    stored_metric_name,
)
from harness.types import is_unmapped_id

if TYPE_CHECKING:
    from harness.protocol import Protocol
    from harness.types import Trajectory


# --------------------------------------------------------------------------- alternative predictions

ALT_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def alt_metric_name(metric: str, alt: str) -> str:
    """The stored name of ``metric`` scored on the alternative prediction ``alt``: ``em[first_answer]``.
    Brackets, not ``@``: ``@`` already marks metric families (``retrieval_recall@5``, ``judge@...``)."""
    return f"{metric}[{alt}]"


def score_alternatives(
    alts: Mapping[str, str], golds: Sequence[str], names: Sequence[str] = DEFAULT_METRICS
) -> dict[str, float]:
    """The answer metrics ``names`` of each named alternative prediction against ``golds``, keyed
    :func:`alt_metric_name` (``{"first_answer": "Lyon"}`` -> ``em[first_answer]``, ...). A name
    that is not lower-case ``[a-z][a-z0-9_]*`` or a prediction that is not a string is a ConfigError
    (write "" for no answer: it scores 0, so every sample carries every alternative's metrics)."""
    out: dict[str, float] = {}
    for alt, pred in alts.items():
        if not ALT_NAME.match(alt):
            raise ConfigError(
                f"alternative prediction name {alt!r}: use lower-case letters, digits and '_' (e.g. first_answer)"
            )
        if not isinstance(pred, str):
            raise ConfigError(
                f"alternative prediction {alt!r} must be a string, got {type(pred).__name__} "
                '(write "" for no answer)'
            )
        for metric, value in score_answer(pred, golds, names).items():
            out[alt_metric_name(metric, alt)] = value
    return out


# --------------------------------------------------------------------------- scoring a run's trajectories

# The retrieval metrics a trajectory carries the inputs of, and which retrieved ids each reads:
# recall@k the first search's ranking (how good the retriever is on the question), evidence recall
# every id retrieved anywhere in the trajectory (what the method gathered).
_TRAJECTORY_RETRIEVAL = {"retrieval_recall@k": "first", "evidence_recall": "all"}


@dataclass(frozen=True)
class RunScoring:
    """The metrics ``harness run`` scores each trajectory with: exactly a protocol's ``metrics``.

    ``answer``: answer metrics, scored on the prediction and on each alternative prediction;
    ``retrieval``: (stored name, metric, which retrieved ids) for the retrieval metrics, scored
    only where the sample's gold passage ids are known. ``primary``: the stored name of the
    protocol's primary metric (``retrieval_recall@k`` is stored as ``retrieval_recall@<top_k>``).
    """

    answer: tuple[str, ...]
    retrieval: tuple[tuple[str, Metric, str], ...]
    primary: str

    @classmethod
    def of(cls, protocol: Protocol) -> RunScoring:
        """The scoring of ``protocol``. A metric that is
        unknown, that a run cannot compute, or whose pinned version is not the registered one is
        a one-line ConfigError naming the protocol."""
        answer: list[str] = []
        retrieval: list[tuple[str, Metric, str]] = []
        stored: dict[str, str] = {}
        for name, version in protocol.metrics.items():
            template = re.sub(r"@[0-9]+$", "@k", name)  # retrieval_recall@5 -> its family
            where = f"protocol {protocol.name!r}"
            if name not in METRICS and template not in METRICS:
                raise ConfigError(f"{where}: unknown metric {name!r}; known: {', '.join(METRICS.names())}")
            registered = METRICS.get(name if name in METRICS else template).version
            if version != registered:
                raise ConfigError(
                    f"{where} pins metric {name!r} at version {version!r}, the harness computes version "
                    f"{registered!r}: scores of other versions are not comparable (define a new protocol)"
                )
            bound = stored_metric_name(name, protocol.top_k)
            metric = get_metric(bound)
            if metric.kind == "answer":
                answer.append(bound)
            elif template in _TRAJECTORY_RETRIEVAL:
                retrieval.append((bound, metric, _TRAJECTORY_RETRIEVAL[template]))
            else:
                raise ConfigError(
                    f"{where}: metric {name!r} needs inputs a run does not store ({', '.join(metric.inputs)}); "
                    f"a run scores answer metrics and {', '.join(_TRAJECTORY_RETRIEVAL)}; `harness score` "
                    "computes it from a predictions file"
                )
            stored[name] = bound
        return cls(answer=tuple(answer), retrieval=tuple(retrieval), primary=stored[protocol.primary_metric])

    def score(self, t: Trajectory, gold_ids: Sequence[str]) -> dict[str, float]:
        """Every metric of a finished trajectory ``t``; retrieval metrics
        only when ``gold_ids`` is not empty (else the sample has none: nothing to recall)."""
        m = score_answer(t.prediction, t.answers, self.answer) if self.answer else {}
        if self.answer:
            m.update(score_alternatives(t.alt_predictions, t.answers, self.answer))
        # a passage a remote server returned that maps to no corpus id (harness.types.is_unmapped_id):
        # the sample's retrieval metrics are not computable, so none is stored (never a 0)
        if gold_ids and self.retrieval and not any(is_unmapped_id(i) for i in t.retrieved_doc_ids):
            first = next((turn.doc_ids for turn in t.turns if turn.kind == "retrieve"), [])
            ids = {"first": first, "all": t.retrieved_doc_ids}
            for name, metric, which in self.retrieval:
                m[name] = metric.fn(ids[which], gold_ids)
        return m
