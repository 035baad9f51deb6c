"""`harness serve-retriever` cannot be hogged (issue 33, failure 4): a reply over the byte budget
is refused with 413 before anything is searched (and again on the real bytes when the estimate
was low); a large request does not hold a small one back for more than one search task; slow
clients holding every connection do not lock out a normal client.

In-process servers on 127.0.0.1 (tests/retrieval/test_server.py's ``Served``), small corpora,
each test a few seconds. The loads of the issue's acceptance (2,000 requests, 300 slow clients,
RSS) are in test_retriever_load.py (marker ``bench``)."""

from __future__ import annotations

import socket
import threading
import time

import httpx
import pytest

from harness.retrieval.base import Retriever
from harness.retrieval.bm25 import Bm25sRetriever
from harness.retrieval.corpus import open_corpus
from harness.retrieval.server import ServerLimits
from tests.retrieval.helpers import TINY, write_jsonl
from tests.retrieval.test_server import Served

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RAR_HARNESS_CACHE", str(tmp_path / "cache"))


class Counting(Retriever):
    """Wraps a retriever: counts the queries searched and sleeps ``per_query`` s for each."""

    def __init__(self, inner: Retriever, per_query: float = 0.0):
        self.inner, self.per_query, self.searched = inner, per_query, 0

    @property
    def spec(self):
        return self.inner.spec

    @property
    def index_id(self) -> str:
        return self.inner.index_id

    @property
    def corpus_spec(self):
        return self.inner.corpus_spec

    def _search(self, queries, k):
        self.searched += len(queries)
        time.sleep(self.per_query * len(queries))
        return self.inner.search(queries, k)


@pytest.fixture
def corpus(tmp_path):
    # short passages and one long one (about 20 KB) that the word "zebra" finds
    filler = [{"id": f"f{i}", "contents": f'"Filler {i}"\nFiller passage number {i}.'} for i in range(40)]
    rows = [*TINY, *filler, {"id": "long", "contents": '"Zebra"\n' + "zebra stripes " * 1500}]
    c = open_corpus(write_jsonl(tmp_path / "c.jsonl", rows))
    yield c
    c.close()


def test_a_reply_over_the_budget_is_413_before_any_search(corpus):
    r = Counting(Bm25sRetriever(corpus))
    s = Served(r, default_topk=3, limits=ServerLimits(max_reply_bytes=50_000))
    try:
        # 90th-percentile passage ~80 B: 100 queries x top-3 x (2 copies + 96) is ~77 KB of reply
        got = httpx.post(s.url + "/retrieve", json={"queries": ["capital"] * 100, "topk": 3}, timeout=30)
        assert got.status_code == 413
        detail = got.json()["detail"]
        assert "over the server's budget of 50000 bytes (max_reply_bytes)" in detail and "\n" not in detail
        assert r.searched == 0  # refused before the work
        got = httpx.post(s.url + "/batch_search", json={"query": ["capital"] * 300, "top_n": 3}, timeout=30)
        assert got.status_code == 413 and "(max_reply_bytes)" in got.json()["detail"] and r.searched == 0
        # within the budget: served
        ok = httpx.post(s.url + "/retrieve", json={"queries": ["capital"] * 5, "topk": 3}, timeout=30)
        assert ok.status_code == 200 and len(ok.json()["result"]) == 5
    finally:
        s.stop()


def test_a_reply_that_outgrows_its_estimate_is_413_on_the_bytes(corpus):
    # the estimate (~80 B passages) lets 10 queries at top-1 through; each finds the 20 KB passage
    s = Served(Bm25sRetriever(corpus), default_topk=1, limits=ServerLimits(max_reply_bytes=100_000))
    try:
        got = httpx.post(s.url + "/retrieve", json={"queries": ["zebra"] * 10, "topk": 1}, timeout=30)
        assert got.status_code == 413
        assert "passed the server's budget of 100000 bytes (max_reply_bytes)" in got.json()["detail"]
        one = httpx.post(s.url + "/retrieve", json={"queries": ["zebra"], "topk": 1}, timeout=30)
        assert one.status_code == 200 and one.json()["result"][0][0]["id"] == "long"
    finally:
        s.stop()


def test_a_large_request_does_not_hold_a_small_one_back(corpus):
    # 2,000 queries at 2 ms each: 4 s of search; a small request waits behind one task (256 hits)
    big_r = Counting(Bm25sRetriever(corpus), per_query=0.002)
    s = Served(big_r, default_topk=1, limits=ServerLimits())
    try:
        out: dict[str, object] = {}

        def big() -> None:
            t0 = time.perf_counter()
            rep = httpx.post(s.url + "/retrieve", json={"queries": ["capital"] * 2000, "topk": 1}, timeout=60)
            out["big"] = (rep.status_code, len(rep.json()["result"]), time.perf_counter() - t0)

        t = threading.Thread(target=big)
        t.start()
        while big_r.searched == 0:
            time.sleep(0.01)
        small = []
        with httpx.Client(timeout=30) as client:
            for _ in range(5):
                t0 = time.perf_counter()
                rep = client.post(s.url + "/retrieve", json={"queries": ["capital of France"], "topk": 1})
                small.append(time.perf_counter() - t0)
                assert rep.status_code == 200 and rep.json()["result"][0][0]["id"] == "d5"
        assert big_r.searched < 2000  # the small ones were answered while the big one was searching
        t.join(60)
        status, n, big_seconds = out["big"]  # type: ignore[misc]
        assert (status, n) == (200, 2000) and big_seconds > 3.5
        assert max(small) < 1.5, small  # one task of 256 queries is ~0.5 s; the whole request 4 s
    finally:
        s.stop()


def test_slow_clients_holding_every_connection_do_not_lock_out_a_normal_one(corpus):
    limits = ServerLimits(max_connections=20, read_timeout_s=30)
    s = Served(Bm25sRetriever(corpus), default_topk=1, limits=limits)
    slow: list[socket.socket] = []
    try:
        for _ in range(30):  # more than the cap; each sends half a request line and waits
            c = socket.create_connection(("127.0.0.1", s.port))
            c.sendall(b"POST /retrieve HTTP/1.1\r\nHost: x\r\n")
            slow.append(c)
        time.sleep(0.3)
        for _ in range(3):
            rep = httpx.post(s.url + "/retrieve", json={"queries": ["capital of France"]}, timeout=10)
            assert rep.status_code == 200, rep.text
        # the connections closed to make room were told why, in one line
        evicted = []
        for c in slow:
            c.settimeout(0.2)
            try:
                data = c.recv(4096)
            except TimeoutError:
                continue
            if data:
                evicted.append(data)
        assert evicted and all(d.startswith(b"HTTP/1.1 408 ") for d in evicted)
        assert b"(max_connections)" in evicted[0]
    finally:
        for c in slow:
            c.close()
        s.stop()


def test_the_bound_socket_gives_connections_without_nagle_delay():
    """`harness serve-retriever` binds its socket before loading the index (bind()). Made with
    protocol number 0, its accepted connections were not TCP sockets to asyncio, which then left
    Nagle's algorithm on: every keep-alive reply waited for the client's delayed ACK (~40 ms p50,
    half the throughput of the same app on uvicorn's own socket)."""
    import asyncio

    from harness.retrieval.server import bind

    async def accepted_nodelay() -> int:
        loop = asyncio.get_running_loop()
        got: asyncio.Future[int] = loop.create_future()

        class Probe(asyncio.Protocol):
            def connection_made(self, transport) -> None:
                sock = transport.get_extra_info("socket")
                got.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
                transport.close()

        sock = bind("127.0.0.1", 0)
        server = await loop.create_server(Probe, sock=sock)
        _, writer = await asyncio.open_connection(*sock.getsockname()[:2])
        try:
            return await asyncio.wait_for(got, 10)
        finally:
            writer.close()
            server.close()

    assert asyncio.run(accepted_nodelay()) != 0


def test_a_reply_projected_over_the_budget_is_413_after_an_eighth_of_the_search(corpus):
    """Issue 45: a request that passed the estimate before the search (short passages at the 90th
    percentile) but whose hits are long was searched until its bytes passed the budget, up to 30 s
    on a large corpus. Now the bytes of the first eighth of its queries are projected over the
    whole request: 2,000 queries finding the 20 KB passage (~80 MB of reply) under a 30 MB budget
    are refused after the first task (256 queries), not after 768 (the budget's worth)."""
    r = Counting(Bm25sRetriever(corpus))
    s = Served(r, default_topk=1, limits=ServerLimits(max_reply_bytes=30_000_000))
    try:
        got = httpx.post(s.url + "/retrieve", json={"queries": ["zebra"] * 2000, "topk": 1}, timeout=60)
        assert got.status_code == 413
        detail = got.json()["detail"]
        assert "is projected at ~" in detail and "from its first 256 queries" in detail, detail
        assert r.searched == 256
        ok = httpx.post(s.url + "/retrieve", json={"queries": ["capital"] * 2000, "topk": 1}, timeout=60)
        assert ok.status_code == 200 and len(ok.json()["result"]) == 2000  # short hits: served
    finally:
        s.stop()
