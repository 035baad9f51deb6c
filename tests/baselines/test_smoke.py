"""All four prompt baselines end to end with a real (tiny, random) model and a real bm25s index
over a few passages: they complete, record every call and retrieval, and count tokens."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.methods_registry import get_method
from harness.rollout.base import RunContext
from harness.types import Completion, SamplingParams
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


@pytest.mark.parametrize(
    "name", ["cot", "ircot", "search_o1", "sure", "ircot_flashrag", "search_o1_released"]
)
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
        elif name in ("ircot", "sure", "ircot_flashrag"):  # all retrieve for the question first
            assert retrievals[0].query == t.question and 1 <= len(retrievals[0].doc_ids) <= 2
            assert set(retrievals[0].doc_ids) <= {row["id"] for row in TINY}
        if name == "sure":
            k = len(t.meta.get("sure", {}).get("candidates", []))
            assert t.n_llm_calls == 1 + 2 * k + k * (k - 1)
        if name in ("search_o1", "search_o1_released"):
            assert t.meta["reason_in_documents_calls"] + t.meta["repeated_queries"] == t.n_retrievals <= 1


class Forced:
    """The real tiny model, except that a prompt containing a key of ``forced`` (and no
    Reason-in-Documents instruction) gets that text once: it drives the model into the method's
    later steps (a search, SuRe's candidates), which a random model does not reach by itself."""

    def __init__(self, backend, forced: dict[str, str]):
        self.backend, self.forced, self.calls = backend, dict(forced), []

    def __getattr__(self, name):
        return getattr(self.backend, name)

    def generate(self, prompts, **kw):
        self.calls.append(len(prompts))
        out = self.backend.generate(prompts, **kw)
        for i, p in enumerate(prompts):
            key = next((k for k in self.forced if k in p and "**Task Instruction:**" not in p), None)
            if key is not None:
                text = self.forced.pop(key)
                out[i] = Completion(
                    text=text, prompt_tokens=len(p), completion_tokens=len(text), finish_reason="stop"
                )
        return out


def test_later_steps_run_on_the_real_model(tiny_model, bm25_retriever):
    proto = protocol(max_turns=1, top_k=2, max_obs_tokens=64, decoding={"max_new_tokens": 12})
    q1, q2 = "What is the capital of France?", "Who created the Python programming language?"
    examples = [example(1, q1), example(2, q2, "Guido van Rossum")]
    # Search-o1: both questions search once; one batched Reason-in-Documents call reads both
    be = Forced(tiny_model, {q1: "<|begin_search_query|>capital of France<|end_search_query|>",
                             q2: "<|begin_search_query|>Python creator<|end_search_query|>"})  # fmt: skip
    ctx = RunContext(backend=be, protocol=proto, retriever=bm25_retriever)
    trajs = get_method("search_o1").solve(examples, ctx)
    assert be.calls[:2] == [2, 2]
    for t in trajs:
        assert [x.kind for x in t.turns[:3]] == ["generate", "retrieve", "llm_call"]
        assert t.turns[2].prompt_tokens > 0 and 0 < t.turns[2].completion_tokens <= 12
        assert "<|begin_search_result|>" in t.response
    # SuRe: two candidates each -> summaries, validations and rankings batched over both questions
    be = Forced(
        tiny_model, {"Question: " + q1: "(a) Paris, (b) Lyon", "Question: " + q2: "(a) Guido (b) Ann"}
    )
    ctx = RunContext(backend=be, protocol=proto, retriever=bm25_retriever)
    for t in get_method("sure").solve(examples, ctx):
        assert t.n_llm_calls == 7 and t.prediction in t.meta["sure"]["candidates"]
        assert all(x.completion_tokens > 0 for x in t.turns if x.kind == "llm_call")
    assert be.calls == [2, 4, 4, 4]


def test_middle_truncation_with_a_real_tokenizer(tiny_model):
    """FlashRAG's cut (base_prompt.py:101-105) on real token ids: a prompt of 2048 ids or more
    keeps its first and last 1004 ids; a shorter one is sent unchanged."""
    from baselines.flashrag import middle_truncate

    words = " ".join(f"w{i}" for i in range(3000))
    ids = tiny_model.prompt_ids(words)
    assert len(ids) >= 2048
    out, cut = middle_truncate(tiny_model, words)
    assert cut and out == tiny_model.detokenize(ids[:1004]) + tiny_model.detokenize(ids[-1004:])
    assert (
        out.startswith("w0 w1 ")
        and out.endswith(" w2999")
        and abs(len(tiny_model.prompt_ids(out)) - 2008) <= 2
    )
    short = " ".join(f"w{i}" for i in range(50))
    assert middle_truncate(tiny_model, short) == (short, False)
