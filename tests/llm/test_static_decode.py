"""Static decoding (``BackendSpec.decode="static"``): the KV preallocated, every step of one shape,
finished rows kept in the batch. It is the CUDA-graph path (``"graph"``, the default on a GPU) less
the capture, so on the CPU it checks everything the graph replays: the 4-D mask, the positions, the
column each step writes, the prefix cache's entries cut out of a static cache, and decoders reused
across calls. Each test compares with the dynamic loop (the CPU default) token by token."""

from __future__ import annotations

import pytest

from harness.errors import ConfigError
from harness.llm.transformers_backend import TransformersBackend
from harness.types import SamplingParams
from tests.llm.test_prefix_cache import rollout

PROMPTS = [
    "Question: who wrote Hamlet?\nAnswer:",
    "The capital of France is",
    "1, 2, 3,",
    "Write a short story about a dragon who learns to read books in a library at night.",
    "def f(x):",
]


@pytest.fixture
def loaded(tiny_loaded):
    return tiny_loaded


@pytest.fixture
def make(make_tiny):
    """``make_tiny`` (tests/llm/conftest.py) with the decode mode first and no prefix cache unless asked."""

    def build(decode: str, tokens: int = 0, batch: int = 8) -> TransformersBackend:
        return make_tiny(tokens=tokens, batch=batch, decode=decode)

    return build


def ids_of(completions):
    return [c.token_ids for c in completions]


@pytest.mark.parametrize("batch", [8, 2])
def test_greedy_tokens_equal_the_dynamic_loop(make, batch):
    dyn, sta = make("dynamic", batch=batch), make("static", batch=batch)
    assert sta.decode_mode == "static" and dyn.decode_mode == "dynamic"
    prompts = [dyn.prompt_ids(p) for p in PROMPTS]
    a = dyn.generate_ids(prompts, max_new_tokens=20)
    b = sta.generate_ids(prompts, max_new_tokens=20)
    assert ids_of(b) == ids_of(a)
    assert all(len(c.token_ids) > 0 for c in b)


def test_rows_that_stop_early_stay_in_the_batch_and_cut_alike(make):
    """A stop string ends some rows after a few tokens; in the static loop they keep decoding
    (ignored), so the rows still going must see exactly what they see when finished rows leave."""
    dyn, sta = make("dynamic"), make("static")
    prompts = [dyn.prompt_ids(p) for p in PROMPTS]
    free = dyn.generate_ids(prompts, max_new_tokens=24)
    # stop on the text of row 1's 3rd-5th tokens: row 1 (at least) ends early, others run on
    stop = dyn.detokenize(free[1].token_ids[2:5])
    assert stop.strip()
    a = dyn.generate_ids(prompts, max_new_tokens=24, stop=[stop])
    b = sta.generate_ids(prompts, max_new_tokens=24, stop=[stop])
    assert [c.text for c in b] == [c.text for c in a]
    assert [c.finish_reason for c in b] == [c.finish_reason for c in a]
    assert ids_of(b) == ids_of(a)
    lengths = {len(c.token_ids) for c in b}
    assert len(lengths) > 1, "the rows must finish at different steps for this test to mean anything"


def test_seeded_sampling_and_repetition_penalty_equal_the_dynamic_loop(make):
    dyn, sta = make("dynamic"), make("static")
    prompts = [dyn.prompt_ids(p) for p in PROMPTS]
    for sampling in (
        SamplingParams(temperature=1.0, top_p=0.9, seed=7),
        SamplingParams(temperature=0.0, repetition_penalty=1.3),
    ):
        a = dyn.generate_ids(prompts, max_new_tokens=16, sampling=sampling)
        b = sta.generate_ids(prompts, max_new_tokens=16, sampling=sampling)
        assert ids_of(b) == ids_of(a), sampling


def test_a_reused_decoder_hides_the_last_calls_columns(make):
    """The second call has the same shape (one decoder, not reallocated), shorter prompts, and
    the columns the first call wrote beyond its width are stale: the mask must hide them."""
    sta, dyn = make("static"), make("dynamic")
    long = [dyn.prompt_ids(PROMPTS[3])] * 2
    short = [dyn.prompt_ids(PROMPTS[1]), dyn.prompt_ids(PROMPTS[2])]
    sta.generate_ids(long, max_new_tokens=30)
    (dec,) = sta._decoders.values()
    b = sta.generate_ids(short, max_new_tokens=30)
    assert list(sta._decoders.values()) == [dec]
    assert ids_of(b) == ids_of(dyn.generate_ids(short, max_new_tokens=30))


def test_new_weight_tensors_drop_the_decoders(make, loaded):
    import torch

    sta = make("static")
    sta.generate_ids([sta.prompt_ids(PROMPTS[0])], max_new_tokens=4)
    assert len(sta._decoders) == 1
    model = loaded[0]
    w = model.lm_head.weight if not model.config.tie_word_embeddings else model.model.norm.weight
    old = w.data
    try:
        w.data = old.clone()  # same values, a new address: a captured graph would read the old one
        sta.generate_ids([sta.prompt_ids(PROMPTS[0])], max_new_tokens=4)
        (dec,) = sta._decoders.values()
        assert sta._decoders_weights is not None
        assert dec.cache.layers[0].keys.shape[0] == 1
    finally:
        w.data = old
    # the key follows the addresses: restoring them is another change
    key = sta._decoders_weights
    sta.generate_ids([sta.prompt_ids(PROMPTS[0])], max_new_tokens=4)
    assert sta._decoders_weights != key
    assert torch.equal(w.data, old)


@pytest.mark.parametrize("training", [False, True], ids=["eval-text", "train-ids"])
def test_multi_turn_rollouts_with_the_prefix_cache_equal_the_dynamic_loop(make, training):
    """Four Search-R1 turns: later turns reuse KV that a static cache handed to the prefix cache
    (cut at the column the row ended on), so a wrong cut changes the later turns' tokens."""
    dyn_trajs, dyn_calls = rollout(make("dynamic", tokens=32768), training)
    sta_trajs, sta_calls = rollout(make("static", tokens=32768), training)
    assert [[c.token_ids for c in call] for call in sta_calls] == [
        [c.token_ids for c in call] for call in dyn_calls
    ]
    assert [[c.prefill_tokens for c in call] for call in sta_calls] == [
        [c.prefill_tokens for c in call] for call in dyn_calls
    ]
    assert any(c.prefill_tokens < c.prompt_tokens for call in sta_calls[1:] for c in call)
    assert [t.response for t in sta_trajs] == [t.response for t in dyn_trajs]


def test_prefix_entries_cut_from_a_static_cache_equal_the_dynamic_ones(make):
    import torch

    dyn, sta = make("dynamic", tokens=32768), make("static", tokens=32768)
    prompts = [dyn.prompt_ids(p) for p in PROMPTS[:3]]
    dyn.generate_ids(prompts, max_new_tokens=10)
    sta.generate_ids(prompts, max_new_tokens=10)
    a = sorted(dyn.prefix_cache.entries.values(), key=lambda e: e.ids.tolist())
    b = sorted(sta.prefix_cache.entries.values(), key=lambda e: e.ids.tolist())
    assert [e.ids.tolist() for e in b] == [e.ids.tolist() for e in a]
    for x, y in zip(a, b, strict=True):
        for (k1, v1), (k2, v2) in zip(x.kv, y.kv, strict=True):
            scale = float(k1.abs().max()) + float(v1.abs().max())
            assert torch.allclose(k2, k1, rtol=0, atol=1e-5 * scale)
            assert torch.allclose(v2, v1, rtol=0, atol=1e-5 * scale)


def test_modes_resolve_and_graph_needs_cuda(make, loaded, tiny_dir):
    assert make("auto").decode_mode == "dynamic"  # the CPU default: finished rows leave the batch
    with pytest.raises(ConfigError, match="decode='graph'.*needs a CUDA device") as e:
        make("graph")
    assert "\n" not in str(e.value)
    assert make("static").describe()["decode"] == "static"


def test_the_decode_step_traces_as_one_graph(make):
    """A CUDA graph replays kernels only: a host read, a Python branch on a tensor or an
    allocation from host data inside the step would break it. torch.compile(fullgraph=True)
    traces the same step on the CPU and fails on any of those (a graph break)."""
    import torch

    sta = make("static")
    sta.generate_ids([sta.prompt_ids(PROMPTS[0])], max_new_tokens=3)
    (dec,) = sta._decoders.values()
    torch._dynamo.reset()
    traced = torch.compile(dec._forward, backend="eager", fullgraph=True)
    with torch.inference_mode():
        out = traced()
    assert out.shape == (1, sta.model.config.vocab_size)
