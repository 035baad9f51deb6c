"""With partial runs included, best and ties are decided on the questions both rows answered: an
interrupted run that scored 4 of its 8 questions (50%) is not best over a complete run that scored
6 of those 8 (and 20 of 50 overall, 40%)."""

from __future__ import annotations

import pandas as pd

from leaderboards import views
from leaderboards.export import leaderboard_table, paper_markdown


def _values() -> pd.DataFrame:
    naive = [1.0] * 6 + [0.0] * 2 + [1.0] * 14 + [0.0] * 28  # 6/8 on the first eight, 20/50 overall
    ircot = [1.0, 0.0] * 4  # 4/8: the interrupted run's eight questions
    rows = [
        {"protocol_id": "p", "protocol_name": "p", "method": m, "model": "M", "label": "", "run_id": f"{m}-r",
         "dataset": "popqa", "sample_id": f"q{i:02d}", "metric": "em", "value": v}
        for m, vals in (("naive_rag", naive), ("ircot", ircot)) for i, v in enumerate(vals)
    ]  # fmt: skip
    return pd.DataFrame(rows)


def test_a_partial_row_is_not_best_when_the_complete_row_beats_it_on_the_shared_questions() -> None:
    board = views.build_leaderboard(_values(), protocol_id="p", protocol_name="p", metric="em")
    methods = list(board.frame["method"])
    assert methods == ["ircot", "naive_rag"]  # sorted by score: 50.0 over 40.0
    best, ties = board.best_and_ties("popqa")
    assert [methods[i] for i in best] == ["naive_rag"]
    # ircot against naive_rag on the eight both answered: 4 vs 6 correct (3 vs 1 discordant)
    (_, tests) = board.tests_against_best("popqa")
    t = tests[methods.index("ircot")]
    assert (t.n, t.a_better, t.b_better) == (8, 3, 1) and methods.index("ircot") in ties
    assert board.shared_diff("popqa", ("naive_rag", "M"), ("ircot", "M")) == -0.25


def test_the_markdown_export_marks_the_partial_row() -> None:
    board = views.build_leaderboard(_values(), protocol_id="p", protocol_name="p", metric="em")
    board.frame.loc[board.frame["method"] == "ircot", "status"] = "partial: ircot-r interrupted"
    md = paper_markdown(leaderboard_table(board))
    line = next(x for x in md.splitlines() if x.startswith("| ircot"))
    assert line.startswith("| ircot (partial) | M | 50.0 ≈ (p 0.625, n=8)")
    assert "**40.0**" in md and "(partial): a run that did not finish" in md
