"""The in-process ``vllm`` backend: the backend contract (exact stops, token ids, counts, seeds,
token-id prompts) and greedy agreement with the transformers backend on Search-R1 prompts."""

from __future__ import annotations

import json
import os

import pytest

from harness.errors import ConfigError
from harness.eval.protocol import preset
from harness.llm import BackendSpec, make_backend
from harness.types import SamplingParams
from methods.search_r1.method import make_prompt
from methods.search_r1.render import SEARCH_R1_DIALECT

STOPS = SEARCH_R1_DIALECT.stops  # ["</search>", "</answer>"]
QUESTIONS = [
    "Who wrote the novel Pride and Prejudice",
    "What is the capital city of Australia",
    "Which planet is known as the Red Planet",
    "Who was the first president of the United States",
    "In which country is the Eiffel Tower located",
    "What is the chemical symbol for gold",
    "Who painted the ceiling of the Sistine Chapel",
    "Which river flows through Cairo",
]
# a second turn: the model's search, then Search-R1's observation block (generation.py wraps the
# stripped documents in "\n\n<information>...</information>\n\n")
OBSERVATION = (
    '\n\n<information>Doc 1(Title: "Canberra") Canberra is the capital city of Australia. Founded '
    "following the federation of the colonies of Australia as the seat of government for the new "
    "nation, it is the country's largest inland city.</information>\n\n"
)
COLORS = [{"role": "user", "content": "Name three colors."}]


def _protocol_sampling() -> SamplingParams:
    d = preset("mini").decoding  # Search-R1's evaluation decoding: greedy, seed 0
    return SamplingParams(temperature=d.temperature, top_p=d.top_p, seed=d.seed)


def _prompts(b) -> list[str]:
    first = [b.chat_prompt(make_prompt(q)) for q in QUESTIONS]
    second = (
        first[1]
        + "<think> I need the capital of Australia. </think>\n<search> capital of Australia </search>"
    )
    return [*first, second + OBSERVATION]


def _check_contract(b, c) -> None:
    """What every completion of an in-process backend guarantees (harness/llm/base.py)."""
    assert c.token_ids is not None
    if c.finish_reason == "eos":
        assert c.token_ids[-1] == b.tokenizer.eos_token_id
        assert b.detokenize(c.token_ids[:-1]) == c.text
    else:
        assert b.detokenize(c.token_ids) == c.text
    if c.finish_reason == "stop":
        assert c.stop in STOPS and c.text.endswith(c.stop)  # include_stop=True
    else:
        assert c.stop is None
    assert c.completion_tokens >= len(c.token_ids) - (c.finish_reason == "eos")


def test_stop_strings_token_ids_and_counts_are_exact(vllm_backend):
    b = vllm_backend
    prompt = b.chat_prompt(COLORS)
    free = b.generate([prompt], max_new_tokens=40)[0]
    # greedy SmolLM2-135M (the llama.cpp server test sees the same text from the Q4_1 GGUF)
    assert (free.text, free.finish_reason, free.stop) == ("1. Red\n2. Blue\n3. Green", "eos", None)
    assert free.token_ids[-1] == b.tokenizer.eos_token_id and b.detokenize(free.token_ids[:-1]) == free.text
    assert free.completion_tokens == len(free.token_ids)  # the EOS token counts
    assert free.prompt_tokens == len(b.prompt_ids(prompt))
    before = free.text[: free.text.index("Blue")]
    c = b.generate([prompt], stop=["never", "Blue"], max_new_tokens=40)[0]
    assert (c.text, c.stop, c.finish_reason) == (before, "Blue", "stop")
    assert b.detokenize(c.token_ids) == before
    # every token the model generated counts, the stop string's included
    assert c.completion_tokens == len(b.tokenize(before + "Blue"))
    c = b.generate([prompt], stop=["never", "Blue"], max_new_tokens=40, include_stop=True)[0]
    assert (c.text, c.stop) == (before + "Blue", "Blue") and b.detokenize(c.token_ids) == c.text
    # a stop string inside one token (". R" -> ". Red"): the text is cut inside it, ids re-aligned
    c = b.generate([prompt], stop=[". R"], max_new_tokens=40, include_stop=True)[0]
    assert (c.text, c.stop) == ("1. R", ". R") and b.detokenize(c.token_ids) == "1. R"
    short = b.generate([prompt], max_new_tokens=3)[0]
    assert (short.finish_reason, short.completion_tokens) == ("length", 3)
    assert short.token_ids == free.token_ids[:3] and free.text.startswith(short.text)
    chat = b.chat(COLORS, max_new_tokens=40)
    assert (chat.text, chat.finish_reason) == (free.text, "eos")
    with pytest.raises(ConfigError, match="max_model_len"):
        b.generate([prompt], max_new_tokens=4000)
    assert b.unaligned == 0


def test_token_id_prompts_and_seeds(vllm_backend):
    b = vllm_backend
    prompts = _prompts(b)[:3]
    by_text = b.generate(prompts, stop=STOPS, max_new_tokens=24, include_stop=True)
    by_ids = b.generate_ids(
        [b.prompt_ids(p) for p in prompts], stop=STOPS, max_new_tokens=24, include_stop=True
    )
    assert [c.token_ids for c in by_ids] == [c.token_ids for c in by_text]
    # sampling: a seed reproduces a call; identical prompts in one call get their own seeds
    hot = SamplingParams(temperature=1.0, seed=7)
    group = [prompts[0]] * 4
    a = b.generate(group, max_new_tokens=16, sampling=hot)
    again = b.generate(group, max_new_tokens=16, sampling=hot)
    assert [c.token_ids for c in a] == [c.token_ids for c in again]
    assert len({tuple(c.token_ids) for c in a}) > 1
    # seed + index: the second prompt of a seed-7 call is the first of a seed-8 call
    shifted = b.generate([prompts[0]], max_new_tokens=16, sampling=SamplingParams(temperature=1.0, seed=8))
    assert shifted[0].token_ids == a[1].token_ids
    other = b.generate(group, max_new_tokens=16, sampling=SamplingParams(temperature=1.0, seed=1000))
    assert [c.token_ids for c in other] != [c.token_ids for c in a]


def _agreement(ref: list, got: list) -> dict[str, float]:
    prefixes, longest = [], []
    for r, g in zip(ref, got, strict=True):
        n = 0
        while n < min(len(r.token_ids), len(g.token_ids)) and r.token_ids[n] == g.token_ids[n]:
            n += 1
        prefixes.append(n)
        longest.append(max(len(r.token_ids), len(g.token_ids)))
    return {
        "prompts": len(ref),
        "identical": sum(r.token_ids == g.token_ids for r, g in zip(ref, got, strict=True)) / len(ref),
        "first_token": sum(p > 0 for p in prefixes) / len(ref),
        "token_prefix": sum(prefixes) / sum(longest),
        "prefix_lengths": prefixes,
    }


MAX_NEW_TOKENS = 128  # the protocol allows 500 per turn; 128 keeps the test near a minute on CPU
LONG_TOKENS = 96  # the same prompts without stop strings: longer sequences to compare


def test_greedy_agrees_with_transformers_token_by_token(vllm_backend, record_property):
    """Greedy continuations of the vLLM engine and the transformers backend, both float32, on the
    Search-R1 prompts of eight questions and of one second turn after an observation.

    vLLM runs its own CPU kernels (attention over a paged KV cache, its own GEMM and RMSNorm
    paths), so its logits equal transformers' only up to float32 rounding; greedy decoding flips
    only where the two best logits are that close. Measured here: identical everywhere
    (docs/vllm-cpu.md). Asserted: the Search-R1 turns (stopped at ``</search>``/``</answer>``)
    are identical token for token (ids, text, finish reason, stop string, counts); the longer
    continuations without stops agree on the first token everywhere and are identical on at least
    7 of 9 prompts, a floor that leaves room for one or two rounding ties on another CPU. The
    rates are printed and recorded (junit property ``vllm_transformers_agreement``)."""
    b = vllm_backend
    prompts = _prompts(b)
    sampling = _protocol_sampling()
    turn = dict(stop=STOPS, max_new_tokens=MAX_NEW_TOKENS, sampling=sampling, include_stop=True)
    long = dict(max_new_tokens=LONG_TOKENS, sampling=sampling)
    got, got_long = b.generate(prompts, **turn), b.generate(prompts, **long)
    with make_backend(BackendSpec(model="default", dtype="float32", max_batch_size=8)) as tf:
        assert [tf.prompt_ids(p) for p in prompts] == [b.prompt_ids(p) for p in prompts]
        ref, ref_long = tf.generate(prompts, **turn), tf.generate(prompts, **long)
    for c in got:
        _check_contract(b, c)
    stats = {"search_r1_turn": _agreement(ref, got), "no_stops": _agreement(ref_long, got_long)}
    record_property("vllm_transformers_agreement", json.dumps(stats))
    mode = "dynamo, no inductor" if os.environ.get("VLLM_CPU_CI_ENV") == "1" else "inductor"
    print(f"\nvLLM ({mode}) vs transformers, float32, greedy: {stats}")
    for r, g in zip(ref, got, strict=True):
        assert (g.token_ids, g.text, g.finish_reason, g.stop) == (
            r.token_ids,
            r.text,
            r.finish_reason,
            r.stop,
        )
        assert (g.prompt_tokens, g.completion_tokens) == (r.prompt_tokens, r.completion_tokens)
    assert stats["no_stops"]["first_token"] == 1.0
    assert stats["no_stops"]["identical"] >= 7 / 9


def test_repetition_penalty_matches_transformers(vllm_backend):
    """vLLM's ``repetition_penalty`` covers the prompt and the output as transformers' processor
    does: the same greedy tokens (both float32), and the penalty breaks a loop."""
    b = vllm_backend
    prompts = [b.chat_prompt(COLORS), "1, 1, 1, 1, 1, 1, 1, 1,"]
    pen = SamplingParams(repetition_penalty=1.3)
    got = b.generate(prompts, max_new_tokens=24, sampling=pen)
    with make_backend(BackendSpec(model="default", dtype="float32", max_batch_size=8)) as tf:
        ref = tf.generate(prompts, max_new_tokens=24, sampling=pen)
    assert [c.token_ids for c in got] == [c.token_ids for c in ref]
    assert b.generate(prompts[1:], max_new_tokens=6)[0].text == " 1, 1,"
    assert got[1].text == " 2\n```"
