"""Retrieval quality: recall of gold passages at k, per dataset, for any retriever.

For each dataset the questions that have gold passage ids (``QAExample.gold_passage_ids``) are
searched once at the largest k; recall@k is the mean over those questions of
:func:`harness.metrics.retrieval.retrieval_recall_at_k` (distinct gold ids among the first k
hits / distinct gold ids). Questions without gold ids are counted and skipped. Recall is NaN (not
computable) when a remote server returned a passage that maps to no corpus id.

``harness eval-retrieval`` is :func:`retrievers_to_evaluate` (the named retrievers over one corpus,
and a retrieval server) then :func:`evaluate_retrievers` (every retriever on every dataset, each
row with the retriever's spec and the corpus it searched) and :func:`micro_recall` (the pooled
recall over datasets).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from pydantic import BaseModel

from harness.errors import ConfigError
from harness.metrics.retrieval import retrieval_recall_at_k
from harness.retrieval.base import Retriever
from harness.retrieval.corpus import Corpus
from harness.retrieval.spec import CorpusSpec
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


@dataclass(frozen=True)
class Candidate:
    """A retriever to evaluate: its name in the table, its spec, the corpus it searches (the one
    recorded with its rows) and how to build it (built only when its turn comes)."""

    name: str
    spec: BaseModel
    corpus: CorpusSpec
    make: Callable[[], Retriever]


@dataclass(frozen=True)
class Evaluated:
    """One :class:`RecallAtK` row with the spec of the retriever and the corpus it searched."""

    spec: BaseModel
    corpus: CorpusSpec
    row: RecallAtK


def retrievers_to_evaluate(
    specs: Sequence[tuple[str, BaseModel]],
    corpus_path: str | os.PathLike[str] | None,
    retriever_url: str | None,
    *,
    say: Callable[[str], None] = lambda _: None,
) -> tuple[list[Candidate], Corpus | None]:
    """The retrievers ``specs`` (name, spec: :func:`harness.retrieval.factory.parse_spec`) over the
    corpus at ``corpus_path`` (None: the packaged one, opened only when ``specs`` is not empty), then
    the server at
    ``retriever_url`` as ``remote``, or ``remote-unverified`` when its ``GET /health`` does not
    describe its corpus and index (its hits are mapped to the corpus's passage ids; an unreachable
    server fails here, naming the URL). Also the corpus opened (None when only a server is named)."""
    from harness.retrieval.factory import as_corpus, build_retriever

    todo: list[Candidate] = []
    corpus = None
    if specs:
        corpus = as_corpus(corpus_path, progress=True)
        for name, spec in specs:
            make = partial(build_retriever, spec, corpus, progress=True)
            todo.append(Candidate(name, spec, corpus.spec, make))
    if retriever_url:
        from harness.retrieval.client import RetrievalClient

        # hits are mapped to the corpus's passage ids (Search-R1's own server sends none, or row numbers)
        client = RetrievalClient(retriever_url, corpus=corpus or as_corpus(corpus_path, progress=True))
        remote_corpus = client.corpus_spec
        name = "remote" if remote_corpus is not None else "remote-unverified"
        if remote_corpus is None:
            remote_corpus = CorpusSpec(id="unknown", content_hash="", n_passages=0)
        say(f"{name}: {client.shown_url} serves {client.spec.model_dump_json()}")
        todo.append(Candidate(name, client.spec, remote_corpus, lambda: client))
    return todo, corpus


def evaluate_retrievers(
    todo: Sequence[Candidate],
    datasets: Sequence[tuple[str, Sequence[QAExample]]],
    ks: Sequence[int],
    *,
    say: Callable[[str], None] = lambda _: None,
) -> list[Evaluated]:
    """:func:`recall_at_ks` of each retriever on each (dataset, examples), the retrievers built one
    at a time and closed after their datasets; ``say`` gets a line per retriever and dataset
    (questions, seconds, questions skipped for want of gold passages)."""
    results: list[Evaluated] = []
    for c in todo:
        r = c.make()
        try:
            for dataset, examples in datasets:
                rows = recall_at_ks(r, dataset, examples, ks, name=c.name)
                results.extend(Evaluated(c.spec, c.corpus, row) for row in rows)
                skipped = rows[0].skipped
                note = f" ({skipped} without gold passages skipped)" if skipped else ""
                say(f"{c.name}: {dataset} {rows[0].n} questions in {rows[0].seconds:.2f} s{note}")
        finally:
            r.close()
    return results


def micro_recall(rows: Sequence[RecallAtK]) -> tuple[int, float]:
    """The questions and the recall pooled over ``rows`` (one retriever and k, several datasets):
    each dataset weighted by its questions; datasets without gold passages left out; NaN for none."""
    counted = [r for r in rows if r.n]
    n = sum(r.n for r in counted)
    return n, (sum(r.recall * r.n for r in counted) / n if n else float("nan"))
