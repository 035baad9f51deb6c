"""Two commands run alternately in child processes, timed by wall clock and by CPU (the child's
user + system time from ``os.wait4``), with the load average before each run: the side-by-side
figures of ``tox -e bench`` (docs/performance.md). Ratios of medians, never single times: the
machines these run on are shared."""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class Timings:
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)


def timed_run(argv: Sequence[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one child process; its output is discarded, a failure raises."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(list(argv), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {err[-500:]}")
    return wall, usage.ru_utime + usage.ru_stime


def side_by_side(
    ours: Sequence[str], theirs: Sequence[str], rounds: int = 3, env: dict[str, str] | None = None
) -> dict[str, float | list[float]]:
    """``rounds`` alternating runs of each (ours first); medians, ratios theirs/ours (above 1: ours is
    faster) and the 1-minute load average before every run."""
    a, b = Timings(), Timings()
    loads = []
    for _ in range(rounds):
        for argv, t in ((ours, a), (theirs, b)):
            loads.append(os.getloadavg()[0])
            wall, cpu = timed_run(argv, env)
            t.wall.append(wall)
            t.cpu.append(cpu)
    med = statistics.median
    return {
        "ours_cpu_s": a.cpu,
        "theirs_cpu_s": b.cpu,
        "ours_wall_s": a.wall,
        "theirs_wall_s": b.wall,
        "ratio_cpu": med(b.cpu) / med(a.cpu),
        "ratio_wall": med(b.wall) / med(a.wall),
        "load": loads,
    }


def describe(what: str, r: dict[str, float | list[float]]) -> str:
    """One line: the ratios, the medians and the load range."""
    med = statistics.median
    loads = r["load"]
    assert isinstance(loads, list)
    return (
        f"{what}: {r['ratio_cpu']:.2f}x CPU, {r['ratio_wall']:.2f}x wall "
        f"(ours {med(r['ours_cpu_s']):.2f} s CPU / {med(r['ours_wall_s']):.2f} s wall, "  # type: ignore[arg-type]
        f"theirs {med(r['theirs_cpu_s']):.2f} / {med(r['theirs_wall_s']):.2f}; "  # type: ignore[arg-type]
        f"load {min(loads):.1f}-{max(loads):.1f})"
    )


def report(benchmark, line: str) -> None:
    """Print a bench's side-by-side line and keep it in ``benchmark.extra_info["summary"]``, which
    ``tests/support/bench_summary.py`` prints with every other bench's at the end of the run."""
    line = line.strip()
    benchmark.extra_info["summary"] = line
    print("\n" + line)
