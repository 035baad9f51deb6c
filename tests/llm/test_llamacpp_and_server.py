"""llama-cpp-python in-process, the ModelServer / ``harness serve-model`` lifecycle, and the vLLM
backend's mapping onto vLLM's API (vLLM itself needs a GPU)."""

from __future__ import annotations

import importlib.util
import signal
import subprocess
import sys
import time

import httpx
import pytest

from harness.errors import HarnessError, ServerError
from harness.llm import BackendSpec, make_backend
from harness.llm.server import ModelServer, free_port
from harness.types import SamplingParams

COLORS = [{"role": "user", "content": "Name three colors."}]
llamacpp = pytest.mark.llamacpp
needs_llama_cpp = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None,
    reason="llama-cpp-python is not installed (pip install 'rar-harness[llamacpp]')",
)


@llamacpp
@needs_llama_cpp
def test_llamacpp_in_process_stops_and_token_ids():
    b = make_backend(BackendSpec(kind="llamacpp", n_ctx=1024))
    try:
        prompt = b.chat_prompt(COLORS)
        assert prompt.endswith("<|im_start|>user\nName three colors.<|im_end|>\n<|im_start|>assistant\n")
        free = b.generate([prompt], max_new_tokens=40)[0]
        assert free.finish_reason == "eos" and free.token_ids[-1] == b.llm.token_eos()
        assert b.detokenize(free.token_ids[:-1]) == free.text
        assert free.prompt_tokens == b.count_tokens(prompt) and free.completion_tokens == len(free.token_ids)
        c = b.generate([prompt], stop=["Blue"], max_new_tokens=40, include_stop=True)[0]
        assert (c.text, c.stop) == (free.text[: free.text.index("Blue") + 4], "Blue")
        assert b.detokenize(c.token_ids) == c.text
        s = SamplingParams(temperature=1.0, seed=5)
        assert b.generate([prompt], max_new_tokens=10, sampling=s)[0].text == (
            b.generate([prompt], max_new_tokens=10, sampling=s)[0].text
        )
        assert b.describe()["revision"].startswith("gguf-sha256:")
    finally:
        b.close()


def test_a_busy_port_is_refused_before_starting():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(ServerError, match=rf"127.0.0.1:{port} is already in use"):
            ModelServer(port=port).start()


def test_model_server_without_llama_cpp_names_the_extra(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "llama_cpp" else real(n, *a))
    with pytest.raises(HarnessError, match=r"pip install 'rar-harness\[llamacpp\]'"):
        ModelServer().start()


@llamacpp
@needs_llama_cpp
def test_serve_model_command_serves_and_stops_on_sigterm():
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness", "serve-model", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert f"at http://127.0.0.1:{port}/v1" in line
        models = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=5).json()
        assert [m["id"] for m in models["data"]] == ["smollm2"]
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    time.sleep(0.5)
    with pytest.raises(httpx.ConnectError):  # the server child went down with it
        httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2)


@llamacpp
@needs_llama_cpp
def test_a_server_that_dies_at_startup_is_reported_with_its_log(tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"not a gguf file")
    with pytest.raises(ServerError, match=r"exited with status \d+ before answering .*/v1/models"):
        ModelServer(str(bad), startup_timeout=60).start()


def test_vllm_mapping_and_missing_vllm(tmp_path):
    from harness.llm.vllm_backend import engine_kwargs, eos_ids, sampling_kwargs

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
        "top_k": -1,
        "seed": 3,
        "max_tokens": 64,
        "stop": ["</search>"],
        "include_stop_str_in_output": True,
        "skip_special_tokens": False,
        "detokenize": True,
    }
    (tmp_path / "generation_config.json").write_text('{"eos_token_id": [2, 7]}')
    assert eos_ids(tmp_path, 2) == {2, 7}
    if importlib.util.find_spec("vllm") is None:
        with pytest.raises(HarnessError, match=r"rar-harness\[gpu\]"):
            make_backend(spec)
