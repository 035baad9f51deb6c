"""``--threads N`` is lowered to the cores other processes leave free (the load average), with one
line; one thread, or threads that fit, are left as asked."""

from __future__ import annotations

import pytest

from harness.llm.server import fit_threads, free_cores


@pytest.mark.parametrize(
    ("load", "cores", "free"),
    [(0.0, 2, 2), (0.4, 2, 2), (0.6, 2, 1), (1.0, 2, 1), (4.0, 2, 1), (21.0, 2, 1), (3.0, 8, 5), (0.0, 1, 1)],
)
def test_free_cores_are_the_cores_less_the_load_at_least_one(load: float, cores: int, free: int) -> None:
    assert free_cores(load=load, cores=cores) == free


def test_threads_that_fit_are_kept_silently(capsys) -> None:
    assert fit_threads(2, load=0.2, cores=2) == 2
    assert fit_threads(1, load=9.0, cores=2) == 1  # the default, one thread, is never touched
    assert capsys.readouterr().err == ""


def test_oversubscribed_threads_are_lowered_with_one_line(capsys) -> None:
    assert fit_threads(2, "--threads", load=4.2, cores=2) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("--threads 2: only 1 core(s) free (load average 4.2 on 2); using 1 thread(s)")
    assert fit_threads(6, "--threads", load=3.0, cores=8) == 5
