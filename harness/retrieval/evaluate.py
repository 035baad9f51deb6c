"""Retrieval quality: recall of gold passages at k, per dataset, for any retriever.

For each dataset the questions that have gold passage ids (``QAExample.gold_passage_ids``) are
searched once at the largest k; recall@k is the mean over those questions of
:func:`harness.metrics.retrieval.retrieval_recall_at_k` (distinct gold ids among the first k
hits / distinct gold ids). Questions without gold ids are counted and skipped. Recall is NaN (not
computable) when a remote server returned a passage that maps to no corpus id.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from harness.errors import ConfigError
from harness.metrics.retrieval import retrieval_recall_at_k
from harness.retrieval.base import Retriever
from harness.types import QAExample, is_unmapped_id


@dataclass(frozen=True)
class RecallAtK:
    dataset: str
    retriever: str
    k: int
    recall: float
    n: int  # questions with gold passages (the denominator)
    skipped: int  # questions without gold passages
    seconds: float  # search time for the dataset (all k share one search)


def recall_at_ks(
    retriever: Retriever,
    dataset: str,
    examples: Sequence[QAExample],
    ks: Sequence[int],
    *,
    name: str | None = None,
    batch_size: int = 256,
) -> list[RecallAtK]:
    if not ks or any(k < 1 for k in ks):
        raise ConfigError(f"k values must be >= 1, got {list(ks)}")
    with_gold = [ex for ex in examples if ex.gold_passage_ids]
    skipped = len(examples) - len(with_gold)
    label = name or retriever.name
    if not with_gold:
        return [RecallAtK(dataset, label, k, float("nan"), 0, skipped, 0.0) for k in ks]
    k_max = max(ks)
    t0 = time.perf_counter()
    ranked: list[list[str]] = []
    for start in range(0, len(with_gold), batch_size):
        batch = with_gold[start : start + batch_size]
        for hits in retriever.search([ex.question for ex in batch], k_max):
            ranked.append([h.doc_id for h in hits])
    seconds = time.perf_counter() - t0
    if any(is_unmapped_id(i) for ids in ranked for i in ids):
        # a remote server returned passages that map to no corpus id: recall is not computable
        return [RecallAtK(dataset, label, k, float("nan"), len(with_gold), skipped, seconds) for k in ks]
    out = []
    for k in ks:
        total = sum(
            retrieval_recall_at_k(ids, ex.gold_passage_ids, k)
            for ids, ex in zip(ranked, with_gold, strict=True)
        )
        out.append(RecallAtK(dataset, label, k, total / len(with_gold), len(with_gold), skipped, seconds))
    return out
