"""The side-by-side lines of ``tox -e bench``, together at the end of the run: each benchmark that
calls :func:`tests.support.side_by_side.report` stores its line (the ratio against its alternative,
with the load) in ``benchmark.extra_info["summary"]``; this plugin (loaded by
``tests/bench/conftest.py``) collects those lines after each test and prints them in one terminal
section, so one run shows every ratio without ``-s``. The same lines are in the JSON that
``--benchmark-json`` writes."""

from __future__ import annotations

import pytest

_LINES: list[tuple[str, str]] = []
TITLE = "side by side (ratio > 1: ours faster; docs/performance.md)"


@pytest.fixture(autouse=True)
def _collect_side_by_side_line(request: pytest.FixtureRequest):
    yield
    bench = request.node.funcargs.get("benchmark") if hasattr(request.node, "funcargs") else None
    line = getattr(bench, "extra_info", {}).get("summary") if bench is not None else None
    if line:
        _LINES.append((request.node.name, line))


def pytest_terminal_summary(terminalreporter) -> None:
    if not _LINES:
        return
    terminalreporter.section(TITLE)
    for name, line in _LINES:
        terminalreporter.write_line(f"{name}: {line}")
