"""``--threads N`` is lowered to the cores other processes leave free (the load average, or the
cores busy right now where that is more), with one line; one thread, or threads that fit, are left
as asked."""

from __future__ import annotations

import pytest

from harness.llm.server import fit_threads, free_cores


@pytest.mark.parametrize(
    ("load", "cores", "free"),
    [(0.0, 2, 2), (0.4, 2, 2), (0.6, 2, 1), (1.0, 2, 1), (4.0, 2, 1), (21.0, 2, 1), (3.0, 8, 5), (0.0, 1, 1)],
)
def test_free_cores_are_the_cores_less_the_load_at_least_one(load: float, cores: int, free: int) -> None:
    assert free_cores(load=load, cores=cores, busy=0.0) == free


@pytest.mark.parametrize(
    ("load", "busy", "free"), [(0.1, 2.0, 1), (0.1, 1.2, 1), (0.1, 0.3, 2), (3.0, 0.5, 1)]
)
def test_the_cores_busy_now_count_where_the_load_average_lags(load: float, busy: float, free: int) -> None:
    assert free_cores(load=load, cores=2, busy=busy) == free


def test_busy_cores_reads_the_non_idle_share_of_proc_stat(tmp_path, monkeypatch) -> None:
    from harness.llm import server

    stat = tmp_path / "stat"
    lines = iter(
        [
            "cpu  100 0 100 800 0 0 0 0 0 0\n",  # user nice system idle iowait irq softirq steal (guest..)
            "cpu  250 0 150 900 0 0 0 0 0 0\n",  # +200 busy, +100 idle: two thirds busy
        ]
    )
    monkeypatch.setattr(server.time, "sleep", lambda s: stat.write_text(next(lines)))
    monkeypatch.setattr(server, "_cpus", lambda: 3)
    stat.write_text(next(lines))
    assert server.busy_cores(stat=str(stat)) == pytest.approx(2.0)
    assert server.busy_cores(stat=str(tmp_path / "absent")) is None  # macOS: the load average alone


def test_threads_that_fit_are_kept_silently(capsys) -> None:
    assert fit_threads(2, load=0.2, cores=2, busy=0.1) == 2
    assert fit_threads(1, load=9.0, cores=2) == 1  # the default, one thread, is never touched
    assert capsys.readouterr().err == ""


def test_oversubscribed_threads_are_lowered_with_one_line(capsys) -> None:
    assert fit_threads(2, "--threads", load=4.2, cores=2, busy=2.0) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(
        "--threads 2: only 1 core(s) free (load average 4.2, 2.0 busy now, on 2); using 1 thread(s)"
    )
    assert fit_threads(6, "--threads", load=3.0, cores=8, busy=1.0) == 5
    assert fit_threads(2, "--threads", load=0.0, cores=2, busy=1.9) == 1  # just started: the probe sees it
