"""Ties (≈) and best marks come only from the paired test: on the committed showcase databases every
≈ left is a row that exact McNemar against the column's best does not separate (p >= 0.05,
recomputed here from the stored per-question values with scipy), every other row is separated, and
the pairs that overlapping intervals used to call ties (ircot vs sure on the average: 7 vs 0,
p = 0.016) are separated. Holm's correction only ever adds ties."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from scipy.stats import binomtest

from harness.results.queries import open_results
from leaderboards import views
from leaderboards.export import leaderboard_table, paper_markdown

ROOT = Path(__file__).resolve().parents[2]
SHOWCASES = ["results/showcase-2026-11-24.duckdb", "results/showcase50-2026-11-24.duckdb"]


def _values(db: Path) -> dict[tuple[str, str], dict[tuple[str, str], float]]:
    """(method, model) -> (dataset, sample id) -> EM, straight from the tables (the newest complete
    run of each method: the showcase's runs each cover every dataset)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute(
            """SELECT r.method, r.model, m.dataset, m.sample_id, m.value FROM sample_metrics m
               JOIN (SELECT run_id, method, model FROM runs WHERE kind = 'eval' AND status = 'complete'
                     QUALIFY row_number() OVER (PARTITION BY method, model ORDER BY started_at DESC) = 1) r
               USING (run_id) WHERE m.metric = 'em'"""
        ).fetchall()
    finally:
        con.close()
    out: dict[tuple[str, str], dict[tuple[str, str], float]] = {}
    for method, model, d, s, v in rows:
        out.setdefault((method, model), {})[(d, s)] = v
    return out


def _mcnemar(a: dict, b: dict, datasets: tuple[str, ...]) -> float:
    keys = [k for k in a if k in b and k[0] in datasets]
    b_wins = sum(b[k] > a[k] for k in keys)
    a_wins = sum(a[k] > b[k] for k in keys)
    return 1.0 if a_wins + b_wins == 0 else binomtest(b_wins, a_wins + b_wins).pvalue


@pytest.mark.parametrize("db", SHOWCASES)
def test_every_tie_survives_the_paired_test_and_every_other_row_is_separated(db) -> None:
    store = open_results(ROOT / db)
    board = views.leaderboard_from_db(store, views.choose_protocol(store, None), "em")
    values = _values(ROOT / db)
    rows = list(zip(board.frame["method"], board.frame["model"], strict=True))
    checked = 0
    for key in board.score_keys:
        best, ties = board.best_and_ties(key)
        ref = rows[min(best)]
        for i, row in enumerate(rows):
            if i in best or board.frame[key].isna()[i]:
                continue
            p = _mcnemar(values[ref], values[row], board.members(key))
            assert (i in ties) == (p >= 0.05), (db, key, row, p)
            checked += 1
    assert checked >= 2 * len(board.score_keys)


def test_the_pairs_overlapping_intervals_called_ties_are_separated() -> None:
    store = open_results(ROOT / SHOWCASES[0])
    board = views.leaderboard_from_db(store, views.choose_protocol(store, None), "em")
    methods = list(board.frame["method"])
    best, ties = board.best_and_ties("avg_all")
    assert [methods[i] for i in best] == ["ircot"]
    t = board.paired_with("avg_all", ("ircot", board.frame["model"][0]), ("sure", board.frame["model"][0]))
    assert (t.a_better, t.b_better, round(t.p, 3)) == (7, 0, 0.016)
    assert methods.index("sure") not in ties and methods.index("search_o1") not in ties
    assert methods.index("naive_rag") in ties  # 27.5 vs 37.5: not separated
    md = paper_markdown(leaderboard_table(board))
    sure = next(line for line in md.splitlines() if line.startswith("| sure |"))
    assert sure.split(" | ")[6] == "20.0 (p 0.016)"  # Avg.: no ≈, the exact p
    assert "paired test (exact McNemar)" in md and "not corrected for multiple comparisons" in md


def test_holm_only_adds_ties() -> None:
    store = open_results(ROOT / SHOWCASES[1])
    board = views.leaderboard_from_db(store, views.choose_protocol(store, None), "em")
    grew = False
    for key in board.score_keys:
        plain, holm = board.best_and_ties(key)[1], board.best_and_ties(key, holm=True)[1]
        assert plain <= holm
        grew |= holm != plain
    assert grew  # on 50 questions at least one pair separated per pair is not after Holm
    md = paper_markdown(leaderboard_table(board, holm=True))
    assert "with Holm's correction across the column's rows" in md
