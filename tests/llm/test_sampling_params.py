"""``repetition_penalty`` and ``top_k``: validated, hashed into the protocol id only when set, and
sent by every backend (transformers token by token against ``model.generate``, llama.cpp on the
packaged GGUF, the OpenAI backend's request bodies on a loopback fake server, vLLM's mapping)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pydantic
import pytest

from harness.errors import ConfigError
from harness.eval.protocol import preset
from harness.llm import BackendSpec, make_backend
from harness.protocol import Decoding
from harness.types import SamplingParams

PROMPTS = [
    "The capital of France is",
    "Question: who wrote Hamlet?\nAnswer:",
    "1, 2, 3,",
    "A much longer prompt than the others, so that left padding really matters in the batch here.",
]
REPEATS = "1, 1, 1, 1, 1, 1, 1, 1,"  # SmolLM2 continues it greedily with " 1, 1, 1"
llamacpp = pytest.mark.llamacpp


# -- validation and the protocol id --------------------------------------------------------------
def test_values_are_validated():
    with pytest.raises(ConfigError, match="top_k must be 0"):
        SamplingParams(top_k=-1)
    for bad in (0.0, -1.3):
        with pytest.raises(ConfigError, match="repetition_penalty must be positive"):
            SamplingParams(repetition_penalty=bad)
    with pytest.raises(pydantic.ValidationError, match="top_k"):
        Decoding(top_k=-1)
    with pytest.raises(pydantic.ValidationError, match="repetition_penalty"):
        Decoding(repetition_penalty=0)


def test_decoding_becomes_the_runs_sampling():
    d = Decoding(temperature=0.7, top_p=0.8, top_k=20, repetition_penalty=1.05, seed=3)
    assert d.sampling() == SamplingParams(
        temperature=0.7, top_p=0.8, top_k=20, seed=3, repetition_penalty=1.05
    )
    assert Decoding().sampling() == SamplingParams(seed=0)


def test_each_field_changes_the_protocol_id_only_when_set():
    mini = preset("mini")
    decoding = json.loads(mini.canonical_json())["decoding"]
    assert decoding == {"max_new_tokens": 500, "seed": 0, "temperature": 0.0, "top_p": 1.0}
    same = mini.with_(decoding=Decoding(top_k=0, repetition_penalty=1.0).model_dump())
    assert same.protocol_id == mini.protocol_id
    ids = {mini.protocol_id}
    for change in ({"top_k": 20}, {"repetition_penalty": 1.05}, {"top_k": 20, "repetition_penalty": 1.05}):
        p = mini.with_(decoding=Decoding(**change).model_dump())
        assert json.loads(p.canonical_json())["decoding"] == {**decoding, **change}
        ids.add(p.protocol_id)
    assert len(ids) == 4


# -- transformers --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def repeating_backend(smollm2_dir, tmp_path_factory):
    """A random Llama like ``tiny_dir`` but with transformers' default ``initializer_range`` 0.02,
    under which the tied embeddings dominate and greedy decoding repeats itself: the penalty acts."""
    from tests.support.tiny_model import save_tiny_llama

    out = save_tiny_llama(
        tmp_path_factory.mktemp("repeating-llama"), max_position_embeddings=512, tokenizer_from=smollm2_dir
    )
    return make_backend(BackendSpec(model=str(out), max_batch_size=8))


def _hf_greedy(backend, prompt: str, n: int, penalty: float) -> list[int]:
    import torch

    ids = torch.tensor([backend.prompt_ids(prompt)])
    out = backend.model.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        do_sample=False,
        repetition_penalty=penalty,
        max_new_tokens=n,
        pad_token_id=backend.pad_id,
    )
    return out[0, ids.shape[1] :].tolist()


def _unique_token(b, out) -> tuple[int, int, str]:
    """A row, a position >= 2 and the text of that row's token there, found nowhere else."""
    for row, c in enumerate(out):
        for at in range(2, len(c.token_ids)):
            piece = b.detokenize(c.token_ids[at : at + 1])
            before = b.detokenize(c.token_ids[:at])
            others = [o.text for i, o in enumerate(out) if i != row]
            if len(piece.strip()) >= 3 and piece not in before and all(piece not in t for t in others):
                return row, at, piece
    raise AssertionError("no token of the outputs is unique")


def test_transformers_penalty_is_generates_token_by_token(repeating_backend):
    b, n = repeating_backend, 12
    plain = b.generate(PROMPTS, max_new_tokens=n)
    for p, c0 in zip(PROMPTS, plain, strict=True):
        assert c0.token_ids == _hf_greedy(b, p, n, 1.0) == [b.prompt_ids(p)[-1]] * n  # a loop
    for penalty, breaks in [(1.3, [True, False, True, False]), (3.0, [True] * 4)]:
        pen = SamplingParams(repetition_penalty=penalty)
        out = b.generate(PROMPTS, max_new_tokens=n, sampling=pen)  # one left-padded batch
        for p, c in zip(PROMPTS, out, strict=True):
            assert c.token_ids == _hf_greedy(b, p, n, penalty)
        # 1.3 breaks the loop on two prompts, 3.0 on all
        assert [c.token_ids != c0.token_ids for c, c0 in zip(out, plain, strict=True)] == breaks
    # a row that stops early leaves the batch; the others keep their penalty history
    row, at, stop = _unique_token(b, out)
    cut = b.generate(PROMPTS, stop=[stop], max_new_tokens=n, sampling=pen)
    assert (cut[row].finish_reason, cut[row].token_ids) == ("stop", out[row].token_ids[:at])
    assert [c.token_ids for i, c in enumerate(cut) if i != row] == [
        c.token_ids for i, c in enumerate(out) if i != row
    ]
    # the penalty comes before sampling: top-1 sampling is greedy decoding on the penalised logits
    top1 = SamplingParams(temperature=1.0, top_k=1, seed=5, repetition_penalty=3.0)
    assert [c.token_ids for c in b.generate(PROMPTS, max_new_tokens=n, sampling=top1)] == [
        c.token_ids for c in out
    ]


# -- llama.cpp -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def llamacpp_one_slot():
    b = make_backend(BackendSpec(kind="llamacpp", n_ctx=512, max_batch_size=1))
    yield b
    b.close()


@llamacpp
def test_llamacpp_sends_the_fields_and_the_penalty_acts(llamacpp_one_slot, monkeypatch):
    b = llamacpp_one_slot
    bodies: list[dict] = []
    call = b._call

    def record(method, path, body=None, *a, **kw):
        if path == "/completion":
            bodies.append(body)
        return call(method, path, body, *a, **kw)

    monkeypatch.setattr(b, "_call", record)
    free = b.generate([REPEATS], max_new_tokens=8)[0]
    assert free.text == " 1, 1, 1"
    assert (bodies[0]["repeat_penalty"], bodies[0]["top_k"]) == (1.0, 0) and "repeat_last_n" not in bodies[0]
    pen = b.generate([REPEATS], max_new_tokens=8, sampling=SamplingParams(repetition_penalty=1.3))[0]
    assert not pen.text.startswith(" 1")
    assert (bodies[1]["repeat_penalty"], bodies[1]["repeat_last_n"]) == (1.3, 512)  # the whole context
    top1 = SamplingParams(temperature=1.0, top_k=1, seed=5, repetition_penalty=1.3)
    assert b.generate([REPEATS], max_new_tokens=8, sampling=top1)[0].token_ids == pen.token_ids
    assert bodies[2]["top_k"] == 1


# -- OpenAI-compatible servers -------------------------------------------------------------------
@pytest.mark.integration
@llamacpp
def test_openai_backend_penalises_on_a_real_llamacpp_server(llama_server, llamacpp_one_slot):
    b = make_backend(
        BackendSpec(
            kind="openai",
            model="smollm2",
            base_urls=llama_server.base_url,
            server="llamacpp",
            tokenizer="default",
        )
    )
    assert b.generate([REPEATS], max_new_tokens=8)[0].text == " 1, 1, 1"
    pen = SamplingParams(repetition_penalty=1.3)
    text = b.generate([REPEATS], max_new_tokens=8, sampling=pen)[0].text
    assert text == llamacpp_one_slot.generate([REPEATS], max_new_tokens=8, sampling=pen)[0].text
    assert b._llamacpp_n_ctx == 2048  # the server's context, its repeat_last_n


class _Recorder(BaseHTTPRequestHandler):
    """A fake OpenAI-compatible server: records each completion request's JSON body."""

    bodies: list[dict] = []

    def _send(self, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        # llama.cpp's /v1/models carries the context size in meta
        self._send({"object": "list", "data": [{"id": "m", "object": "model", "meta": {"n_ctx": 2048}}]})

    def do_POST(self) -> None:
        self.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self._send(
            {
                "id": "c",
                "object": "text_completion",
                "created": 0,
                "model": "m",
                "choices": [{"index": 0, "text": "ok", "finish_reason": "length", "logprobs": None}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        )

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def fake_openai():
    _Recorder.bodies = []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1", _Recorder.bodies
    srv.shutdown()
    srv.server_close()
    t.join(timeout=10)


SET = SamplingParams(top_k=20, repetition_penalty=1.05)


def _sent(url: str, bodies: list[dict], server: str, sampling: SamplingParams) -> dict:
    b = make_backend(
        BackendSpec(kind="openai", model="m", base_urls=url, server=server, stop_mode="server", retries=0)
    )
    assert b.generate(["hi"], max_new_tokens=1, sampling=sampling)[0].text == "ok"
    return bodies.pop()


@pytest.mark.integration
def test_openai_request_bodies_carry_the_fields_only_when_set(fake_openai):
    url, bodies = fake_openai
    vllm = _sent(url, bodies, "vllm", SamplingParams())
    assert "top_k" not in vllm and "repetition_penalty" not in vllm and vllm["skip_special_tokens"] is False
    vllm = _sent(url, bodies, "vllm", SET)
    assert (vllm["top_k"], vllm["repetition_penalty"]) == (20, 1.05)
    generic = _sent(url, bodies, "generic", SamplingParams())
    assert not {"top_k", "repetition_penalty", "repeat_penalty", "skip_special_tokens"} & set(generic)
    llama = _sent(url, bodies, "llamacpp", SamplingParams())
    assert (llama["top_k"], llama["repeat_penalty"], llama["min_p"]) == (0, 1.0, 0.0)
    assert "repeat_last_n" not in llama
    llama = _sent(url, bodies, "llamacpp", SET)
    assert (llama["top_k"], llama["repeat_penalty"], llama["repeat_last_n"]) == (20, 1.05, 2048)
    b = make_backend(BackendSpec(kind="openai", model="m", base_urls=url, retries=0))
    with pytest.raises(ConfigError, match="repetition_penalty is not part of the OpenAI API"):
        b.generate(["hi"], max_new_tokens=1, sampling=SamplingParams(repetition_penalty=1.05))
    assert bodies == []


# -- vLLM ----------------------------------------------------------------------------------------
def test_vllm_sampling_params_mapping():
    from harness.llm.vllm_backend import sampling_kwargs

    kw = sampling_kwargs(SET, stop=[], max_new_tokens=8, seed=1)
    assert (kw["top_k"], kw["repetition_penalty"]) == (20, 1.05)
    kw = sampling_kwargs(SamplingParams(), stop=[], max_new_tokens=8, seed=1)
    assert kw["top_k"] == 0 and "repetition_penalty" not in kw  # vLLM's defaults: 0 and 1.0, off
