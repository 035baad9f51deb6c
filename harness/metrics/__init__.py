"""Metrics: one honest implementation of each, versioned, with bootstrap intervals.

See ``normalize`` (SQuAD and R1-Searcher normalisation), ``answer`` (em, f1, f1_squad, cover_em,
cover_em_tokens), ``retrieval`` (retrieval_recall@k, evidence_recall, answer_recall@k),
``registry`` (names, versions, ``score_answer``), ``bootstrap`` (intervals) and ``paired`` (paired
tests: exact McNemar, the paired bootstrap, Holm).
"""

from harness.metrics.answer import cover_em, cover_em_tokens, exact_match, f1, f1_squad
from harness.metrics.bootstrap import Aggregate, bootstrap_ci
from harness.metrics.normalize import normalize_answer, normalize_answer_r1searcher
from harness.metrics.paired import PairedTest, paired_bootstrap_diff, paired_test
from harness.metrics.registry import (
    DEFAULT_METRICS,
    Metric,
    describe_metrics,
    get_metric,
    metric_versions,
    score_answer,
)
from harness.metrics.retrieval import answer_in_docs_at_k, evidence_recall, retrieval_recall_at_k

__all__ = [
    "DEFAULT_METRICS",
    "Aggregate",
    "Metric",
    "PairedTest",
    "answer_in_docs_at_k",
    "bootstrap_ci",
    "cover_em",
    "cover_em_tokens",
    "describe_metrics",
    "evidence_recall",
    "exact_match",
    "f1",
    "f1_squad",
    "get_metric",
    "metric_versions",
    "normalize_answer",
    "normalize_answer_r1searcher",
    "paired_bootstrap_diff",
    "paired_test",
    "retrieval_recall_at_k",
    "score_answer",
]
