"""The in-process transformers backend: batching, stop strings, token ids and counts, seeds."""

from __future__ import annotations

import pytest

from harness.errors import ConfigError
from harness.llm import BackendSpec, make_backend
from harness.types import SamplingParams

PROMPTS = [
    "The capital of France is",
    "Question: who wrote Hamlet?\nAnswer:",
    "1, 2, 3,",
    "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    "A much longer prompt than the others, so that left padding really matters in the batch here.",
]


def test_batched_greedy_equals_one_at_a_time(tiny_backend):
    batched = tiny_backend.generate(PROMPTS, max_new_tokens=16)
    single = [tiny_backend.generate([p], max_new_tokens=16)[0] for p in PROMPTS]
    assert [c.text for c in batched] == [c.text for c in single]
    assert [c.token_ids for c in batched] == [c.token_ids for c in single]
    assert all(c.finish_reason in ("length", "eos") for c in batched)


def test_micro_batches_do_not_change_greedy_output(tiny_dir, tiny_backend):
    small = make_backend(BackendSpec(model=str(tiny_dir), max_batch_size=2))
    assert [c.text for c in small.generate(PROMPTS, max_new_tokens=12)] == [
        c.text for c in tiny_backend.generate(PROMPTS, max_new_tokens=12)
    ]


def test_token_counts_are_the_tokenizers(tiny_backend):
    out = tiny_backend.generate(PROMPTS, max_new_tokens=10)
    tok = tiny_backend.tokenizer
    for p, c in zip(PROMPTS, out, strict=True):
        assert c.prompt_tokens == len(tok.encode(p, add_special_tokens=False)) == tiny_backend.count_tokens(p)
        if c.finish_reason == "length":
            assert c.completion_tokens == 10 == len(c.token_ids)
        assert tiny_backend.detokenize(c.token_ids) == c.text
        assert c.latency_s > 0


def _pick_stop(backend, ids):
    """A stop string spanning two generated tokens and ending inside the second (an overhang)."""
    pieces = [backend.detokenize([i]) for i in ids]
    for j in range(2, len(pieces) - 1):
        a, b = pieces[j], pieces[j + 1]
        if len(a) >= 2 and len(b) >= 3 and (a + b).isascii() and (a + b).strip() == (a + b):
            return j, a[-2:] + b[:2]
    raise AssertionError(f"no usable token pair in {pieces}")


@pytest.mark.parametrize("include_stop", [False, True])
def test_stop_string_spanning_tokens_cuts_exactly(tiny_backend, include_stop):
    prompt = PROMPTS[1]
    free = tiny_backend.generate([prompt], max_new_tokens=24)[0]
    j, stop = _pick_stop(tiny_backend, free.token_ids)
    full = free.text
    cut = full.index(stop)
    # the model stops at the first token after which the stop string is in the decoded text
    n = next(
        k for k in range(1, len(free.token_ids) + 1) if stop in tiny_backend.detokenize(free.token_ids[:k])
    )

    c = tiny_backend.generate(
        [prompt], stop=["never-appears", stop], max_new_tokens=24, include_stop=include_stop
    )[0]
    assert c.finish_reason == "stop" and c.stop == stop
    assert c.text == full[:cut] + (stop if include_stop else "")
    assert c.completion_tokens == n
    assert tiny_backend.detokenize(c.token_ids) == c.text
    # the tokens that lie wholly before the cut are the generated ones
    kept = len(c.token_ids) - 1
    assert c.token_ids[: min(kept, j)] == free.token_ids[: min(kept, j)]


def test_stop_rows_finish_independently_in_a_batch(tiny_backend):
    free = tiny_backend.generate(PROMPTS[:2], max_new_tokens=20)
    _, stop = _pick_stop(tiny_backend, free[1].token_ids)
    out = tiny_backend.generate(PROMPTS[:2], stop=[stop], max_new_tokens=20)
    assert out[1].finish_reason == "stop" and out[1].text == free[1].text[: free[1].text.index(stop)]
    if stop not in free[0].text:  # the other row runs to its own end, unaffected
        assert (out[0].text, out[0].finish_reason) == (free[0].text, free[0].finish_reason)


def test_sampling_is_reproducible_by_seed_and_independent_of_batching(tiny_dir, tiny_backend):
    s = SamplingParams(temperature=1.0, top_p=0.9, top_k=50, seed=7)
    a = tiny_backend.generate(PROMPTS, max_new_tokens=12, sampling=s)
    b = tiny_backend.generate(PROMPTS, max_new_tokens=12, sampling=s)
    assert [c.text for c in a] == [c.text for c in b]
    one_by_one = make_backend(BackendSpec(model=str(tiny_dir), max_batch_size=1))
    assert [c.text for c in one_by_one.generate(PROMPTS, max_new_tokens=12, sampling=s)] == [
        c.text for c in a
    ]
    other = tiny_backend.generate(
        PROMPTS, max_new_tokens=12, sampling=SamplingParams(temperature=1.0, seed=8)
    )
    assert [c.text for c in other] != [c.text for c in a]
    # identical prompts in one call (a GRPO group) get different samples
    group = tiny_backend.generate([PROMPTS[0]] * 4, max_new_tokens=12, sampling=s)
    assert len({c.text for c in group}) == 4


def test_generate_ids_matches_generate(tiny_backend):
    ids = [tiny_backend.tokenize(p) for p in PROMPTS[:3]]
    a = tiny_backend.generate_ids(ids, max_new_tokens=8)
    b = tiny_backend.generate(PROMPTS[:3], max_new_tokens=8)
    assert [c.text for c in a] == [c.text for c in b]


def test_chat_prompt_uses_the_models_template(tiny_backend):
    p = tiny_backend.chat_prompt([{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}])
    assert p == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n"
    cont = tiny_backend.chat_prompt([{"role": "user", "content": "Q"}], add_generation_prompt=False)
    assert cont.endswith("<|im_start|>user\nQ<|im_end|>\n")


def test_describe_and_bad_input(tiny_backend, tiny_dir):
    d = tiny_backend.describe()
    assert d["backend"] == "transformers" and d["dtype"] == "float32" and d["threads"] == 1
    assert d["revision"].startswith("sha256:") and len(d["revision"]) == 7 + 64
    with pytest.raises(ConfigError, match="max_new_tokens"):
        tiny_backend.generate(["x"], max_new_tokens=0)
    bf16 = make_backend(BackendSpec(model=str(tiny_dir), dtype="bfloat16"))
    assert bf16.describe()["dtype"] == "bfloat16"
    assert bf16.generate(["hello"], max_new_tokens=3)[0].completion_tokens == 3


def test_the_packaged_model_answers_and_stops(smollm2_backend):
    """The real SmolLM2-135M-Instruct: a known answer, a stop string, and batching (one test)."""
    b = smollm2_backend
    qs = ["What is the capital of France?", "What is 2+2?", "Name a color."]
    prompts = [b.chat_prompt([{"role": "user", "content": q}]) for q in qs]
    out = b.generate(prompts, max_new_tokens=24)
    assert out[0].text == "The capital of France is Paris." and out[0].finish_reason == "eos"
    assert out[0].token_ids[-1] == b.tokenizer.eos_token_id
    assert [c.text for c in out[1:]] == [b.generate([p], max_new_tokens=24)[0].text for p in prompts[1:]]
    cut = b.generate(prompts[:1], stop=["Paris"], max_new_tokens=24, include_stop=True)[0]
    assert (cut.text, cut.stop, cut.finish_reason) == ("The capital of France is Paris", "Paris", "stop")
    assert b.describe()["revision"].startswith("gguf-sha256:")


def test_sampling_draws_each_token_with_its_probability():
    """The exponential race (argmax p / E, E = -log U drawn from each row's own generator) samples
    token i with probability p_i: 20,000 seeded draws over a 4-token distribution (after
    temperature) match it within 0.015, and top-p removes the tail."""
    import torch

    from harness.llm.transformers_backend import _pick, _RowNoise
    from harness.types import SamplingParams

    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]])).repeat(20_000, 1)
    gens = [torch.Generator(device="cpu").manual_seed(i) for i in range(20_000)]
    noise = _RowNoise(gens, 2)
    picks = _pick(logits, SamplingParams(temperature=1.0, top_p=1.0, seed=0), noise.next(logits))
    freq = torch.bincount(picks, minlength=4).float() / len(picks)
    assert torch.allclose(freq, torch.tensor([0.5, 0.3, 0.15, 0.05]), atol=0.015), freq
    hot = _pick(logits * 2.0, SamplingParams(temperature=2.0, top_p=0.8, seed=0), noise.next(logits))
    freq = torch.bincount(hot, minlength=4).float() / len(hot)  # p again, top 80%
    assert freq[2:].sum() == 0 and abs(float(freq[0]) - 0.5 / 0.8) < 0.015, freq


def test_row_noise_drawn_in_blocks_is_the_same_stream_on_the_cpu():
    """A GPU draws each row's noise several steps at a time (one launch per row per block); on the
    CPU a (k, V) draw is the same stream as k (V,) draws, so blocks change no CPU token, also
    after rows leave the batch mid-block."""
    import torch

    from harness.llm.transformers_backend import _RowNoise

    like = torch.zeros(3, 50)

    def draws(block: int) -> list[torch.Tensor]:
        noise = _RowNoise([torch.Generator().manual_seed(s) for s in (7, 8, 9)], 9, block=block)
        out = []
        for step in range(9):
            if step == 4:
                noise.keep([0, 2])  # row 1 stopped
                like_now = like[:2]
            else:
                like_now = like if step < 4 else like[:2]
            out.append(noise.next(like_now).clone())
        return out

    one, five = draws(1), draws(5)
    assert all(torch.equal(a, b) for a, b in zip(one, five, strict=True))
    assert not torch.equal(one[0][0], one[1][0])  # a row's steps differ
