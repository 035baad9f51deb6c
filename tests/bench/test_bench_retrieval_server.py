"""Issue 60: ``harness serve-retriever`` against Search-R1's plain ``/retrieve`` handler shape
(scripts/plain_retrieval_server.py) over the same bm25s index: 16 client threads x 2,000
single-query requests (scripts/retriever_load.py), the two servers alternating, two rounds.
Stored: each round's req/s, p99 and the server's CPU per request (from /proc), the ratios of
medians and the load. Goal: >= 1.5x req/s with a lower p99. The client shares the machine's cores
with the server, so on 2 cores req/s also measures the client; the CPU per request does not.

Run: ``python -m pytest tests/bench/test_bench_retrieval_server.py -s -p no:cacheprovider``
"""

from __future__ import annotations

import importlib.util
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.side_by_side import report

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _load_script():
    spec = importlib.util.spec_from_file_location("retriever_load", ROOT / "scripts" / "retriever_load.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _start(cmd: list[str], port: int, env: dict[str, str]) -> subprocess.Popen:
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    body = {"queries": ["warm up"], "topk": 3, "return_scores": True}
    while time.monotonic() < deadline:
        try:
            if httpx.post(f"http://127.0.0.1:{port}/retrieve", json=body, timeout=5).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.5)
    proc.terminate()
    raise RuntimeError(f"{' '.join(cmd)} did not answer on port {port}")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_bench_serve_retriever_against_the_plain_handler(benchmark, tmp_path) -> None:
    load = _load_script()
    questions = load.bench_questions()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    ours_port, plain_port = _free_port(), _free_port()
    ours = _start(
        [sys.executable, "-m", "harness", "serve-retriever", "--port", str(ours_port)], ours_port, env
    )
    plain = _start(
        [sys.executable, str(ROOT / "scripts" / "plain_retrieval_server.py"), "--port", str(plain_port)],
        plain_port,
        env,
    )
    figures: dict[str, list[float]] = {}
    try:
        q = {"queries": ["who wrote hamlet"], "topk": 3, "return_scores": True}
        same = [httpx.post(f"http://127.0.0.1:{p}/retrieve", json=q).content for p in (ours_port, plain_port)]
        assert same[0] == same[1]  # the same index, the same bytes

        def rounds() -> None:
            for _ in range(2):
                for name, port, proc in (("ours", ours_port, ours), ("plain", plain_port, plain)):
                    figures.setdefault(f"{name}_load", []).append(os.getloadavg()[0])
                    cpu0 = _cpu_s(proc.pid)
                    r = load.load(f"http://127.0.0.1:{port}", questions, requests=2000, threads=16)
                    assert r["errors"] == 0, r["first_error"]
                    figures.setdefault(f"{name}_cpu_ms_per_req", []).append(
                        1000 * (_cpu_s(proc.pid) - cpu0) / 2000
                    )
                    figures.setdefault(f"{name}_req_per_s", []).append(r["req_per_s"])
                    figures.setdefault(f"{name}_p99_ms", []).append(r["p99_ms"])

        benchmark.pedantic(rounds, rounds=1, iterations=1)
    finally:
        for proc in (ours, plain):
            proc.terminate()
            proc.wait(timeout=30)
    med = statistics.median
    ratios = {
        "ratio_req_per_s": med(figures["ours_req_per_s"]) / med(figures["plain_req_per_s"]),
        "ratio_cpu_per_req": med(figures["plain_cpu_ms_per_req"]) / med(figures["ours_cpu_ms_per_req"]),
        "ratio_p99": med(figures["plain_p99_ms"]) / med(figures["ours_p99_ms"]),
    }
    benchmark.extra_info.update(figures | ratios)
    loads = figures["ours_load"] + figures["plain_load"]
    report(
        benchmark,
        f"serve-retriever vs plain handler, bm25s, 16 threads x 2,000: {ratios['ratio_req_per_s']:.2f}x req/s, "
        f"{ratios['ratio_cpu_per_req']:.2f}x less server CPU a request, p99 {ratios['ratio_p99']:.2f}x lower "
        f"(ours p99 {figures['ours_p99_ms']} ms, plain {figures['plain_p99_ms']}; load {min(loads):.1f}-{max(loads):.1f})",
    )
