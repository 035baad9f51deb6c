"""``harness serve-model``'s front (:mod:`harness.llm.front`) as the OpenAI SDK sees it.

The upstream fact pinned here is the completions logprobs shape the ``openai`` package parses:
``openai==3.57.0``, ``openai/types/completion_choice.py``: ``CompletionChoice.logprobs`` is
``Logprobs`` with ``tokens: List[str]``, ``token_logprobs: List[float]``,
``top_logprobs: List[Dict[str, float]]`` and ``text_offset: List[int]`` (all optional, so a reply in
another shape parses to ``None`` fields without an error: that was the bug). ``text_offset``
counts characters of the generated text from 0, as vLLM's ``_create_completion_logprobs``
(``vllm/entrypoints/openai/serving_completion.py``, ``initial_text_offset=0`` without echo).

The server tests use the real llama.cpp server behind the front (the ``llama_server`` fixture).
"""

from __future__ import annotations

import openai
import pytest
from openai.types.completion_choice import Logprobs

from harness.llm.front import RequestError, check_request, completion_logprobs

llamacpp = pytest.mark.llamacpp
PROMPT = "The capital of France is"

# llama.cpp's /v1/completions logprobs for PROMPT, max_tokens 3, logprobs 2 (xllamacpp, SmolLM2)
LLAMA_LOGPROBS = {
    "content": [
        {
            "id": 7042,
            "token": " Paris",
            "bytes": [32, 80, 97, 114, 105, 115],
            "logprob": -0.26,
            "top_logprobs": [
                {"id": 7042, "token": " Paris", "bytes": [32, 80, 97, 114, 105, 115], "logprob": -0.26},
                {"id": 260, "token": " the", "bytes": [32, 116, 104, 101], "logprob": -2.8},
            ],
        },
        {
            "id": 30,
            "token": ".",
            "bytes": [46],
            "logprob": -0.37,
            "top_logprobs": [
                {"id": 30, "token": ".", "bytes": [46], "logprob": -0.37},
                {"id": 28, "token": ",", "bytes": [44], "logprob": -1.6},
            ],
        },
    ]
}


def test_llamacpp_logprobs_become_the_completions_shape_the_sdk_parses():
    shaped, end = completion_logprobs(LLAMA_LOGPROBS)
    assert shaped == {
        "tokens": [" Paris", "."],
        "token_logprobs": [-0.26, -0.37],
        "top_logprobs": [{" Paris": -0.26, " the": -2.8}, {".": -0.37, ",": -1.6}],
        "text_offset": [0, 6],
    }
    assert end == 7
    parsed = Logprobs.model_validate(shaped)
    assert parsed.tokens == [" Paris", "."] and parsed.text_offset == [0, 6]
    # llama.cpp's own shape parses too, but to nothing: what the SDK saw before the front
    assert Logprobs.model_validate(LLAMA_LOGPROBS).tokens is None
    # a stream goes on from the previous event's end; a missing or converted value is left alone
    assert completion_logprobs(LLAMA_LOGPROBS, 7)[0]["text_offset"] == [7, 13]
    assert completion_logprobs(None, 5) == (None, 5)
    assert completion_logprobs(shaped, 3) == (shaped, 3)


@pytest.mark.parametrize(
    ("path", "body", "status", "message"),
    [
        ("/v1/completions", {"model": "gpt-4", "prompt": "x"}, 404, "model 'gpt-4' is not served here; this server serves 'smollm2'"),
        ("/v1/chat/completions", {"model": "smollm2", "messages": []}, 400, "'messages' must be a non-empty list"),
        ("/v1/chat/completions", {"model": "smollm2"}, 400, "'messages' must be a non-empty list"),
        ("/v1/completions", {"prompt": "x", "max_tokens": 10**12}, 400, "'max_tokens' must be a whole number from 1 to 2048 (the context per slot), got 1000000000000"),
        ("/v1/completions", {"prompt": "x", "max_tokens": 0}, 400, "from 1 to 2048"),
        ("/v1/completions", {"prompt": "x", "max_tokens": -1}, 400, "from 1 to 2048"),
        ("/v1/completions", {"prompt": "x", "max_tokens": 2049}, 400, "from 1 to 2048"),
        ("/v1/completions", {"prompt": "x", "max_tokens": 5.0}, 400, "got 5.0"),
        ("/v1/completions", {"prompt": "x", "max_tokens": True}, 400, "got True"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 0}, 400, "'max_completion_tokens'"),
        ("/completion", {"prompt": "x", "n_predict": 10**12}, 400, "'n_predict'"),
        ("/v1/completions", ["x"], 400, "must be a JSON object"),
        ("/v1/completions", {"prompt": "x", "logprobs": 1000000}, 400, "'logprobs' must be true, false or a whole number from 0 to 20 (OpenAI's cap), got 1000000"),
        ("/v1/completions", {"prompt": "x", "logprobs": 2.0}, 400, "got 2.0"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "logprobs": True, "top_logprobs": 21}, 400, "'top_logprobs' must be a whole number from 0 to 20"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "top_logprobs": True}, 400, "got True"),
        ("/completion", {"prompt": "x", "n_probs": 49152}, 400, "'n_probs' must be a whole number from 0 to 20"),
    ],
)  # fmt: skip
def test_requests_llamacpp_would_answer_wrongly_are_refused(path, body, status, message):
    with pytest.raises(RequestError) as e:
        check_request(path, body, alias="smollm2", n_ctx=2048)
    assert e.value.status == status and message in e.value.message


def test_requests_within_the_rules_pass():
    for body in (
        {"model": "smollm2", "prompt": "x", "max_tokens": 2048},
        {"prompt": "x", "max_tokens": None},  # no model: the served one (llama.cpp's default)
        {"messages": [{"role": "user", "content": "x"}], "max_tokens": 1},
        {"prompt": "x", "logprobs": 20},
        {"prompt": "x", "logprobs": 0, "n_probs": 0},
        {"messages": [{"role": "user", "content": "x"}], "logprobs": True, "top_logprobs": 20},
        {"messages": [{"role": "user", "content": "x"}], "logprobs": False},
    ):
        path = "/v1/chat/completions" if "messages" in body else "/v1/completions"
        assert check_request(path, body, alias="smollm2", n_ctx=2048) is None


@pytest.fixture(scope="module")
def client(llama_server):
    c = openai.OpenAI(base_url=llama_server.base_url, api_key="unused", max_retries=0, timeout=60)
    yield c
    c.close()


@pytest.mark.integration
@llamacpp
def test_an_unknown_model_is_404_naming_the_served_model(client):
    with pytest.raises(
        openai.NotFoundError, match="model 'gpt-4o' is not served here; this server serves 'smollm2'"
    ):
        client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "Hi"}], max_tokens=2
        )
    with pytest.raises(openai.NotFoundError, match="serves 'smollm2'"):
        client.completions.create(model="other", prompt=PROMPT, max_tokens=2)


@llamacpp
def test_empty_messages_is_400(client):
    with pytest.raises(openai.BadRequestError, match="'messages' must be a non-empty list"):
        client.chat.completions.create(model="smollm2", messages=[], max_tokens=2)


@llamacpp
def test_completions_logprobs_parse_in_the_sdk_shape_streamed_or_not(client):
    c = client.completions.create(model="smollm2", prompt=PROMPT, max_tokens=6, logprobs=3, temperature=0)
    (choice,) = c.choices
    lp = choice.logprobs
    assert isinstance(lp, Logprobs) and len(lp.tokens) == 6 == c.usage.completion_tokens
    assert "".join(lp.tokens) == choice.text
    assert lp.text_offset == [sum(len(t) for t in lp.tokens[:i]) for i in range(6)]
    assert all(isinstance(x, float) and x <= 0 for x in lp.token_logprobs)
    for token, logprob, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs, strict=True):
        assert 1 <= len(top) <= 3 and top[token] == logprob == max(top.values())  # greedy: the likeliest
    stream = client.completions.create(
        model="smollm2", prompt=PROMPT, max_tokens=6, logprobs=3, temperature=0, stream=True
    )
    tokens, offsets, text = [], [], ""
    for event in stream:
        for ch in event.choices:
            text += ch.text
            if ch.logprobs is not None:
                tokens += ch.logprobs.tokens
                offsets += ch.logprobs.text_offset
    assert (text, tokens, offsets) == (choice.text, lp.tokens, lp.text_offset)


@llamacpp
def test_chat_streaming_stops_and_n_keep_working(client):
    messages = [{"role": "user", "content": "Name three colors."}]
    chat = client.chat.completions.create(model="smollm2", messages=messages, max_tokens=12, temperature=0)
    text = chat.choices[0].message.content
    assert text == "1. Red\n2. Blue\n3. Green" and chat.choices[0].finish_reason == "stop"
    streamed = client.chat.completions.create(
        model="smollm2", messages=messages, max_tokens=12, temperature=0, stream=True
    )
    assert "".join(e.choices[0].delta.content or "" for e in streamed if e.choices) == text
    free = client.completions.create(model="smollm2", prompt=PROMPT, max_tokens=8, temperature=0).choices[0]
    word = free.text.split()[1]
    cut = client.completions.create(model="smollm2", prompt=PROMPT, max_tokens=8, temperature=0, stop=[word])
    assert cut.choices[0].text == free.text[: free.text.index(word)]
    assert cut.choices[0].finish_reason == "stop"
    two = client.completions.create(
        model="smollm2", prompt=PROMPT, max_tokens=4, n=2, temperature=1.0, seed=3
    )
    assert sorted(ch.index for ch in two.choices) == [0, 1] and all(ch.text for ch in two.choices)
    assert [m.id for m in client.models.list().data] == ["smollm2"]


@pytest.mark.parametrize(
    ("flag", "value", "line"),
    [
        ("--max-body-bytes", "0", "error: --max-body-bytes 0: input should be greater than or equal to 1\n"),
        ("--read-timeout", "-1", "error: --read-timeout -1.0: input should be greater than 0\n"),
        (
            "--max-connections",
            "0",
            "error: --max-connections 0: input should be greater than or equal to 1\n",
        ),
    ],
)
def test_bad_limits_are_one_line_before_anything_starts(flag, value, line, capsys):
    from harness.cli import main

    assert main(["serve-model", flag, value]) == 2
    assert capsys.readouterr().err == line


def test_a_missing_libgomp_or_xllamacpp_is_one_line_before_llamacpp_starts(monkeypatch, capsys):
    """Issue 61: without the system libgomp1 (or the xllamacpp wheel) `harness serve-model` failed
    with a traceback from `import xllamacpp`; now one line naming what to install."""
    import importlib.util

    from harness.cli import main
    from harness.llm import server

    server.check_llamacpp_runtime()  # this machine has both
    monkeypatch.setattr(server, "LIBGOMP", "libgomp-missing.so.9")
    assert main(["serve-model", "--port", str(server.free_port())]) == 2
    assert capsys.readouterr().err == (
        "error: llama.cpp (the xllamacpp wheel) needs the system OpenMP runtime libgomp-missing.so.9, "
        "which is not installed: `apt-get install libgomp1` (Debian, Ubuntu), `dnf install libgomp` "
        "(Fedora), `apk add libgomp` (Alpine)\n"
    )
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "xllamacpp" else real(name))
    with pytest.raises(
        server.ConfigError, match=r"needs the xllamacpp wheel, which is not installed: pip install"
    ):
        server.check_llamacpp_runtime()
    # where the loader cache cannot tell (musl), the import's own error is the same one line
    import builtins

    real_import = builtins.__import__

    def no_libgomp(name, *args, **kwargs):
        if name == "xllamacpp":
            raise ImportError("libgomp.so.1: cannot open shared object file: No such file or directory")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_libgomp)
    with pytest.raises(server.ConfigError, match=r"needs the system OpenMP runtime libgomp.so.1, which"):
        server.import_xllamacpp()
