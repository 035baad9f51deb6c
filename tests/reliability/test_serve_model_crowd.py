"""``harness serve-model`` under 300 slow clients (issue 45, failure 1): each sends one header byte
every 2 s and reconnects after its 408. The front used uvicorn's ``limit_concurrency``, so once the
slow clients held its 256 connections ``/health`` and chat were 503 for as long as they kept
coming. Now, as the retrieval server, a new connection beyond the cap closes the one that has
waited longest for its request. The real llama.cpp server behind the front, on 127.0.0.1; the
load is bounded (300 sockets, one thread, about 10 s)."""

from __future__ import annotations

import statistics
import time

import httpx
import pytest

from harness.llm.front import FrontLimits
from harness.llm.server import ModelServer
from tests.reliability.slow_clients import SlowClients

pytestmark = [pytest.mark.llamacpp, pytest.mark.integration]


def test_300_slow_clients_do_not_lock_out_health_or_chat():
    limits = FrontLimits(read_timeout_s=10.0, max_connections=256)  # the defaults
    with ModelServer(threads=1, n_ctx=512, parallel=4, limits=limits) as srv:
        root = f"http://{srv.host}:{srv.port}"
        chat = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
        statuses: list[int] = []

        def probe(rounds: int) -> tuple[list[float], list[float]]:
            health_s: list[float] = []
            chat_s: list[float] = []
            with httpx.Client(timeout=10.0, headers={"connection": "close"}) as client:
                for i in range(rounds):
                    t0 = time.perf_counter()
                    statuses.append(client.get(root + "/health").status_code)
                    health_s.append(time.perf_counter() - t0)
                    if i % 4 == 0:
                        t0 = time.perf_counter()
                        statuses.append(client.post(root + "/v1/chat/completions", json=chat).status_code)
                        chat_s.append(time.perf_counter() - t0)
                    time.sleep(0.2)
            return health_s, chat_s

        quiet_health, quiet_chat = probe(8)
        with SlowClients(srv.host, srv.port, n=300, every=2.0) as crowd:
            time.sleep(1.0)  # all 300 connected, trickling
            health_s, chat_s = probe(20)
            answers = dict(crowd.answers)
        print(
            f"\nwithout slow clients: /health median {statistics.median(quiet_health) * 1000:.0f} ms, "
            f"chat median {statistics.median(quiet_chat) * 1000:.0f} ms"
            f"\n300 slow clients: /health median {statistics.median(health_s) * 1000:.0f} ms "
            f"(slowest {max(health_s) * 1000:.0f} ms, n={len(health_s)}); chat median "
            f"{statistics.median(chat_s) * 1000:.0f} ms (slowest {max(chat_s) * 1000:.0f} ms, n={len(chat_s)}); "
            f"slow clients answered {answers}"
        )
        assert statuses == [200] * len(statuses), statuses
        assert max(health_s) < 2.0
        assert answers.get("408", 0) > 0 and "503" not in answers  # the oldest were cut off, told why
