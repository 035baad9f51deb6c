"""``tox -e bench`` prints every bench's side-by-side line together at the end of the run
(tests/support/bench_summary.py), only for benches that reported one."""

from __future__ import annotations

import pytest

from tests.support import bench_summary

pytest_plugins = ["pytester"]


def test_the_side_by_side_lines_are_printed_together_at_the_end(pytester: pytest.Pytester, monkeypatch):
    monkeypatch.setattr(bench_summary, "_LINES", [])  # the run below is in this process
    pytester.makeconftest(
        "from tests.support.bench_summary import _collect_side_by_side_line, pytest_terminal_summary\n"
    )
    pytester.makepyfile(
        """
        from tests.support.side_by_side import report

        def test_fast(benchmark):
            benchmark(lambda: None)
            report(benchmark, "ours vs theirs: 3.10x CPU (load 2.0-3.0)")

        def test_no_line(benchmark):
            benchmark(lambda: None)

        def test_second(benchmark):
            benchmark(lambda: None)
            report(benchmark, "server: 1.52x req/s")
        """
    )
    result = pytester.runpytest("-q", "--benchmark-disable", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
    out = result.stdout.str()
    section = out[out.index(bench_summary.TITLE) :]
    assert "test_fast: ours vs theirs: 3.10x CPU (load 2.0-3.0)" in section
    assert "test_second: server: 1.52x req/s" in section
    assert "test_no_line" not in section
