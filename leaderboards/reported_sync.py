"""Load the registered paper methods' published numbers into a results database."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from harness.results.store import ReportedRow, Store

if TYPE_CHECKING:
    import pandas as pd


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


def registered_files() -> list:
    """The parsed ``reported.yaml`` of every registered method that has one
    (:meth:`harness.api.TrainableMethod.reported_file`), one per paper."""
    from harness.methods_registry import METHODS, get_method

    out, seen = [], set()
    for name in METHODS.names():
        reader = getattr(get_method(name), "reported_file", None)
        f = reader() if reader is not None else None
        if f is not None and f.paper not in seen:
            seen.add(f.paper)
            out.append(f)
    return out


def sync_reported(db: Path) -> tuple[int, int]:
    """Replace each paper's rows in ``db`` with the registered ones; (papers, rows) written."""
    rows = registered_reported()
    store = Store(db)
    for paper, paper_rows in sorted(rows.items()):
        store.replace_reported(paper, paper_rows)
    return len(rows), sum(len(r) for r in rows.values())


def reported_frame(store: Store) -> pd.DataFrame:
    """Every published number, as :func:`leaderboards.queries.reported` returns it: the rows in the
    database, plus the registered papers' rows for papers the database has none of (so a fresh
    database, never synced by ``harness leaderboard``, still has the reported view)."""
    import pandas as pd

    from leaderboards import queries

    stored = queries.reported(store)
    have = set(stored["paper"])
    extra = [
        {k: getattr(r, k) for k in stored.columns}
        for paper, rows in registered_reported().items()
        if paper not in have
        for r in rows
    ]
    if not extra:
        return stored
    out = pd.concat([stored, pd.DataFrame(extra, columns=stored.columns)], ignore_index=True)
    return out.sort_values(["paper", "setting", "method", "model", "dataset", "metric"]).reset_index(
        drop=True
    )
