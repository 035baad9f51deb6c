"""The batched rollout engine against one-question-at-a-time, on the same 16 questions, and the
engine's own overhead (everything except model and retriever time) as a share of the run.

Model: the tiny random Llama (fast, so the engine's overhead is *over*-stated relative to a real
model); retriever: bm25s over the packaged closed corpus; method: Search-R1 (up to 4 searches and a
final turn, 32 new tokens per turn). Figures go to ``benchmark.extra_info`` (``--benchmark-json``)."""

from __future__ import annotations

import time

import pytest

from harness.rollout.base import RunContext
from methods.search_r1.method import SearchR1
from tests.support.side_by_side import report

N = 16


@pytest.fixture(scope="module")
def setting(tiny_dir):
    from harness.data.benches import load_bench
    from harness.eval.protocol import mini
    from harness.llm import BackendSpec, make_backend
    from harness.retrieval.factory import make_protocol_retriever

    proto = mini()
    proto = proto.with_(decoding=proto.decoding.model_copy(update={"max_new_tokens": 32}).model_dump())
    examples = [e for _, exs in load_bench("mini-multihop") for e in exs][:N]
    backend = make_backend(BackendSpec(model=str(tiny_dir), max_batch_size=N))
    retriever = make_protocol_retriever(proto, progress=False)
    return proto, examples, backend, retriever


def timed_solve(setting, batches):
    proto, examples, backend, retriever = setting
    ctx = RunContext(backend=backend, protocol=proto, retriever=retriever)
    t0 = time.perf_counter()
    trajs = [t for b in batches for t in SearchR1().solve(b, ctx)]
    wall = time.perf_counter() - t0
    inner = sum(turn.latency_s for t in trajs for turn in t.turns)
    return trajs, wall, inner


def test_bench_batched_engine_vs_sequential(benchmark, setting):
    _proto, examples, _backend, _retriever = setting
    _, seq_wall, _ = timed_solve(setting, [[e] for e in examples])
    trajs, wall, inner = benchmark.pedantic(lambda: timed_solve(setting, [examples]), rounds=1, iterations=1)
    overhead = max(0.0, wall - inner) / wall
    benchmark.extra_info.update(
        {
            "sequential_s": seq_wall,
            "batched_s": wall,
            "speedup": seq_wall / wall,
            "engine_overhead_share": overhead,
        }
    )
    report(
        benchmark,
        f"sequential {seq_wall:.2f}s, batched {wall:.2f}s, speed-up {seq_wall / wall:.1f}x, "
        f"engine overhead {overhead:.1%} of the batched run",
    )
    assert len(trajs) == N
