"""Tokens prefilled per question with and without the transformers backend's prefix cache, on
4-turn Search-R1 rollouts (3 searches, then an answer) of 8 mini-multihop questions.

Model: the tiny random Llama with SmolLM2's tokenizer, generating 256 tokens per turn (an
untrained policy fills its turns); each turn's action is appended by a script
(tests/support/searching.py) so that every question really has 4 turns. Retriever: bm25s over the
packaged closed corpus, top-3, observations up to 500 tokens (the Search-R1 settings). Both the
training path (token ids) and the evaluation path (context text re-tokenized every turn) run.
Greedy trajectories must be identical token by token; in token space reuse must prefill at least
3x fewer tokens. In text space a random model's non-canonical tokens re-tokenize differently and
are prefilled again, so only the figure is reported there. Figures go to ``benchmark.extra_info``.

Run: ``python -m pytest tests/bench/test_bench_prefix.py --benchmark-only -p no:cacheprovider -s``
"""

from __future__ import annotations

import time

import pytest

from harness.llm import BackendSpec
from harness.llm.transformers_backend import TransformersBackend
from harness.rollout.base import RunContext
from methods.search_r1.method import SearchR1
from tests.support.searching import SearchesThenAnswers
from tests.support.side_by_side import report

pytestmark = pytest.mark.bench
N = 8
FREE_TOKENS = 256


@pytest.fixture(scope="module")
def setting(tiny_dir):
    from harness.data.benches import load_bench
    from harness.eval.protocol import mini
    from harness.retrieval.factory import make_protocol_retriever

    proto = mini()
    examples = [e for _, exs in load_bench("mini-multihop") for e in exs][:N]
    model = TransformersBackend(BackendSpec(model=str(tiny_dir), prefix_cache_tokens=0))
    retriever = make_protocol_retriever(proto, progress=False)
    return proto, examples, model, retriever


def run(setting, *, cache_tokens: int, training: bool):
    proto, examples, loaded, retriever = setting
    spec = BackendSpec(model=loaded.spec.model, prefix_cache_tokens=cache_tokens, max_batch_size=N)
    backend = SearchesThenAnswers(
        TransformersBackend(spec, model=loaded.model, tokenizer=loaded.tokenizer), free_tokens=FREE_TOKENS
    )
    ctx = RunContext(backend=backend, protocol=proto, retriever=retriever, training=training)
    t0 = time.perf_counter()
    trajs = SearchR1().solve(examples, ctx)
    return trajs, backend.completions, time.perf_counter() - t0


@pytest.mark.parametrize("training", [True, False], ids=["token-ids", "text"])
def test_bench_prefill_per_question(benchmark, setting, training):
    off, off_calls, off_s = run(setting, cache_tokens=0, training=training)
    on, on_calls, on_s = benchmark.pedantic(
        lambda: run(setting, cache_tokens=32768, training=training), rounds=1, iterations=1
    )

    assert [[c.token_ids for c in call] for call in on_calls] == [
        [c.token_ids for c in call] for call in off_calls
    ]
    for a, b in zip(off, on, strict=True):
        assert sum(t.kind == "generate" for t in b.turns) == 4 and b.n_retrievals == 3
        assert b.response == a.response and [t.text for t in b.turns] == [t.text for t in a.turns]
        if training:
            assert b.response_ids == a.response_ids and b.loss_mask == a.loss_mask

    def prefill(trajs):
        return sum(t.prefill_tokens for tr in trajs for t in tr.turns if t.kind == "generate") / len(trajs)

    full, reused = prefill(off), prefill(on)
    assert full == sum(t.prompt_tokens for tr in on for t in tr.turns if t.kind == "generate") / len(on)
    benchmark.extra_info.update(
        {
            "prefill_per_question_without_reuse": full,
            "prefill_per_question_with_reuse": reused,
            "ratio": full / reused,
            "seconds_without_reuse": off_s,
            "seconds_with_reuse": on_s,
        }
    )
    report(
        benchmark,
        f"{'token ids' if training else 'text'}: prefilled per question {full:.0f} without reuse, "
        f"{reused:.0f} with ({full / reused:.1f}x fewer); {off_s:.1f}s vs {on_s:.1f}s",
    )
    if training:
        assert full >= 3 * reused
    else:
        assert full > reused
