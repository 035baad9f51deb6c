"""The transformers backend's prefix cache: a later call prefills only what follows the longest
cached token prefix, and greedy output is the same token by token as without the cache.

The 4-turn Search-R1 rollouts run the real engine and the real tiny model (its own generations,
its own KV); only each turn's action is scripted, so every question has exactly 3 searches and an
answer whatever the untrained model writes (tests/support/searching.py)."""

from __future__ import annotations

import pytest

from harness.errors import ConfigError
from harness.llm import BackendSpec
from harness.llm.transformers_backend import TransformersBackend
from harness.protocol import CorpusRef, Protocol
from harness.rollout.base import RunContext
from harness.types import QAExample
from methods.search_r1.method import SearchR1
from tests.support.scripted import RecordingRetriever
from tests.support.searching import SearchesThenAnswers

PROTO = Protocol(name="t", corpus=CorpusRef(id="t", content_hash="0" * 64, n_passages=1))
QUESTIONS = [
    "who wrote Hamlet",
    "what is the capital of France",
    "how long is the Danube",
    "when was Rome founded",
]


@pytest.fixture
def loaded(tiny_loaded):
    return tiny_loaded


@pytest.fixture
def make(make_tiny):
    """A backend over the shared tiny model with its own (empty) prefix cache (tests/llm/conftest.py)."""
    return make_tiny


def rollout(backend, training: bool):
    be = SearchesThenAnswers(backend, searches=3, free_tokens=24)
    ctx = RunContext(backend=be, protocol=PROTO, retriever=RecordingRetriever(), training=training)
    examples = [
        QAExample(id=str(i), dataset="t", split="t", question=q, answers=("x",))
        for i, q in enumerate(QUESTIONS)
    ]
    return SearchR1().solve(examples, ctx), be.completions


@pytest.mark.parametrize("training", [False, True], ids=["eval-text", "train-ids"])
def test_four_turn_search_r1_same_trajectories_far_less_prefill(make, training):
    off_trajs, off_calls = rollout(make(tokens=0), training)
    on_trajs, on_calls = rollout(make(), training)

    # the model's own tokens, call by call and row by row, are the same
    assert len(on_calls) == len(off_calls) == 4
    assert [[c.token_ids for c in call] for call in on_calls] == [
        [c.token_ids for c in call] for call in off_calls
    ]
    for a, b in zip(off_trajs, on_trajs, strict=True):
        assert [t.kind for t in b.turns] == ["generate", "retrieve"] * 3 + ["generate"]
        assert b.extraction_status == "ok" and b.prediction == "Paris"
        assert b.response == a.response
        assert [t.text for t in b.turns] == [t.text for t in a.turns]
        if training:  # exact ids and loss mask
            assert b.prompt_ids == a.prompt_ids
            assert b.response_ids == a.response_ids and b.loss_mask == a.loss_mask
            assert len(b.loss_mask) == len(b.response_ids) > 0

    def gens(trajs):
        return [t for tr in trajs for t in tr.turns if t.kind == "generate"]

    # without the cache every prompt token is prefilled; with it the first turn still is
    assert all(t.prefill_tokens == t.prompt_tokens for t in gens(off_trajs))
    assert [t.prompt_tokens for t in gens(on_trajs)] == [t.prompt_tokens for t in gens(off_trajs)]
    firsts = [tr.turns[0] for tr in on_trajs]
    assert all(t.prefill_tokens == t.prompt_tokens for t in firsts)
    later = [t for t in gens(on_trajs) if t.index > 0]
    assert all(0 < t.prefill_tokens < t.prompt_tokens for t in later)
    full = sum(t.prompt_tokens for t in gens(off_trajs))
    reused = sum(t.prefill_tokens for t in gens(on_trajs))
    # in token space every generated token is reused; re-tokenized text loses the random model's
    # non-canonical tokens (a trained model's text re-tokenizes to its own ids far more often)
    assert full >= (3 if training else 2) * reused, (full, reused)


def test_continuation_prefills_only_the_new_tokens(make):
    on, off = make(), make(tokens=0)
    p1 = on.prompt_ids("Question: who wrote Hamlet?\nAnswer:")
    c1 = on.generate_ids([p1], max_new_tokens=12)[0]
    assert c1.prefill_tokens == c1.prompt_tokens == len(p1)
    assert c1.finish_reason == "length" and len(c1.token_ids) == 12
    extra = on.tokenize("\n\n<information>Doc 1: Shakespeare</information>\n\n")
    p2 = p1 + c1.token_ids + extra
    c2 = on.generate_ids([p2], max_new_tokens=12)[0]
    # the cache holds p1 and all generated ids but the last (whose KV was never computed)
    assert c2.prefill_tokens == 1 + len(extra)
    assert c2.prompt_tokens == len(p2)
    assert c2.token_ids == off.generate_ids([p2], max_new_tokens=12)[0].token_ids
    # the first entry is a prefix of the second: superseded, dropped
    assert len(on.prefix_cache.entries) == 1
    assert on.prefix_cache.tokens == len(p2) + 12 - 1


def test_only_the_common_token_prefix_is_reused_across_a_bpe_merge(make):
    """Text that extends a cached prompt can tokenize differently at the seam ("Fr" + "ance" vs
    "France"): only the ids that really match are reused, and the output is unchanged."""
    on, off = make(), make(tokens=0)
    t1, t2 = "The capital of Fr", "The capital of France is"
    p1, p2 = on.prompt_ids(t1), on.prompt_ids(t2)
    common = next(i for i, (a, b) in enumerate(zip(p1, p2, strict=False)) if a != b)
    assert 0 < common < len(p1)  # the seam really re-tokenizes
    on.generate([t1], max_new_tokens=4)
    c = on.generate([t2], max_new_tokens=8)[0]
    assert c.prefill_tokens == len(p2) - common
    assert c.token_ids == off.generate([t2], max_new_tokens=8)[0].token_ids


def test_rows_with_and_without_a_cached_prefix_share_a_batch(make):
    on, off = make(batch=8), make(tokens=0)
    short = on.prompt_ids("1, 2, 3,")
    c = on.generate_ids([short], max_new_tokens=6)[0]
    cont = short + c.token_ids + on.tokenize(" and then")
    fresh = on.prompt_ids("A longer prompt, to pad the others.")
    mixed = [cont, fresh, on.prompt_ids("Hi")]
    assert len(cont) - len(short) - len(c.token_ids) + 1 < len(fresh) < len(cont)
    got = on.generate_ids(mixed, max_new_tokens=10)
    want = off.generate_ids(mixed, max_new_tokens=10)
    assert [g.token_ids for g in got] == [w.token_ids for w in want]
    # one micro-batch computes the longest new suffix (the fresh prompt) for every row; the
    # continuing row takes from the cache only what precedes its last that-many tokens
    width = len(fresh)
    assert [g.prefill_tokens for g in got] == [min(len(p), width) for p in mixed]
    assert got[0].prefill_tokens < len(cont)


def test_the_cache_is_bounded_in_tokens(make):
    on = make(tokens=60)
    prompts = [on.prompt_ids(f"Question {i}: say something long enough.") for i in range(4)]
    out = on.generate_ids(prompts, max_new_tokens=16)
    assert on.prefix_cache.tokens <= 60
    kept = [len(p) + len(c.token_ids) - 1 for p, c in zip(prompts, out, strict=True)]
    assert on.prefix_cache.tokens == sum(kept[-len(on.prefix_cache.entries) :])
    assert 0 < len(on.prefix_cache.entries) < 4
    off = make(tokens=0)
    assert off.prefix_cache is None
    assert off.generate_ids(prompts[:1], max_new_tokens=4)[0].prefill_tokens == len(prompts[0])


def test_a_weight_update_empties_the_cache(make):
    import torch

    on = make()
    p = on.prompt_ids("The capital of France is")
    c = on.generate_ids([p], max_new_tokens=8)[0]
    p2 = p + c.token_ids
    param = next(on.model.parameters())
    with torch.no_grad():
        param.add_(0.0)  # an in-place update, as an optimizer step does
    assert on.generate_ids([p2], max_new_tokens=4)[0].prefill_tokens == len(p2)
    # and without an update the same call reuses
    assert on.generate_ids([p2 + [p2[-1]]], max_new_tokens=4)[0].prefill_tokens < len(p2)


def test_sliding_window_models_are_refused(loaded):
    from transformers import MistralConfig, MistralForCausalLM

    cfg = MistralConfig(
        vocab_size=49152,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        sliding_window=16,
    )
    model = MistralForCausalLM(cfg)
    with pytest.raises(ConfigError, match="prefix_cache_tokens=0"):
        TransformersBackend(BackendSpec(model="x"), model=model, tokenizer=loaded[1])
    TransformersBackend(BackendSpec(model="x", prefix_cache_tokens=0), model=model, tokenizer=loaded[1])


def test_prefill_is_stored_per_turn_and_summed_per_method(tmp_path):
    from harness.results.queries import prefill_summary
    from harness.results.store import RunRecord, ScoredSample, Store
    from harness.types import Trajectory, Turn

    store = Store(tmp_path / "r.duckdb")
    for run_id, method, prefills in (("a", "m1", (100, 30)), ("b", "m2", (None, None))):
        store.create_run(
            RunRecord(
                run_id=run_id,
                kind="eval",
                method=method,
                model="x",
                backend="transformers",
                protocol_id="p",
                protocol_name="mini",
                protocol_json="{}",
                method_spec_hash="h",
                method_spec_json="{}",
                bench="toy",
                status="complete",
            )
        )
        turns = [
            Turn(index=0, kind="generate", prompt_tokens=100, prefill_tokens=prefills[0]),
            Turn(index=1, kind="retrieve", query="q"),
            Turn(index=2, kind="generate", prompt_tokens=160, prefill_tokens=prefills[1]),
        ]
        t = Trajectory(example_id="q0", dataset="d", question="q", answers=["a"], turns=turns)
        store.add_samples(run_id, [ScoredSample(trajectory=t, metrics={"em": 0.0}, position=0)])
    stored = store.query("SELECT run_id, turn_index, prefill_tokens FROM turns ORDER BY run_id, turn_index")
    assert stored["prefill_tokens"].isna().tolist() == [False, True, False, True, True, True]
    assert stored["prefill_tokens"].tolist()[:3:2] == [100, 30]
    df = prefill_summary(store, ["a", "b"])  # m2's backend reported none: absent
    assert df.to_dict("records") == [{"method": "m1", "prompt_tokens": 260, "prefill_tokens": 130}]
