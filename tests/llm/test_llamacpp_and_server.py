"""llama.cpp (xllamacpp) in-process, the ModelServer / ``harness serve-model`` lifecycle (SIGTERM,
SIGKILL, bad ports, a broken GGUF), and the vLLM backend's mapping onto vLLM's API (vLLM itself
needs a GPU)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from harness.errors import ConfigError, ServerError
from harness.llm import BackendSpec, make_backend
from harness.llm.server import ModelServer, free_port, port_is_free
from harness.types import SamplingParams

COLORS = [{"role": "user", "content": "Name three colors."}]
TOPICS = ["cats", "dogs", "the sea", "Paris"]
llamacpp = pytest.mark.llamacpp


@pytest.fixture(scope="module")
def llamacpp_backend():
    b = make_backend(BackendSpec(kind="llamacpp", n_ctx=1024, max_batch_size=4))
    yield b
    b.close()


def _metric(b, name: str) -> float:
    text = httpx.get(f"{b.url}/metrics", timeout=10).text
    return float(re.search(rf"^llamacpp:{name} (\S+)$", text, re.M).group(1))


@llamacpp
def test_llamacpp_in_process_stops_and_token_ids(llamacpp_backend):
    b = llamacpp_backend
    prompt = b.chat_prompt(COLORS)
    assert prompt.endswith("<|im_start|>user\nName three colors.<|im_end|>\n<|im_start|>assistant\n")
    assert b.prompt_ids(prompt) == b.tokenize(prompt)  # SmolLM2's GGUF adds no BOS
    free = b.generate([prompt], max_new_tokens=40)[0]
    (eos,) = b.tokenize("<|im_end|>")
    assert free.finish_reason == "eos" and free.token_ids[-1] == eos
    assert b.detokenize(free.token_ids[:-1]) == free.text and "Blue" in free.text
    assert free.prompt_tokens == b.count_tokens(prompt) and free.completion_tokens == len(free.token_ids)
    c = b.generate([prompt], stop=["never", "Blue"], max_new_tokens=40, include_stop=True)[0]
    assert (c.text, c.stop, c.finish_reason) == (free.text[: free.text.index("Blue") + 4], "Blue", "stop")
    assert b.detokenize(c.token_ids) == c.text and c.token_ids == free.token_ids[: len(c.token_ids)]
    c = b.generate([prompt], stop=["Blue"], max_new_tokens=40)[0]
    assert c.text == free.text[: free.text.index("Blue")] and b.detokenize(c.token_ids) == c.text
    short = b.generate([prompt], max_new_tokens=3)[0]
    assert (short.finish_reason, short.token_ids) == ("length", free.token_ids[:3])
    s = SamplingParams(temperature=1.0, seed=5)
    first = [x.text for x in b.generate([prompt] * 2, max_new_tokens=10, sampling=s)]
    assert first == [x.text for x in b.generate([prompt] * 2, max_new_tokens=10, sampling=s)]
    assert b.describe()["revision"] == (
        "gguf-sha256:b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    )


@llamacpp
def test_chat_template_matches_the_hf_tokenizer(llamacpp_backend, smollm2_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(smollm2_dir))
    convo = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Yo"},
    ]
    for messages, gen in [(COLORS, True), (COLORS, False), (convo, False), (convo, True)]:
        expected = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=gen)
        assert llamacpp_backend.chat_prompt(messages, add_generation_prompt=gen) == expected
    text = "Hello wörld 🤖 <|im_start|> <search>x</search>\n\n  spaces"
    assert llamacpp_backend.tokenize(text) == tok.encode(text, add_special_tokens=False)
    assert llamacpp_backend.detokenize(llamacpp_backend.tokenize(text)) == text


@llamacpp
def test_one_batch_is_decoded_together_and_the_next_turn_reuses_the_cache(llamacpp_backend):
    b = llamacpp_backend
    prompts = [b.chat_prompt([{"role": "user", "content": f"Tell me about {t}."}]) for t in TOPICS]
    decodes = _metric(b, "n_decode_total")
    first = b.generate(prompts, max_new_tokens=12)
    # one llama_decode per step for the whole batch (one at a time would need 4 x 12)
    assert _metric(b, "n_decode_total") - decodes < 2 * 12
    assert [c.finish_reason for c in first] == ["length"] * 4
    assert all(c.prefill_tokens is not None and c.prefill_tokens <= c.prompt_tokens for c in first)
    # the next turn in token space: prompt + generated ids + an observation
    obs = b.tokenize("\n<information>Cats are mammals.</information>\n")
    ids = [b.prompt_ids(p) + c.token_ids + obs for p, c in zip(prompts, first, strict=True)]
    second = b.generate_ids(ids, max_new_tokens=4)
    # each slot kept prompt + generated[:-1] (the last sampled token was never decoded): only that
    # token and the observation are computed
    assert [c.prefill_tokens for c in second] == [len(obs) + 1] * 4
    assert [c.prompt_tokens for c in second] == [len(i) for i in ids]


COUNTING = "Count: one two three four five six seven eight nine ten, one two three four five six seven eight nine ten, one two"


@llamacpp
def test_one_slot_by_default_and_ngram_drafting_when_asked():
    """The default llamacpp spec: one slot, no drafting, and a second backend gives the same tokens
    for the same batch. With ``draft="ngram"``, on text that repeats itself llama.cpp drafts from
    the repeat and the model accepts it, and a rerun repeats too."""
    prompts = [COUNTING, "Tell me about cats.", COUNTING.replace("Count", "Again")]
    runs: dict[str, list] = {"none": [], "ngram": []}
    for draft in ("none", "ngram", "none", "ngram"):
        asked = {} if draft == "none" else {"draft": draft}  # "none" is the default
        with make_backend(BackendSpec(kind="llamacpp", n_ctx=1024, **asked)) as b:
            assert (b.parallel, b.describe()["draft"]) == (1, draft)
            out = b.generate(prompts, max_new_tokens=48)
            runs[draft].append([c.token_ids for c in out])
            assert out[0].text.split()[:3] == ["three", "four", "five"]  # the counting goes on
            if draft == "none":
                assert b.drafted == 0
            else:  # most of the two counting answers came from drafts
                assert b.accepted >= 48 and b.drafted >= b.accepted
    assert runs["none"][0] == runs["none"][1] and runs["ngram"][0] == runs["ngram"][1]


def test_draft_and_batch_defaults_belong_to_their_backend():
    assert BackendSpec(kind="llamacpp").batch_limit == 1
    assert BackendSpec(kind="llamacpp", max_batch_size=4).batch_limit == 4
    assert BackendSpec(kind="transformers").batch_limit == 8
    assert BackendSpec(kind="llamacpp").draft == "none"
    spec = BackendSpec(kind="llamacpp", draft="ngram")
    assert BackendSpec.model_validate(spec.model_dump()) == spec  # a stored spec loads again
    with pytest.raises(ValueError, match="the transformers backend does not draft"):
        BackendSpec(kind="transformers", draft="ngram")


@llamacpp
def test_too_long_prompts_and_unknown_models_are_refused(llamacpp_backend, tmp_path):
    with pytest.raises(ConfigError, match="exceeds n_ctx=1024"):
        llamacpp_backend.generate_ids([[1] * 1000], max_new_tokens=100)
    with pytest.raises(ConfigError, match="neither a model preset"):
        make_backend(BackendSpec(kind="llamacpp", model=str(tmp_path / "missing.gguf")))


@llamacpp
def test_close_aborts_generations_in_flight():
    """An interrupted run closes its backend while requests are still decoding: close() aborts them
    (their sockets shut, llama.cpp cancels the tasks) instead of waiting for the token limit, so a
    SIGTERMed run exits at once rather than minutes later."""
    import threading

    from harness.errors import HarnessError

    b = make_backend(BackendSpec(kind="llamacpp", n_ctx=1024, max_batch_size=2))
    counting = ", ".join(str(i) for i in range(1, 30))
    outcome: list[object] = []

    def generate() -> None:
        try:
            outcome.append(b.generate([counting] * 2, max_new_tokens=900))
        except HarnessError as e:
            outcome.append(e)

    t = threading.Thread(target=generate)
    t.start()
    time.sleep(2)  # 2 x 900 tokens take SmolLM2 tens of seconds: the requests are in flight
    assert t.is_alive()
    b.close()
    t.join(timeout=120)
    assert not t.is_alive()
    (e,) = outcome
    assert isinstance(e, HarnessError) and "aborted by close()" in str(e), e


def test_threads_default_to_one_and_more_wait_passively(monkeypatch):
    from harness.llm.server import llama_threads, passive_omp_env

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert llama_threads(None) == 1 and llama_threads(3) == 3
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert llama_threads(None) == 2
    assert passive_omp_env(1, {}) == {}
    assert passive_omp_env(2, {"A": "1"}) == {"A": "1", "OMP_WAIT_POLICY": "PASSIVE"}
    assert passive_omp_env(2, {"OMP_WAIT_POLICY": "ACTIVE"}) == {"OMP_WAIT_POLICY": "ACTIVE"}  # the user's


@pytest.mark.integration
def test_a_busy_port_is_refused_before_starting():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(ServerError, match=rf"127.0.0.1:{port} is already in use"):
            ModelServer(port=port).start()


@pytest.mark.parametrize("port", ["70000", "-1", "0"])
def test_an_invalid_port_is_one_line(port, capsys):
    from harness.cli import main

    assert main(["serve-model", "--port", port]) == 2
    err = capsys.readouterr().err
    assert err == f"error: --port {port}: a TCP port is a number from 1 to 65535\n"


def _serve(port: int) -> tuple[subprocess.Popen[str], int, Path]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness",
            "serve-model",
            "--port",
            str(port),
            "--parallel",
            "1",
            "--n-ctx",
            "512",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    line = proc.stdout.readline()
    m = re.search(r"at http://127\.0\.0\.1:(\d+)/v1 \(server PID (\d+)\)", line)
    assert m and int(m.group(1)) == port, line
    log = re.search(r"log: (\S+)", proc.stdout.readline()).group(1)
    return proc, int(m.group(2)), Path(log)


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"  # a zombie holds no port and no memory; its new parent reaps it


def _wait_until(cond, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.1)
    return cond()


@pytest.mark.integration
@llamacpp
def test_serve_model_command_serves_and_stops_on_sigterm():
    port = free_port()
    proc, child, log = _serve(port)
    try:
        models = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=5).json()
        assert [m["id"] for m in models["data"]] == ["smollm2"]
        assert log.is_file() and "model server: listening on" in log.read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    assert _wait_until(lambda: _gone(child)) and port_is_free("127.0.0.1", port) and not log.exists()


@pytest.mark.integration
@llamacpp
def test_serve_model_killed_with_sigkill_leaves_no_process_port_or_log():
    from harness.llm.model_files import cache_root

    port = free_port()
    proc, child, log = _serve(port)
    assert log.parent == cache_root() / "logs" and not _gone(child) and not port_is_free("127.0.0.1", port)
    os.kill(proc.pid, signal.SIGKILL)  # no handler, no finally: the child must notice by itself
    proc.wait(timeout=10)
    assert _wait_until(lambda: _gone(child)), f"server process {child} outlived its killed parent"
    assert _wait_until(lambda: port_is_free("127.0.0.1", port))
    assert not log.exists()


@pytest.mark.integration
@llamacpp
def test_a_server_that_dies_at_startup_is_reported_with_its_log(tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"not a gguf file")
    srv = ModelServer(str(bad), startup_timeout=60)
    with pytest.raises(ServerError, match=r"exited with status 1 before answering .*/health") as e:
        srv.start()
    assert "Failed to init server" in str(e.value)
    assert not srv.log_path.exists()


def test_vllm_mapping_and_missing_vllm():
    import importlib.util

    from harness.errors import HarnessError
    from harness.llm.vllm_backend import engine_kwargs, sampling_kwargs

    spec = BackendSpec(kind="vllm", model="m", dtype="bfloat16", tensor_parallel_size=2, max_model_len=4096)
    assert engine_kwargs(spec, "/models/m") == {
        "model": "/models/m",
        "tokenizer": "/models/m",
        "dtype": "bfloat16",
        "tensor_parallel_size": 2,
        "gpu_memory_utilization": 0.9,
        "max_num_seqs": 8,
        "enable_prefix_caching": True,
        "trust_remote_code": False,
        "max_model_len": 4096,
    }
    kw = sampling_kwargs(
        SamplingParams(temperature=0.7, top_p=0.9), stop=["</search>", ""], max_new_tokens=64, seed=3
    )
    assert kw == {
        "n": 1,
        "temperature": 0.7,
        "top_p": 0.9,
        "top_k": 0,
        "seed": 3,
        "max_tokens": 64,
        "stop": ["</search>"],
        "include_stop_str_in_output": True,
        "skip_special_tokens": False,
        "spaces_between_special_tokens": False,
        "detokenize": True,
    }
    if importlib.util.find_spec("vllm") is None:
        with pytest.raises(HarnessError, match=r"rar-harness\[gpu\]"):
            make_backend(spec)
