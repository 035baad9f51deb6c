"""Loopback load on a ``POST /retrieve`` server (``harness serve-retriever`` or Search-R1's
``retrieval_server.py``): single-query requests from threads, slow clients, one maximal request.

    # requests/s, p50/p99 of 2,000 single-query requests (top-3, scores) from 16 threads
    python scripts/retriever_load.py http://127.0.0.1:8000 --requests 2000 --threads 16
    # the same, with the server's RSS before and after (its PID)
    python scripts/retriever_load.py http://127.0.0.1:8000 --pid 12345

Requests are Search-R1's client payload (``{"queries": [q], "topk": 3, "return_scores": true}``,
``PeterGriffinJin/Search-R1@a14dc3a4ffc6fe88c1e95038d9738e21ba3f7a06:search_r1/llm_agent/generation.py``)
with the questions of the packaged ``mini-multihop`` bench in turn; each thread keeps one
keep-alive connection. A request is an error unless it is 200 with ``topk`` hits. Prints one JSON
object. Used by tests/reliability/test_retriever_load.py and for docs/retrieval-server.md.
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import statistics
import sys
import threading
import time
import urllib.parse
from pathlib import Path


def bench_questions() -> list[str]:
    from harness.data.benches import load_bench

    return [ex.question for _, examples in load_bench("mini-multihop") for ex in examples]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def _host_port(url: str) -> tuple[str, int]:
    parts = urllib.parse.urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or 80


def load(
    url: str, questions: list[str], *, requests: int = 2000, threads: int = 16, topk: int = 3
) -> dict[str, object]:
    """``requests`` single-query ``/retrieve`` calls from ``threads`` threads; the figures.

    The client is the standard library's ``http.client`` (one keep-alive connection a thread, the
    JSON read with ``json``), not ``httpx``: on the same 2 cores as the server, httpx spent 1.3-1.4 ms
    of CPU a request, as much as the server it measured, and http.client 0.31-0.38 ms (2026-11-29,
    against both Lucene servers), so req/s now measures the server rather than the client."""
    host, port = _host_port(url)
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    counts = [requests // threads + (1 if i < requests % threads else 0) for i in range(threads)]
    headers = {"Content-Type": "application/json"}

    def worker(t: int) -> None:
        offset = sum(counts[:t])
        conn = http.client.HTTPConnection(host, port, timeout=60)
        try:
            for i in range(counts[t]):
                q = questions[(offset + i) % len(questions)]
                body = json.dumps({"queries": [q], "topk": topk, "return_scores": True})
                t0 = time.perf_counter()
                try:
                    conn.request("POST", "/retrieve", body, headers)
                    r = conn.getresponse()
                    data = r.read()
                    ok = r.status == 200 and len(json.loads(data)["result"][0]) == topk
                    why = "" if ok else f"{r.status}: {data[:200].decode(errors='replace')}"
                except (OSError, http.client.HTTPException, ValueError, LookupError) as e:
                    why = f"{type(e).__name__}: {e}"
                    conn.close()  # a new connection for the next request
                dt = time.perf_counter() - t0
                with lock:
                    latencies.append(dt)
                    if why:
                        errors.append(why)
        finally:
            conn.close()

    t0 = time.perf_counter()
    pool = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    wall = time.perf_counter() - t0
    lat = sorted(latencies)
    return {
        "requests": len(lat),
        "threads": threads,
        "errors": len(errors),
        "first_error": errors[0] if errors else None,
        "seconds": round(wall, 2),
        "req_per_s": round(len(lat) / wall, 1),
        "p50_ms": round(1000 * statistics.median(lat), 1),
        "p99_ms": round(1000 * lat[int(0.99 * (len(lat) - 1))], 1),
        "max_ms": round(1000 * lat[-1], 1),
    }


def slow_clients(url: str, n: int) -> list[socket.socket]:
    """``n`` connections that each send half a request line and then nothing."""
    host, port = _host_port(url)
    out = []
    for _ in range(n):
        c = socket.create_connection((host, port))
        c.sendall(b"POST /retrieve HTTP/1.1\r\nHost: x\r\n")
        out.append(c)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("url", help="the server's base URL, e.g. http://127.0.0.1:8000")
    p.add_argument("--requests", type=int, default=2000)
    p.add_argument("--threads", type=int, default=16)
    p.add_argument("--topk", type=int, default=3)
    p.add_argument("--pid", type=int, help="the server's PID: report its RSS before and after")
    args = p.parse_args(argv)
    before = rss_mb(args.pid) if args.pid else None
    figures = load(args.url, bench_questions(), requests=args.requests, threads=args.threads, topk=args.topk)
    if args.pid:
        figures |= {"rss_before_mb": round(before, 1), "rss_after_mb": round(rss_mb(args.pid), 1)}
    print(json.dumps(figures))
    return 0 if figures["errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
