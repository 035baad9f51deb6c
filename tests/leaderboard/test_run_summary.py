"""``harness run``'s summary (issue 36): scores in %, the primary metric with its 95% interval as
the leaderboard computes it, a per-method average row, seconds per question once per method; a run
refused before it starts writes no file; near-miss method names get a hint, stray spaces work."""

from __future__ import annotations

import numpy as np
import pytest

from harness.cli import main
from harness.results.summary import AVG, run_summary, summary
from leaderboards import views
from leaderboards.queries import open_results


def test_run_summary_has_the_leaderboards_intervals_and_an_average_row(fixture_db):
    store = open_results(fixture_db.path)
    rid = fixture_db.run_ids["naive_rag"]
    df = run_summary(store, [rid], "em")
    plain = summary(store, [rid], "em")
    rows = df[df["dataset"] != AVG]
    assert list(rows["primary"]) == list(plain["primary"])  # the same means
    board = views.leaderboard_from_db(store, fixture_db.protocol.protocol_id, "em")
    lb = board.frame.set_index("method").loc["naive_rag"]
    for r in rows.itertuples():  # each dataset's interval is the leaderboard cell's
        assert (r.primary_lo, r.primary_hi) == pytest.approx((lb[f"{r.dataset}_lo"], lb[f"{r.dataset}_hi"]))
    (avg,) = df[df["dataset"] == AVG].itertuples()
    assert avg.n == rows["n"].sum() and avg.primary == pytest.approx(rows["primary"].mean())
    assert (avg.primary_lo, avg.primary_hi) == pytest.approx((lb["avg_all_lo"], lb["avg_all_hi"]))
    assert np.isnan(rows["seconds_per_q"]).all() and not np.isnan(avg.seconds_per_q)  # once per method


def test_a_run_refused_before_it_starts_writes_no_results_file(tmp_path, capsys):
    db = tmp_path / "X.duckdb"
    # the stray space splits the list in two words: still two methods (the error is the model's)
    assert main(["run", "--model", "gpt-5", "--db", str(db), "--method", "direct,", "naive_rag"]) == 2
    assert "model 'gpt-5' is neither a model preset" in capsys.readouterr().err
    assert not db.exists()


def test_a_near_miss_method_name_gets_a_hint(tmp_path, capsys):
    assert main(["run", "--method", "naive-rag", "--db", str(tmp_path / "x.duckdb")]) == 2
    err = capsys.readouterr().err
    assert "unknown method 'naive-rag' (did you mean naive_rag" in err and "\n" not in err.strip()
