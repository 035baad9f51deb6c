"""The ``openai`` backend against a REAL OpenAI-compatible server: llama.cpp's (xllamacpp), started
by the test on 127.0.0.1 over the packaged GGUF (no mock). Spec and error tests need no server."""

from __future__ import annotations

import pydantic
import pytest

from harness.errors import ServerError
from harness.llm import BackendSpec, make_backend
from harness.llm.server import free_port
from harness.types import SamplingParams

COLORS = [{"role": "user", "content": "Name three colors."}]
QUESTIONS = ["Name three colors.", "Name two animals.", "Count from one to five.", "Name a fruit."]
llamacpp = pytest.mark.llamacpp


def _backend(srv, **kw):
    spec = dict(
        kind="openai", model="smollm2", base_urls=srv.base_url, server="llamacpp", tokenizer="default"
    )
    spec.update(kw)
    return make_backend(BackendSpec(**spec))


@pytest.mark.integration
@llamacpp
def test_completions_with_stop_strings_are_exact(llama_server):
    b = _backend(llama_server)
    prompt = b.chat_prompt(COLORS)
    free = b.generate([prompt], max_new_tokens=40)[0]
    assert free.finish_reason == "eos" and "Blue" in free.text  # greedy: "1. Red\n2. Blue\n3. Green"
    before = free.text[: free.text.index("Blue")]
    c = b.generate([prompt], stop=["never", "Blue"], max_new_tokens=40)[0]
    assert (c.text, c.stop, c.finish_reason) == (before, "Blue", "stop")
    c = b.generate([prompt], stop=["never", "Blue"], max_new_tokens=40, include_stop=True)[0]
    assert c.text == before + "Blue"
    assert c.prompt_tokens == b.count_tokens(prompt)
    assert c.completion_tokens == len(b.tokenizer.encode(before + "Blue", add_special_tokens=False))
    short = b.generate([prompt], max_new_tokens=3)[0]
    assert short.finish_reason == "length" and free.text.startswith(short.text)


@llamacpp
def test_server_mode_uses_usage_and_counts_unknown_stops(llama_server):
    b = _backend(llama_server, stop_mode="server")
    prompt = b.chat_prompt(COLORS)
    free = b.generate([prompt], max_new_tokens=40)[0]
    # token counts are the server's: llama.cpp counts the generated tokens with the EOS token
    assert free.prompt_tokens == b.count_tokens(prompt)
    assert free.completion_tokens == len(b.tokenizer.encode(free.text, add_special_tokens=False)) + 1
    assert free.finish_reason == "eos"  # no stop strings were sent, so "stop" can only be EOS
    c = b.generate([prompt], stop=["Blue"], max_new_tokens=40, include_stop=True)[0]
    # llama.cpp does not say which stop string (or EOS) ended it: recorded as unknown, not guessed
    assert (c.text, c.stop, c.finish_reason) == (free.text[: free.text.index("Blue")], None, "stop")
    assert b.stats["stop_unknown"] == 1 and b.stats["usage_server"] == 2


@llamacpp
def test_chat_matches_the_raw_prompt_path(llama_server):
    b = _backend(llama_server)
    chat = b.chat(COLORS, max_new_tokens=40)
    raw = b.generate([b.chat_prompt(COLORS)], max_new_tokens=40)[0]
    assert (chat.text, chat.finish_reason) == (raw.text, "eos")  # no stop strings: "stop" is EOS
    assert chat.prompt_tokens == raw.prompt_tokens  # the server applied the same template


@llamacpp
def test_concurrent_requests_keep_order_and_spread_over_urls(llama_server):
    seq = _backend(llama_server, concurrency=1)
    prompts = [seq.chat_prompt([{"role": "user", "content": q}]) for q in QUESTIONS]
    expected = [c.text for c in seq.generate(prompts, max_new_tokens=16)]
    assert len(set(expected)) == len(QUESTIONS)
    urls = f"{llama_server.base_url},http://localhost:{llama_server.port}/v1"
    par = _backend(llama_server, concurrency=4, base_urls=urls)
    out = par.generate(prompts, max_new_tokens=16)
    assert [c.text for c in out] == expected
    assert par.stats[f"requests:{llama_server.base_url}"] == 2
    assert par.stats[f"requests:http://localhost:{llama_server.port}/v1"] == 2


@llamacpp
def test_model_auto_and_sampling_seed(llama_server):
    b = _backend(llama_server, model="auto")
    assert b.model_name == "smollm2"
    s = SamplingParams(temperature=1.0, seed=11)
    prompt = b.chat_prompt(COLORS)
    a1, a2 = (b.generate([prompt], max_new_tokens=12, sampling=s)[0].text for _ in range(2))
    assert a1 == a2


@llamacpp
def test_a_failed_request_is_recorded_not_raised(llama_server):
    b = _backend(llama_server, retries=0)
    too_long = "word " * 3000  # beyond the server's n_ctx of 2048
    out = b.generate([too_long, b.chat_prompt(COLORS)], max_new_tokens=8)
    assert out[0].finish_reason == "error" and out[0].completion_tokens == -1
    assert out[1].finish_reason in ("stop", "eos", "length") and out[1].text
    assert b.stats["errors"] == 1 and "context" in (b.last_error or "").lower()


def test_unreachable_server_names_the_url():
    url = f"http://127.0.0.1:{free_port()}/v1"
    b = make_backend(BackendSpec(kind="openai", model="m", base_urls=url, retries=1, backoff=0.01, timeout=5))
    with pytest.raises(ServerError, match=rf"{url}.*harness serve-model"):
        b.generate(["hi"], max_new_tokens=4)
    assert b.stats["retries"] == 1


def test_spec_and_api_key(monkeypatch):
    with pytest.raises(pydantic.ValidationError, match="needs base_urls"):
        BackendSpec(kind="openai", model="m")
    with pytest.raises(pydantic.ValidationError, match="http"):
        BackendSpec(kind="openai", model="m", base_urls="localhost:8000")
    spec = BackendSpec(kind="openai", model="m", base_urls="http://a/v1/, http://b/v1", api_key_env="MY_KEY")
    assert spec.base_urls == ("http://a/v1", "http://b/v1")
    monkeypatch.delenv("MY_KEY", raising=False)
    assert make_backend(spec).clients[0].api_key == "EMPTY"
    monkeypatch.setenv("MY_KEY", "sk-test")
    assert [c.api_key for c in make_backend(spec).clients] == ["sk-test", "sk-test"]
    b = make_backend(spec)
    with pytest.raises(Exception, match="top_k is not part of the OpenAI API"):
        b._sampling_kwargs(SamplingParams(temperature=1.0, top_k=5))
    assert b._sampling_kwargs(SamplingParams()) == {"temperature": 0.0, "top_p": 1.0}
