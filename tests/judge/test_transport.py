"""The OpenAI transport's failure handling through the real ``openai`` client, against a small
local HTTP stub (a real server cannot be made to time out or fail on demand): timeouts, 5xx after
retries, a 429 that clears on retry, empty replies and logprobs; plus the rate limiter."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from harness.judge.core import Judge, JudgeItem
from harness.judge.prompts import get_prompt
from harness.judge.transport import OpenAITransport, RateLimiter, probe_server
from tests.judge.helpers import new_store


def _completion(text: str, finish: str = "stop", logprobs: list | None = None) -> dict:
    choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
    if logprobs is not None:
        choice["logprobs"] = {"content": logprobs}
    return {
        "id": "x", "object": "chat.completion", "created": 0, "model": "stub", "choices": [choice],
        "usage": {"prompt_tokens": 7, "completion_tokens": 1, "total_tokens": 8},
    }  # fmt: skip


class Stub(BaseHTTPRequestHandler):
    hits: dict[str, int] = {}
    answered: dict[str, int] = {}
    bodies: list[dict] = []
    release = threading.Event()

    def log_message(self, *args):  # quiet
        pass

    def _send(self, code: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path != "/v1/models":
            self._send(404, {"error": {"message": "not found"}})
            return
        self._send(200, {"object": "list", "data": [{"id": "stub", "object": "model", "owned_by": "vllm"}]})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Stub.bodies.append(body)
        user = body["messages"][-1]["content"]
        # the when_to_search prompt lower-cases the prediction
        tag = next(
            (t for t in ("SLOW", "BROKEN", "BUSY", "BLANK", "LOGP", "HALT") if t.lower() in user.lower()),
            "GOOD",
        )
        Stub.hits[tag] = Stub.hits.get(tag, 0) + 1
        if tag == "SLOW":
            time.sleep(1.0)
            self._send(200, _completion("YES"))
        elif tag == "BROKEN":
            self._send(500, {"error": {"message": "boom"}})
        elif tag == "BUSY" and Stub.hits[tag] == 1:
            self._send(429, {"error": {"message": "slow down"}})
        elif tag == "HALT":  # the user presses Ctrl-C (once) while this one is in flight
            if Stub.hits[tag] == 1:
                # once the requests before it are answered (polled, not timed: a loaded machine
                # delays threads by more than any fixed sleep), plus time for the client to store them
                deadline = time.monotonic() + 10
                while Stub.answered.get("GOOD", 0) < 4 and time.monotonic() < deadline:
                    time.sleep(0.01)
                time.sleep(1.0)
                os.kill(os.getpid(), signal.SIGINT)
            Stub.release.wait(30)  # never answered before the interrupt
        elif tag == "BLANK":
            self._send(200, _completion(""))
        elif tag == "LOGP":
            top = [{"token": "NO", "logprob": -0.2231435513}, {"token": "YES", "logprob": -1.6094379124}]
            self._send(
                200, _completion("NO", logprobs=[{"token": "NO", "logprob": -0.22, "top_logprobs": top}])
            )
        else:
            self._send(200, _completion("YES"))
            Stub.answered[tag] = Stub.answered.get(tag, 0) + 1


@pytest.fixture()
def stub():
    Stub.hits, Stub.answered, Stub.bodies, Stub.release = {}, {}, [], threading.Event()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    Stub.release.set()
    srv.shutdown()
    srv.server_close()


def _judge(url: str, tmp_path, prompt: str = "when_to_search", timeout: float = 0.3) -> Judge:
    t = OpenAITransport(url, "stub", concurrency=2, timeout=timeout, retries=1, backoff=0.01)
    return Judge(t, get_prompt(prompt), new_store(tmp_path))


@pytest.mark.integration
def test_failures_are_counted_by_status_and_retried(stub, tmp_path):
    judge = _judge(stub, tmp_path)
    preds = ["GOOD", "SLOW", "BROKEN", "BUSY", "BLANK"]
    out = judge.judge([JudgeItem("q", ("g",), p) for p in preds])
    assert [j.status for j in out.judgements] == ["ok", "timeout", "error", "ok", "empty"]
    assert [j.score for j in out.judgements] == [1.0, None, None, 1.0, None]
    assert Stub.hits == {"GOOD": 1, "SLOW": 2, "BROKEN": 2, "BUSY": 2, "BLANK": 1}  # one retry each
    assert "InternalServerError" in out.judgements[2].raw and "Timeout" in out.judgements[1].raw
    assert judge.transport.backend.stats["retries"] == 3
    # greedy, and the server kind from /models (vLLM) decides the extra sampling fields
    assert {b["temperature"] for b in Stub.bodies} == {0.0} and "repeat_penalty" not in Stub.bodies[0]


@pytest.mark.integration
def test_logit_scores_and_the_requested_fields(stub, tmp_path):
    judge = _judge(stub, tmp_path, "when_to_search+logit")
    (j,) = judge.judge([JudgeItem("q", ("g",), "LOGP")]).judgements
    assert (j.status, j.verdict) == ("ok", "incorrect")
    assert j.score == pytest.approx(0.2 / (0.8 + 0.2))
    assert (Stub.bodies[-1]["logprobs"], Stub.bodies[-1]["top_logprobs"], Stub.bodies[-1]["max_tokens"]) == (
        True,
        10,
        8,
    )


@pytest.mark.integration
def test_each_verdict_is_stored_as_it_arrives_so_an_interrupted_judge_pays_again_for_none(stub, tmp_path):
    """Issue 61: verdicts were stored a chunk (32) at a time, so Ctrl-C lost up to 31 answered
    requests. Four answered, the fifth in flight at Ctrl-C: the four are stored, and the next pass
    asks only the fifth."""
    judge = _judge(stub, tmp_path, timeout=20)  # the interrupt, not a timeout, ends the fifth
    items = [JudgeItem("q", ("g",), f"GOOD {i}") for i in range(4)] + [JudgeItem("q", ("g",), "HALT")]
    # Ctrl-C raises KeyboardInterrupt even where the suite runs as a background job (`nohup ... &`),
    # which starts Python with SIGINT ignored, so that Python installs no handler of its own
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            judge.judge(items)
    finally:
        signal.signal(signal.SIGINT, previous)
    stored = {row["key"] for row in judge.store.get_judgements([judge.key(it) for it in items])}
    assert stored == {judge.key(it) for it in items[:4]}
    assert Stub.hits["GOOD"] == 4
    again = _judge(stub, tmp_path, timeout=20)
    again.store = judge.store
    items[4] = JudgeItem("q", ("g",), "GOOD 4")  # the fifth, asked again, answered this time
    out = again.judge(items)
    assert (out.cached, out.asked, Stub.hits["GOOD"]) == (4, 1, 5)


@pytest.mark.integration
def test_probe_reports_bad_answers(stub):
    assert probe_server(stub).kind == "vllm"
    from harness.errors import ServerError

    bad = stub.replace("/v1", "/api")
    with pytest.raises(ServerError, match=rf"the judge server at {bad} answered GET /models with HTTP 404"):
        probe_server(bad)


def test_rate_limiter_spaces_request_starts(monkeypatch):
    clock = [100.0]
    slept: list[float] = []
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(time, "sleep", lambda s: slept.append(round(s, 6)))
    lim = RateLimiter(per_minute=120)  # one start every 0.5 s
    for _ in range(3):
        lim.wait()
    assert slept == [0.0, 0.5, 1.0]
    RateLimiter(None).wait()
    assert slept == [0.0, 0.5, 1.0]
