"""One paired test everywhere: on every showcase pair (each row against its column's best) the
leaderboard's test, the CSV export's ``<column>_p`` and ``harness compare`` give the same p (they
call :func:`harness.metrics.exact.paired_exact` on the same questions in the same order). The
committed databases are copied first and never opened."""

from __future__ import annotations

import csv
import hashlib
import math
import shutil
from pathlib import Path

import pytest

from harness.results.compare import compare, resolve_sides
from harness.results.queries import open_results
from leaderboards import views
from leaderboards.export import build_view, write

ROOT = Path(__file__).resolve().parents[2]
CASES = [
    ("showcase-2026-11-24.duckdb", "f1"),
    pytest.param("showcase-2026-11-24.duckdb", "em", marks=pytest.mark.slow),
    ("showcase50-2026-11-24.duckdb", "f1"),
    pytest.param("showcase50-2026-11-24.duckdb", "em", marks=pytest.mark.slow),
]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(("name", "metric"), CASES)
def test_board_export_and_compare_give_the_same_p_on_every_pair(tmp_path, name, metric) -> None:
    committed = ROOT / "results" / name
    before = _sha(committed)
    db = tmp_path / name
    shutil.copyfile(committed, db)
    store = open_results(db)
    pid = views.choose_protocol(store, None)
    board = views.leaderboard_from_db(store, pid, metric)
    out = tmp_path / "board.csv"
    write(build_view(store, "leaderboard", metric=metric), "csv", out)
    exported = {(r["method"], r["model"]): r for r in csv.DictReader(out.open())}
    methods = sorted(set(board.frame["method"]))
    sides = {  # each method's side once (as harness compare resolves it)
        m: resolve_sides(store, m, methods[m == methods[0]], metric=metric, protocol=pid)[0] for m in methods
    }
    checked = 0
    for key in board.shown_keys():
        best, tests = board.tests_against_best(key)
        ref = board.frame.iloc[min(best)]
        for i, t in tests.items():
            row = board.frame.iloc[i]
            c = compare(sides[ref["method"]], sides[row["method"]], metric, list(board.members(key)))
            via_compare = c.overall if len(board.members(key)) > 1 else c.per_dataset[0][1]
            via_export = float(exported[(row["method"], row["model"])][f"{key}_p"])
            assert t is not None and t.p == via_compare.p == pytest.approx(via_export, rel=1e-12), (
                key,
                row["method"],
            )
            assert t.test == via_compare.test
            checked += 1
        for i in best:  # the best row has no p against itself
            assert math.isnan(
                float(exported[tuple(board.frame.iloc[i][["method", "model"]])][f"{key}_p"] or "nan")
            )
    assert checked >= 12
    assert _sha(committed) == before
