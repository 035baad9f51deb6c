"""The retrieval server (started in-process on 127.0.0.1 with uvicorn) and the HTTP client."""

from __future__ import annotations

import json
import re
import socket
import threading
import time

import httpx
import pytest

from harness.errors import ServerError
from harness.retrieval.base import EmptyQueryError, Retriever
from harness.retrieval.bm25 import Bm25sRetriever
from harness.retrieval.client import RetrievalClient
from harness.retrieval.server import ServerLimits, create_app
from harness.retrieval.spec import Bm25sSpec
from harness.serving import uvicorn_config

pytestmark = pytest.mark.integration


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    """A uvicorn server in a thread of this process, serving ``create_app(retriever)`` or ``app``."""

    def __init__(
        self, retriever: Retriever | None = None, *, app=None, limits: ServerLimits | None = None, **kwargs
    ):
        import uvicorn

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        limits = limits or ServerLimits()
        app = app if app is not None else create_app(retriever, limits=limits, **kwargs)
        config = uvicorn_config(app, limits, port=self.port, log_level="critical")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("server did not start")
            time.sleep(0.02)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture
def served(tiny_corpus):
    s = Served(Bm25sRetriever(tiny_corpus), default_topk=2, limits=ServerLimits(max_topk=50))
    yield s
    s.stop()


def test_search_r1_retrieve(served):
    body = {"queries": ["capital of France", "python language"], "topk": 2, "return_scores": True}
    r = httpx.post(served.url + "/retrieve", json=body)
    assert r.status_code == 200
    result = r.json()["result"]
    assert len(result) == 2
    first = result[0][0]
    assert set(first) == {"document", "score"}
    assert first["document"] == {
        "id": "d5",
        "contents": '"France"\nFrance is a country in Europe. Its capital city is Paris, and France has a president.',
        "title": "France",
        "text": "France is a country in Europe. Its capital city is Paris, and France has a president.",
    }
    assert [h["document"]["id"] for h in result[0]] == ["d5", "d1"]
    assert result[0][0]["score"] > result[0][1]["score"] > 0
    assert result[1][0]["document"]["id"] == "d4"


def test_without_scores_and_default_topk(served):
    r = httpx.post(served.url + "/retrieve", json={"queries": ["capital of France"], "return_scores": False})
    docs = r.json()["result"][0]
    assert [d["id"] for d in docs] == ["d5", "d1"]  # server --topk 2
    assert set(docs[0]) == {"id", "contents", "title", "text"}
    r = httpx.post(served.url + "/retrieve", json={"queries": ["capital of France"], "topk": None})
    assert len(r.json()["result"][0]) == 2
    r = httpx.post(served.url + "/retrieve", json={"queries": ["zebra"], "topk": 3, "return_scores": True})
    assert r.json() == {"result": [[]]}


def test_recall_adapters(served):
    r = httpx.post(served.url + "/search", json={"query": "berlin", "top_n": 1})
    assert r.json() == [{"id": "d2", "contents": '"Berlin"\nBerlin is the capital of Germany.'}]
    r = httpx.post(served.url + "/search", json={"query": "berlin", "top_n": 1, "return_score": True})
    docs, scores = r.json()
    assert docs[0]["id"] == "d2" and len(scores) == 1 and scores[0] > 0
    r = httpx.post(served.url + "/batch_search", json={"query": ["berlin", "mice"], "top_n": 1})
    assert [[d["id"] for d in q] for q in r.json()] == [["d2"], ["d3"]]
    r = httpx.post(
        served.url + "/batch_search", json={"query": ["berlin", "mice"], "top_n": 1, "return_score": True}
    )
    docs, scores = r.json()
    assert [[d["id"] for d in q] for q in docs] == [["d2"], ["d3"]] and len(scores) == 2


def test_health(served, tiny_corpus):
    h = httpx.get(served.url + "/health").json()
    assert h["status"] == "ok" and h["retriever"] == "bm25s"
    assert h["index_id"] == Bm25sRetriever(tiny_corpus).index_id
    assert h["spec"] == Bm25sSpec().model_dump(mode="json")
    assert h["corpus"]["content_hash"] == tiny_corpus.spec.content_hash
    assert (h["default_topk"], h["max_topk"]) == (2, 50)


@pytest.mark.parametrize(
    ("path", "payload", "status", "message"),
    [
        # (what Search-R1's server accepts -- [], blank queries, topk 0, "3" -- is pinned in
        # test_searchr1_conformance.py)
        ("/retrieve", {"queries": ["paris"], "topk": -1}, 422, "'topk' must be between 1 and 50, got -1"),
        ("/retrieve", {"queries": ["paris"], "topk": 10**9}, 422, "'topk' must be between 1 and 50"),
        ("/retrieve", {"queries": "paris", "topk": 3}, 422, "queries: Input should be a valid list"),
        ("/retrieve", {"queries": ["paris"], "topk": "three"}, 422, "topk: Input should be a valid integer"),
        ("/retrieve", {"queries": ["paris"], "topk": 2.5}, 422, "topk: Input should be a valid integer"),
        ("/retrieve", {"queries": [1, 2]}, 422, "queries.0: Input should be a valid string"),
        ("/retrieve", {"topk": 3}, 422, "queries: Field required"),
        ("/retrieve", ["paris"], 422, "invalid request"),
        ("/search", {"query": ""}, 422, "empty query at position(s) [0] of 'query'"),
        ("/batch_search", {"query": [], "top_n": 3}, 400, "'query' must be a non-empty list"),
        ("/batch_search", {"query": ["x"], "top_n": -1}, 422, "'top_n' must be between 1 and 50, got -1"),
    ],
)
def test_bad_requests_get_4xx_with_a_message_and_the_server_stays_up(served, path, payload, status, message):
    r = httpx.post(served.url + path, json=payload)
    assert r.status_code == status
    assert message in r.json()["detail"]
    ok = httpx.post(served.url + "/retrieve", json={"queries": ["paris"], "topk": 1, "return_scores": True})
    assert ok.status_code == 200 and ok.json()["result"][0][0]["document"]["id"] == "d1"


def test_openapi_json_and_docs_are_served(served):
    """Issue 61: /openapi.json was a 500 (the handlers' return annotation could not be resolved),
    so /docs could not load."""
    r = httpx.get(f"{served.url}/openapi.json", timeout=10)
    assert r.status_code == 200, r.text
    spec = r.json()
    assert set(spec["paths"]) == {"/health", "/retrieve", "/search", "/batch_search"}
    assert spec["paths"]["/retrieve"]["post"]["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/RetrieveRequest"
    }
    assert httpx.get(f"{served.url}/docs", timeout=10).status_code == 200


def test_malformed_json_body(served):
    r = httpx.post(
        served.url + "/retrieve", content=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 422 and "invalid request" in r.json()["detail"]


def test_client_matches_local_search(served, tiny_corpus):
    local = Bm25sRetriever(tiny_corpus)
    with RetrievalClient(served.url + "/retrieve") as client:
        queries = ["capital of France", "cats and mice", "zebra"]
        assert client.search(queries, 3) == local.search(queries, 3)
        assert client.index_id == local.index_id
        assert client.spec == local.spec
        assert client.corpus_spec == tiny_corpus.spec
        with pytest.raises(EmptyQueryError):
            client.search(["ok", ""], 3)
        with pytest.raises(
            ServerError, match=r"rejected the request: HTTP 422: 'topk' must be between 1 and 50"
        ):
            client.search(["paris"], 51)


def test_client_against_a_dead_port_names_the_url():
    port = free_port()
    client = RetrievalClient(f"http://127.0.0.1:{port}", retries=2, backoff=0.01, connect_timeout=1.0)
    t0 = time.monotonic()
    with pytest.raises(ServerError) as e:
        client.search(["paris"], 3)
    assert f"retrieval server http://127.0.0.1:{port}/retrieve failed after 3 attempt(s)" in str(e.value)
    assert "ConnectError" in str(e.value)
    assert time.monotonic() - t0 < 10
    with pytest.raises(ServerError, match=f"http://127.0.0.1:{port}/health failed"):
        _ = client.index_id


class _Flaky(Retriever):
    """Fails the first ``fail`` searches with an exception, then answers; or sleeps."""

    def __init__(self, fail: int = 0, sleep: float = 0.0):
        self.fail, self.sleep, self.calls = fail, sleep, 0

    @property
    def spec(self):
        return Bm25sSpec()

    @property
    def index_id(self):
        return "bm25s-flaky"

    def _search(self, queries, k):
        from harness.types import Hit

        self.calls += 1
        if self.calls <= self.fail:
            raise RuntimeError("disk on fire")
        time.sleep(self.sleep)
        return [[Hit("x", '"X"\nx', 1.0)] for _ in queries]


def test_client_of_a_server_without_health(tiny_corpus):
    from fastapi import FastAPI

    from harness.retrieval.client import RemoteSpec

    app = FastAPI()
    local = Bm25sRetriever(tiny_corpus)

    @app.post("/retrieve")
    def retrieve(body: dict):
        hits = local.search(body["queries"], body["topk"])
        return {
            "result": [
                [{"document": {"id": h.doc_id, "contents": h.contents}, "score": h.score} for h in hs]
                for hs in hits
            ]
        }

    s = Served(app=app)
    try:
        client = RetrievalClient(s.url)
        assert client.spec == RemoteSpec(url=s.url) and client.index_id == f"remote-{s.url}"
        assert client.corpus_spec is None
        assert client.search(["berlin"], 1) == local.search(["berlin"], 1)
    finally:
        s.stop()


def test_server_errors_are_json_500_and_the_client_retries():
    flaky = _Flaky(fail=2)
    s = Served(flaky)
    try:
        r = httpx.post(s.url + "/retrieve", json={"queries": ["a"], "topk": 1})
        assert r.status_code == 500 and r.json()["detail"] == "retrieval failed: RuntimeError: disk on fire"
        client = RetrievalClient(s.url, retries=2, backoff=0.01)
        assert client.search(["a"], 1)[0][0].doc_id == "x"  # second attempt fails, third succeeds
        assert flaky.calls == 3
    finally:
        s.stop()


def test_client_timeout_is_retried_then_reported():
    s = Served(_Flaky(sleep=0.5))
    try:
        client = RetrievalClient(s.url, timeout=0.1, retries=1, backoff=0.01)
        with pytest.raises(
            ServerError, match=r"/retrieve failed after 2 attempt\(s\): timed out \(ReadTimeout\)"
        ):
            client.search(["a"], 1)
    finally:
        s.stop()


def test_serve_retriever_command_in_a_subprocess(tiny_path, cache_dir):
    """`harness serve-retriever` end to end: bind (port 0: any free one), announce the bound
    address only then, answer a Search-R1 request at once, stop by PID."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "RAR_HARNESS_CACHE": str(cache_dir)}
    cmd = [sys.executable, "-m", "harness", "serve-retriever", "--corpus", str(tiny_path), "--port", "0"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("serving bm25s (index bm25s-") and " on http://127.0.0.1:" in first, first
        url = first.rsplit(" on ", 1)[1].strip()
        assert int(url.rsplit(":", 1)[1]) > 0
        # no polling: the socket is bound before the line is printed
        body = {"queries": ["capital of France"], "topk": 3, "return_scores": True}
        result = httpx.post(url + "/retrieve", json=body, timeout=30).json()["result"]
        assert [h["document"]["id"] for h in result[0]] == ["d5", "d1", "d2"]
    finally:
        proc.terminate()
        proc.wait(timeout=20)


# -- limits ----------------------------------------------------------------------------------------


@pytest.fixture
def limited(tiny_corpus):
    limits = ServerLimits(
        max_body_bytes=2000, max_queries=4, max_query_chars=50, max_topk=5, max_hits=6, read_timeout_s=0.5
    )
    s = Served(Bm25sRetriever(tiny_corpus), default_topk=1, limits=limits)
    yield s
    s.stop()


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"queries": ["paris"] * 5}, "too many queries (5); at most 4 per request (max_queries)"),
        (
            {"queries": ["paris", "x" * 51]},
            "query at position(s) [1] of 'queries' is longer than 50 characters (max_query_chars; the first has 51)",
        ),
        ({"queries": ["paris"], "topk": 6}, "'topk' must be between 1 and 5, got 6"),
        (
            {"queries": ["paris"] * 4, "topk": 2},
            "4 queries x topk 2 = 8 hits is over the server's limit of 6 per reply (max_hits); split the request",
        ),
    ],
)
def test_semantic_limits_are_422_with_a_one_line_reason(limited, payload, message):
    r = httpx.post(limited.url + "/retrieve", json=payload)
    assert r.status_code == 422
    assert r.json() == {"detail": message}


def test_limits_at_the_edge_are_served(limited):
    r = httpx.post(
        limited.url + "/retrieve", json={"queries": ["paris", "x" * 49 + "y"] + ["a b"], "topk": 2}
    )
    assert r.status_code == 200 and len(r.json()["result"]) == 3
    assert httpx.get(limited.url + "/health").json()["limits"]["max_hits"] == 6


def test_oversized_body_is_413_declared_or_streamed(limited):
    body = json.dumps({"queries": ["paris " * 400]}).encode()  # 2,417 bytes > 2,000
    r = httpx.post(limited.url + "/retrieve", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 413
    assert r.json() == {
        "detail": f"request body of {len(body)} bytes is over the server's limit of 2000 bytes "
        "(max_body_bytes); send fewer or shorter queries"
    }

    def chunks():  # no Content-Length: chunked transfer, counted as it arrives
        for i in range(0, len(body), 500):
            yield body[i : i + 500]

    r = httpx.post(limited.url + "/retrieve", content=chunks(), headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and "over the server's limit of 2000 bytes" in r.json()["detail"]
    ok = httpx.post(limited.url + "/retrieve", json={"queries": ["berlin"]})
    assert ok.json()["result"][0][0]["id"] == "d2"


def _raw(port: int, data: bytes, wait: float) -> bytes:
    """Send ``data`` on a raw socket, then read until the server closes (at most ``wait`` s)."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as s:
        s.sendall(data)
        out = b""
        while True:
            try:
                chunk = s.recv(4096)
            except TimeoutError:
                return out + b"<still open>"
            if not chunk:
                return out
            out += chunk


@pytest.mark.parametrize(
    "sent",
    [
        b"",  # connects and says nothing
        b"POST /retrieve HTTP/1.1\r\nHost: x\r\n",  # headers never finished
        b"POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b'Content-Length: 100\r\n\r\n{"queries"',  # body never finished
    ],
    ids=["nothing", "half-headers", "half-body"],
)
def test_a_slow_client_gets_408_and_is_disconnected(limited, sent):
    t0 = time.monotonic()
    reply = _raw(limited.port, sent, wait=10)
    assert reply.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), reply
    assert reply.endswith(b'{"detail": "request not received within 0.5 s (read_timeout_s)"}')
    assert time.monotonic() - t0 < 10  # closed by the server, not by our own socket timeout
    ok = httpx.post(limited.url + "/retrieve", json={"queries": ["berlin"]})
    assert ok.status_code == 200


def test_a_keep_alive_connection_is_timed_per_request(limited):
    """After a served request, the next one on the same connection has its own deadline."""
    body = b'{"queries": ["berlin"]}'
    head = b"POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    req = head + b"Content-Length: %d\r\n\r\n" % len(body) + body
    reply = _raw(limited.port, req + b"POST /retrieve HTTP/1.1\r\n", wait=10)
    first, _, rest = reply.partition(b"HTTP/1.1 408")
    assert first.startswith(b"HTTP/1.1 200 OK") and b'"id":"d2"' in first
    assert rest.endswith(b'(read_timeout_s)"}')


def test_pipelined_requests_are_answered_in_order_then_timed(limited):
    """Two whole requests in one write: both answered, in order, and the read timeout runs only after
    the second (a pipelined request already in has no deadline)."""
    reqs = [
        b"POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body) + body
        for body in (b'{"queries": ["berlin"]}', b'{"queries": ["paris"]}')
    ]
    reply = _raw(limited.port, b"".join(reqs), wait=10)
    statuses = re.findall(rb"HTTP/1\.1 (\d{3}) ", reply)
    assert statuses == [b"200", b"200", b"408"], reply
    assert reply.index(b'"id":"d2"') < reply.index(b"HTTP/1.1 200", 1)  # berlin's hit came first


def test_a_request_head_over_16_kib_gets_431_and_is_disconnected(limited):
    from harness.serving import MAX_HEAD_BYTES

    head = b"POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    body = b'{"queries": ["berlin"]}'
    for pad, status in [
        (MAX_HEAD_BYTES - 1024, b"200 OK"),
        (MAX_HEAD_BYTES + 1, b"431 Request Header Fields Too Large"),
    ]:
        req = head + b"X-Pad: " + b"a" * pad + b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body
        reply = _raw(limited.port, req, wait=10)
        assert reply.startswith(b"HTTP/1.1 " + status), reply[:200]
    assert reply.endswith(b'{"detail": "request line and headers over the server\'s limit of 16384 bytes"}')
    ok = httpx.post(limited.url + "/retrieve", json={"queries": ["berlin"]})
    assert ok.status_code == 200


def test_serve_retriever_refuses_a_bad_port_in_one_line(tiny_path, cache_dir):
    import os
    import subprocess
    import sys

    env = {**os.environ, "RAR_HARNESS_CACHE": str(cache_dir)}
    for port, message in [
        ("70000", "error: --port must be between 0 and 65535, got 70000\n"),
        ("-1", "error: --port must be between 0 and 65535, got -1\n"),
    ]:
        cmd = [sys.executable, "-m", "harness", "serve-retriever", "--corpus", str(tiny_path), "--port", port]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
        assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", message)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        cmd = [
            sys.executable,
            "-m",
            "harness",
            "serve-retriever",
            "--corpus",
            str(tiny_path),
            "--port",
            str(port),
        ]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == f"error: cannot listen on 127.0.0.1:{port}: Address already in use\n"


@pytest.mark.parametrize(
    "body",
    [
        b'{"queries": ["capital of France", "python language"], "topk": 2, "return_scores": true}',
        b'{"queries": ["capital of France"], "return_scores": "true", "topk": "1"}',  # lax, as upstream
        b'{"queries": ["capital of France", " ", ""], "topk": 2}',  # blank queries find nothing
        b'{"queries": []}',
        b'{"queries": ["berlin"] , "topk": 51}',  # over max_topk: 422
        b'{"queries": "berlin"}',  # not a list: FastAPI's 422
        b'{"queries": ["berlin"], "topk": NaN}',  # orjson refuses it: FastAPI reads it
        b'{"queries": ["berlin"]',  # not JSON: FastAPI's 422
    ],
)
def test_the_fast_retrieve_path_answers_what_fastapi_answers(tiny_corpus, body):
    """/retrieve through the fast path (_FastRetrieve) and through FastAPI alone (the same app
    without that middleware): the same status and the same bytes, errors included."""
    from harness.retrieval.server import _FastRetrieve

    limits = ServerLimits(max_topk=50)
    without = create_app(Bm25sRetriever(tiny_corpus), default_topk=2, limits=limits)
    without.user_middleware = [m for m in without.user_middleware if m.cls is not _FastRetrieve]
    servers = [
        Served(Bm25sRetriever(tiny_corpus), default_topk=2, limits=limits),
        Served(app=without, limits=limits),
    ]
    try:
        fast, plain = (
            httpx.post(s.url + "/retrieve", content=body, headers={"content-type": "application/json"})
            for s in servers
        )
    finally:
        for s in servers:
            s.stop()
    assert (fast.status_code, fast.content) == (plain.status_code, plain.content)
    assert fast.headers["content-type"] == plain.headers["content-type"] == "application/json"
