"""The metric registry: every metric the harness reports, with a version that goes into the protocol.

Bump a metric's ``version`` whenever its semantics change (normalisation, edge cases, aggregation
over aliases); scores under different versions are then never compared.

Metrics whose name ends in ``@k`` are families: ``get_metric("retrieval_recall@5")`` binds k=5.

A metric registered with ``in_default_protocols=False`` (a paper's own variant, e.g. R-Search's
"Acc") is left out of ``metric_versions()``. ``harness run`` scores exactly a protocol's
``metrics``; the harness' protocols carry ``harness.protocol.STANDARD_METRICS`` (named there, so
registering a metric changes no protocol id), and a paper's protocol adds its own variants.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from harness.errors import ConfigError
from harness.metrics import answer, retrieval
from harness.registry import Registry

MetricKind = Literal["answer", "retrieval"]

DEFAULT_METRICS: tuple[str, ...] = ("em", "f1", "cover_em", "cover_em_tokens")

ANSWER_INPUTS = ("prediction", "golds")
PASSAGE_INPUTS = ("retrieved_ids", "gold_ids")
DOC_TEXT_INPUTS = ("retrieved_docs", "golds")


@dataclass(frozen=True, kw_only=True)
class Metric:
    """One metric. ``fn(*inputs) -> float`` in [0, 1]; ``inputs`` names its two arguments.

    Answer metrics also carry ``pair_fn``, the same computation on a prepared
    :class:`~harness.metrics.answer.AnswerPair` (``fn(p, g) == pair_fn(AnswerPair(p, g))`` by
    construction), so scoring many metrics normalises each string once.
    """

    name: str
    version: str
    fn: Callable[..., float]
    kind: MetricKind
    description: str
    source: str
    inputs: tuple[str, str] = ANSWER_INPUTS
    pair_fn: Callable[[answer.AnswerPair], float] | None = None
    in_default_protocols: bool = True  # False: only protocols that name it score it


METRICS: Registry[Metric] = Registry("metric")


def _add(m: Metric) -> None:
    METRICS.register(m.name, m)


_add(
    Metric(
        name="em",
        version="1",
        fn=answer.exact_match,
        pair_fn=answer.em_pair,
        kind="answer",
        description="exact match after SQuAD normalisation, max over gold aliases",
        source="SQuAD v1.1 normalize_answer; FlashRAG ExactMatch, Search-R1 em_check",
    )
)
_add(
    Metric(
        name="f1",
        version="1",
        fn=answer.f1,
        pair_fn=answer.f1_pair,
        kind="answer",
        description="token F1; yes/no/noanswer must match exactly (HotpotQA rule); max over aliases",
        source="hotpot_evaluate_v1.py; FlashRAG F1_Score, ReSearch, R1-Searcher",
    )
)
_add(
    Metric(
        name="f1_squad",
        version="1",
        fn=answer.f1_squad,
        pair_fn=answer.f1_squad_pair,
        kind="answer",
        description="token F1 without the yes/no/noanswer rule (compatibility); max over aliases",
        source="SQuAD v1.1 f1_score; BERGEN F1, Search-o1 F1",
    )
)
_add(
    Metric(
        name="cover_em",
        version="1",
        fn=answer.cover_em,
        pair_fn=answer.cover_em_pair,
        kind="answer",
        description="normalised gold is a character substring of the normalised prediction ('art' in 'party')",
        source="FlashRAG acc (Sub_ExactMatch), Search-R1 subem_check, BERGEN Match",
    )
)
_add(
    Metric(
        name="cover_em_tokens",
        version="1",
        fn=answer.cover_em_tokens,
        pair_fn=answer.cover_em_tokens_pair,
        kind="answer",
        description="every gold token is among the prediction tokens, any order (R1-Searcher normaliser)",
        source="R1-Searcher evaluation/metric_calc_rule.py cover_exact_match_score_1 (its Cover-EM)",
    )
)
_add(
    Metric(
        name="acc_substring_lower",
        version="1",
        fn=answer.acc_substring_lower,
        pair_fn=answer.acc_substring_lower_pair,
        kind="answer",
        description="lower-cased gold is a substring of the lower-cased prediction, no other normalisation (R-Search's Acc)",
        source="QingFei1/R-Search@ecba08d src/eval/utils.py:18-30 acc_score",
        in_default_protocols=False,
    )
)
_add(
    Metric(
        name="retrieval_recall@k",
        version="1",
        fn=retrieval.retrieval_recall_at_k,
        kind="retrieval",
        inputs=PASSAGE_INPUTS,
        description="fraction of distinct gold passage ids among the first k retrieved ids",
        source="harness (gold passage ids of the packaged closed corpus)",
    )
)
_add(
    Metric(
        name="evidence_recall",
        version="1",
        fn=retrieval.evidence_recall,
        kind="retrieval",
        inputs=PASSAGE_INPUTS,
        description="fraction of distinct gold passage ids retrieved anywhere in the trajectory",
        source="harness",
    )
)
_add(
    Metric(
        name="answer_recall@k",
        version="1",
        fn=retrieval.answer_in_docs_at_k,
        kind="retrieval",
        inputs=DOC_TEXT_INPUTS,
        description="1 if any of the top-k documents contains a normalised gold answer (substring)",
        source="FlashRAG retrieval_recall_topk (renamed: it tests answer strings, not gold passages)",
    )
)

_FAMILY = re.compile(r"^(?P<base>[a-z0-9_]+)@(?P<k>[0-9]+)$")


@functools.lru_cache(maxsize=256)
def get_metric(name: str) -> Metric:
    """The metric called ``name``; ``base@N`` binds k=N for an ``@k`` family. Unknown -> ConfigError."""
    m = _FAMILY.match(name)
    if m and name not in METRICS:
        template_name = f"{m['base']}@k"
        if template_name not in METRICS:
            from harness.choices import unknown

            raise unknown("metric", name, METRICS.names())
        k = int(m["k"])
        if k < 1:
            raise ConfigError(f"metric {name!r}: k must be at least 1")
        template = METRICS.get(template_name)
        return dataclasses.replace(template, name=name, fn=functools.partial(template.fn, k=k))
    if name.endswith("@k"):
        raise ConfigError(f"metric {name!r} needs a cut-off: write e.g. {name[:-1]}5")
    return METRICS.get(name)


def resolve_metrics(names: Sequence[str]) -> tuple[Metric, ...]:
    """Resolve a list of metric names (duplicates rejected) to metrics, in the order given."""
    if isinstance(names, str):
        raise TypeError("names must be a sequence of metric names, not a single string")
    if not names:
        raise ConfigError("no metrics requested")
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise ConfigError(f"metric {n!r} is requested twice")
        seen.add(n)
    return tuple(get_metric(n) for n in names)


def parse_metric_list(text: str) -> tuple[str, ...]:
    """Parse ``"em,f1, cover_em"`` into names and check each is known."""
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    resolve_metrics(names)
    return names


def metric_versions(names: Sequence[str] | None = None) -> dict[str, str]:
    """``{name: version}`` for the given metrics, for the protocol (default: every registered one
    that is ``in_default_protocols``)."""
    if names is None:
        return {n: m.version for n in METRICS.names() if (m := METRICS.get(n)).in_default_protocols}
    return {m.name: m.version for m in resolve_metrics(names)}


def describe_metrics() -> list[tuple[str, str, str, str, str]]:
    """Rows ``(name, version, kind, description, source)`` for ``harness list metrics``."""
    rows = []
    for n in METRICS.names():
        m = METRICS.get(n)
        rows.append((m.name, m.version, m.kind, m.description, m.source))
    return rows


@functools.lru_cache(maxsize=64)
def _answer_pair_fns(names: tuple[str, ...]) -> tuple[tuple[str, Callable[[answer.AnswerPair], float]], ...]:
    out = []
    for m in resolve_metrics(names):
        if m.kind != "answer" or m.pair_fn is None:
            raise ConfigError(f"metric {m.name!r} is a {m.kind} metric, not an answer metric")
        out.append((m.name, m.pair_fn))
    return tuple(out)


def score_answer(pred: str, golds: Sequence[str], names: Sequence[str] = DEFAULT_METRICS) -> dict[str, float]:
    """Every requested answer metric for one prediction; each string is normalised once."""
    pair = answer.AnswerPair(pred, golds)
    return {name: fn(pair) for name, fn in _answer_pair_fns(tuple(names))}


def stored_metric_name(name: str, top_k: int) -> str:
    """The name a protocol metric is stored under: a family ``base@k`` bound to the protocol's top-k
    (``retrieval_recall@k`` -> ``retrieval_recall@3``), any other name as it is."""
    return f"{name[:-2]}@{top_k}" if name.endswith("@k") else name
