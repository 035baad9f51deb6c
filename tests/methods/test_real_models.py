"""The judge-scored and embedding-scored rewards against real models: a real OpenAI-compatible judge
server (llama.cpp via xllamacpp over the packaged SmolLM2 GGUF, started here on 127.0.0.1) and the
packaged MiniLM encoder. The 135M judge's verdicts are not predictable, so these tests check that
every reply is either scored or counted as unparsed, and that the reward adds up."""

from __future__ import annotations

import math

import pytest

from harness.llm import BackendSpec, make_backend
from methods.tiresrag_r1.method import TiresRAG
from methods.when_to_search.method import MiniLMEmbedder, WhenToSearch, search_reward
from tests.methods.helpers import reward_ctx, trajectory

pytestmark = pytest.mark.slow
OBS = "\n\n<information>\n(1)Paris\nParis is the capital of France.\n</information>\n\n"
PARTS = [
    ("I should look it up.</think><search>capital of France</search>", True),
    (OBS, False),
    (
        "The documents say Paris.</think><answer>Lyon</answer><think>No, Paris.</think><answer>Paris</answer>",
        True,
    ),
]


@pytest.fixture(scope="module")
def judge():
    from harness.llm.server import ModelServer

    with ModelServer(threads=1, n_ctx=4096) as srv:
        yield make_backend(
            BackendSpec(
                kind="openai", model="smollm2", base_urls=srv.base_url, server="llamacpp", tokenizer="default"
            )
        )


@pytest.mark.llamacpp
def test_tiresrag_judges_through_a_real_server(judge):
    trajs = [trajectory(PARTS, ["Paris"], "What is the capital of France?")] * 2
    out = TiresRAG().rewards(trajs, name="smoke", ctx=reward_ctx(0, 3, judge=judge))
    for r in out:
        c = r.components
        assert c["judge_error"] == 0.0
        assert c["sufficiency"] in (0.0, 1.0) and 0.0 <= c["thinking"] <= 1.0
        assert c["judge_unparsed"] in (0.0, 1.0, 2.0)
        a = 1 / (1 + math.exp((1 - 0.9 * 3) / 10))
        expected = 1.0 + a * (0.6 * c["thinking"] + 0.3 * c["sufficiency"] + 0.3 * 1.0)  # F1 1, reflection +1
        assert r.total == pytest.approx(expected)


@pytest.mark.llamacpp
def test_when_to_search_judge_through_a_real_server(judge):
    parts = [("<think>known</think><reflect>Paris</reflect><answer>Paris</answer>", True)]
    (r,) = WhenToSearch().rewards(
        [trajectory(parts, ["Paris"], "What is the capital of France?")],
        name="stage1",
        ctx=reward_ctx(judge=judge),
    )
    c = r.components
    assert c["judge_error"] == 0.0 and c["correct"] + c["judge_unparsed"] <= 1.0
    assert r.total == pytest.approx((1.0 if c["correct"] else -1.0) + 0.0 + 1.0)


def test_minilm_query_similarity_orders_redundant_and_diverse_queries():
    emb = MiniLMEmbedder()
    v = emb.encode(["Albert III birth date", "birth date of Albert III"])
    assert v.shape == (2, 384)
    redundant = search_reward(["Albert III birth date", "birth date of Albert III"], emb)
    diverse = search_reward(["Albert III birth date", "Frederick of Liège father"], emb)
    assert -1.0 <= redundant < diverse <= 0.5
