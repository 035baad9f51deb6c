"""Load the registered paper methods' published numbers into a results database."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from harness.store import ReportedRow, Store


def registered_reported() -> dict[str, list[ReportedRow]]:
    """``paper -> rows`` from every registered method that publishes numbers (``Method.reported``)."""
    from harness.methods_registry import METHODS, get_method

    by_paper: dict[str, list[ReportedRow]] = defaultdict(list)
    for name in METHODS.names():
        method = get_method(name)
        reported = getattr(method, "reported", None)
        if reported is None:
            continue
        for row in reported():
            by_paper[row.paper].append(row)
    return dict(by_paper)


def sync_reported(db: Path) -> tuple[int, int]:
    """Replace each paper's rows in ``db`` with the registered ones; (papers, rows) written."""
    rows = registered_reported()
    store = Store(db)
    for paper, paper_rows in sorted(rows.items()):
        store.replace_reported(paper, paper_rows)
    return len(rows), sum(len(r) for r in rows.values())
