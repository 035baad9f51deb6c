"""``harness.retrieval.evaluate``'s loop over retrievers and datasets (the body of ``harness
eval-retrieval``): each retriever is built when its turn comes and closed after its datasets, its
rows carry its spec and the corpus it searched, and the pooled recall weights each dataset by its
questions."""

from __future__ import annotations

import math

import pytest
from pydantic import BaseModel

from harness.retrieval.evaluate import Candidate, RecallAtK, evaluate_retrievers, micro_recall
from harness.retrieval.spec import CorpusSpec
from harness.types import Evidence, Hit, QAExample


class _Spec(BaseModel):
    kind: str = "fixed"


class _Fixed:
    """Returns the passages ``p0``, ``p1``, ... for every query; records its life."""

    def __init__(self, log: list[str], name: str):
        self.log, self.name = log, name
        log.append(f"built {name}")

    def search(self, queries: list[str], k: int) -> list[list[Hit]]:
        return [[Hit(f"p{r}", f'"T"\n{r}', 1.0) for r in range(k)] for _ in queries]

    def close(self) -> None:
        self.log.append(f"closed {self.name}")


def _q(i: int, gold: list[str] | None) -> QAExample:
    sup = None if gold is None else tuple(Evidence(title="t", passage_id=g) for g in gold)
    return QAExample(id=str(i), dataset="d", split="dev", question=f"q{i}", answers=("a",), supporting=sup)


def test_each_retriever_is_built_in_turn_and_closed_and_its_rows_carry_spec_and_corpus():
    log: list[str] = []
    corpus = CorpusSpec(id="c", content_hash="h", n_passages=3)
    todo = [Candidate(n, _Spec(), corpus, lambda n=n: _Fixed(log, n)) for n in ("a", "b")]
    # d1: gold p0 (found at 1) and p2 (found at 3 only); d2: one question without gold, skipped
    data = [("d1", [_q(0, ["p0"]), _q(1, ["p2"])]), ("d2", [_q(2, ["p1", "p9"]), _q(3, None)])]
    said: list[str] = []
    out = evaluate_retrievers(todo, data, [1, 3], say=said.append)
    assert log == ["built a", "closed a", "built b", "closed b"]
    assert {
        (r.row.retriever, r.row.dataset, r.row.k): r.row.recall for r in out if r.row.retriever == "a"
    } == {
        ("a", "d1", 1): 0.5,
        ("a", "d1", 3): 1.0,
        ("a", "d2", 1): 0.0,
        ("a", "d2", 3): 0.5,
    }
    assert all(r.corpus == corpus and r.spec == _Spec() for r in out)
    assert said[1].startswith("a: d2 1 questions in ") and said[1].endswith(
        " s (1 without gold passages skipped)"
    )


def test_micro_recall_weights_datasets_by_questions_and_leaves_out_empty_ones():
    rows = [
        RecallAtK("d1", "r", 3, 1.0, 2, 0, 0.0),
        RecallAtK("d2", "r", 3, 0.25, 6, 0, 0.0),
        RecallAtK("d3", "r", 3, math.nan, 0, 4, 0.0),  # no question with gold passages
    ]
    n, recall = micro_recall(rows)
    assert n == 8 and recall == pytest.approx((2 * 1.0 + 6 * 0.25) / 8, rel=1e-12)
    n, recall = micro_recall(rows[2:])
    assert n == 0 and math.isnan(recall)
