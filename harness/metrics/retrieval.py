"""Retrieval metrics, where gold passages (or at least gold answers) are known.

Definitions (ids are corpus passage ids, compared as exact strings):

- ``retrieval_recall_at_k(retrieved_ids, gold_ids, k)``: take the first ``k`` entries of
  ``retrieved_ids`` in the order given (for one search call: its ranking; for a trajectory: the
  order in which passages were first retrieved). The score is the number of **distinct** gold ids
  among them divided by the number of distinct gold ids. HotpotQA with 2 gold paragraphs and one of
  them in the top k scores 0.5.
- ``evidence_recall(retrieved_ids, gold_ids)``: the same fraction over everything retrieved
  anywhere in the trajectory (no cut-off).
- ``answer_in_docs_at_k(doc_texts, golds, k)``: FlashRAG's ``retrieval_recall_topk``: 1.0 if the
  SQuAD-normalised text of any of the first ``k`` documents contains a normalised gold answer as a
  character substring (the ``cover_em`` test applied to documents), else 0.0. It needs no gold
  passages, but an answer string can occur in a passage by chance (short answers especially), so it
  is registered as ``answer_recall@k`` and never called retrieval recall. A gold that normalises to
  the empty string matches no document.

Empty ``gold_ids`` / ``golds`` and ``k < 1`` raise ``ValueError``.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.metrics.normalize import normalize_answer


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")


def _gold_set(gold: Sequence[str], what: str) -> set[str]:
    if isinstance(gold, str):
        raise TypeError(f"{what} must be a list of strings, not a single string")
    s = set(gold)
    if not s:
        raise ValueError(f"{what} is empty: retrieval recall needs at least one gold passage")
    return s


def retrieval_recall_at_k(retrieved_ids: Sequence[str], gold_ids: Sequence[str], k: int) -> float:
    """Fraction of distinct gold passage ids found among the first ``k`` retrieved ids."""
    _check_k(k)
    gold = _gold_set(gold_ids, "gold_ids")
    return len(gold.intersection(retrieved_ids[:k])) / len(gold)


def evidence_recall(retrieved_ids: Sequence[str], gold_ids: Sequence[str]) -> float:
    """Fraction of distinct gold passage ids retrieved anywhere in the trajectory."""
    gold = _gold_set(gold_ids, "gold_ids")
    return len(gold.intersection(retrieved_ids)) / len(gold)


def answer_in_docs_at_k(doc_texts: Sequence[str], golds: Sequence[str], k: int) -> float:
    """1.0 if any of the first ``k`` documents contains a normalised gold answer (FlashRAG's
    ``retrieval_recall_topk``; registered as ``answer_recall@k``)."""
    _check_k(k)
    if isinstance(golds, str):
        raise TypeError("golds must be a list of gold aliases, not a single string")
    if len(golds) == 0:
        raise ValueError("golds is empty: every question needs at least one gold answer")
    norm_golds = [g for g in (normalize_answer(x) for x in golds) if g]
    if not norm_golds:
        return 0.0
    for doc in doc_texts[:k]:
        text = normalize_answer(doc)
        if any(g in text for g in norm_golds):
            return 1.0
    return 0.0
