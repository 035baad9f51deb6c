"""Every bench's side-by-side line, printed together at the end (tests/support/bench_summary.py)."""

from tests.support.bench_summary import _collect_side_by_side_line, pytest_terminal_summary

__all__ = ["_collect_side_by_side_line", "pytest_terminal_summary"]
