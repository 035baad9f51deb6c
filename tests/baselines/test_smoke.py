"""All four prompt baselines end to end with a real (tiny, random) model and a real bm25s index
over a few passages: they complete, record every call and retrieval, and count tokens."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.method import RunContext
from harness.methods_registry import get_method
from harness.types import SamplingParams
from tests.baselines.helpers import example, protocol
from tests.retrieval.helpers import TINY, write_jsonl


@pytest.fixture
def bm25_retriever(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from harness.retrieval.factory import make_retriever

    monkeypatch.setenv("RAR_HARNESS_CACHE", str(tmp_path / "cache"))
    return make_retriever("bm25s", write_jsonl(tmp_path / "tiny.jsonl", TINY))


@pytest.fixture(scope="module")
def tiny_model(tiny_dir: Path):
    from harness.llm import BackendSpec, make_backend

    return make_backend(BackendSpec(model=str(tiny_dir), max_batch_size=8))


@pytest.mark.parametrize("name", ["cot", "ircot", "search_o1", "sure"])
def test_baseline_runs_with_a_real_model_and_index(name, tiny_model, bm25_retriever):
    proto = protocol(max_turns=1, top_k=2, max_obs_tokens=64, decoding={"max_new_tokens": 12})
    ctx = RunContext(backend=tiny_model, protocol=proto, retriever=bm25_retriever, sampling=SamplingParams())
    examples = [
        example(1, "What is the capital of France?", dataset="hotpotqa"),
        example(2, "Who created the Python programming language?", "Guido van Rossum"),
    ]
    method = get_method(name)
    trajs = method.solve(examples, ctx)
    assert [t.example_id for t in trajs] == ["1", "2"]
    assert len(method.spec(proto).spec_hash) == 12  # the spec is serialisable
    for t in trajs:
        assert t.n_llm_calls >= 1 and t.prompt_tokens > 0 and t.completion_tokens > 0
        assert [x.index for x in t.turns] == list(range(len(t.turns)))
        retrievals = [x for x in t.turns if x.kind == "retrieve"]
        if name == "cot":
            assert retrievals == []
        elif name in ("ircot", "sure"):  # both retrieve for the question first
            assert retrievals[0].query == t.question and 1 <= len(retrievals[0].doc_ids) <= 2
            assert set(retrievals[0].doc_ids) <= {row["id"] for row in TINY}
        if name == "sure":
            k = len(t.meta.get("sure", {}).get("candidates", []))
            assert t.n_llm_calls == 1 + 2 * k + k * (k - 1)
        if name == "search_o1":
            assert t.meta["reason_in_documents_calls"] + t.meta["repeated_queries"] == t.n_retrievals <= 1
