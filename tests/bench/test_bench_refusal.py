"""Issue 60: a refused RL step answers within seconds, before any model is converted or loaded:
``harness train --method search_r1 --recipe cpu-smoke --rollout-backend llamacpp`` (a recipe
without LoRA) timed as a whole process, three times, with the load (it took 332 s before).

Run: ``python -m pytest tests/bench/test_bench_refusal.py -s -p no:cacheprovider``
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.side_by_side import report

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def test_bench_a_refused_rl_step(benchmark, tmp_path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    argv = [sys.executable, "-m", "harness", "train", "--method", "search_r1", "--recipe", "cpu-smoke"]
    argv += [
        "--rollout-backend",
        "llamacpp",
        "--db",
        str(tmp_path / "r.duckdb"),
        "--out",
        str(tmp_path / "o"),
    ]
    walls: list[float] = []
    cpus: list[float] = []
    loads: list[float] = []

    def rounds() -> None:
        for _ in range(3):
            loads.append(os.getloadavg()[0])
            t0, c0 = time.perf_counter(), os.times()
            done = subprocess.run(argv, env=env, capture_output=True, text=True)
            c1 = os.times()
            walls.append(time.perf_counter() - t0)
            cpus.append(c1.children_user - c0.children_user + c1.children_system - c0.children_system)
            assert done.returncode == 2 and "needs a LoRA recipe" in done.stderr, done.stderr[-500:]

    benchmark.pedantic(rounds, rounds=1, iterations=1)
    assert not (tmp_path / "o").exists() and not (tmp_path / "r.duckdb").exists()
    benchmark.extra_info.update({"wall_s": walls, "cpu_s": cpus, "load": loads, "before_s": 332})
    report(
        benchmark,
        f"refused RL step: {max(walls):.1f} s wall at most, {max(cpus):.1f} s CPU "
        f"(load {min(loads):.1f}-{max(loads):.1f}; 332 s before)",
    )
