"""Issue 33, items 1 and 2: a complete result is never hidden, a failure is never a result.

- A rerun that fails (its model server answers 500) does not hide the complete run before it:
  ``harness export`` still finds its metric and values (the views read metrics from the complete
  runs they show, never from the newest attempt).
- An HTTP 200 reply without generated text (``text: null``, or no ``text`` at all) is an error
  sample, like a 500: stored with its reason and no metric row, the run ends ``incomplete`` with
  exit 1, and ``--resume`` asks exactly those questions again.
"""

from __future__ import annotations

import pytest

from harness.cli import main
from tests.reliability.fake_openai import FakeOpenAI
from tests.reliability.helpers import TOTAL, questions, rows, run_args, table


@pytest.mark.integration
def test_a_failed_rerun_does_not_hide_the_complete_run(tok_dir, tmp_path, capsys):
    db = tmp_path / "r.duckdb"
    with FakeOpenAI() as srv:
        assert main(run_args(srv.url, tok_dir, db)) == 0
    capsys.readouterr()
    export = ["export", "--format", "markdown", "--db", str(db)]
    assert main(export) == 0
    before = capsys.readouterr().out
    assert "EM" in before
    with FakeOpenAI(fault="500") as failing:  # the same command again, every request fails
        assert main(run_args(failing.url, tok_dir, db)) == 1
    assert rows(db, "SELECT status FROM runs ORDER BY started_at") == [("complete",), ("incomplete",)]
    capsys.readouterr()
    for argv in (export, [*export, "--metric", "em"], [*export, "--view", "cost"]):
        assert main(argv) == 0, capsys.readouterr().err
        out = capsys.readouterr()
        assert "Traceback" not in out.err and out.out.strip(), argv
    assert main(export) == 0
    assert capsys.readouterr().out == before  # the complete run's table, unchanged

    from leaderboards import views
    from leaderboards.queries import open_results

    store = open_results(db)
    (pid,) = [p for (p,) in rows(db, "SELECT DISTINCT protocol_id FROM runs")]
    assert "em" in views.ordered_metrics(store, pid)
    assert views.resolve_metric(store, pid, "EM") == "em"


@pytest.mark.integration
@pytest.mark.parametrize("fault", ["null_text", "no_text"])
def test_a_reply_without_text_is_an_error_then_resumed(fault, tok_dir, tmp_path, capsys):
    db = tmp_path / "r.duckdb"
    dataset, sample_id, question = questions()[0]
    with FakeOpenAI(faults={question: fault}) as srv:
        assert main(run_args(srv.url, tok_dir, db)) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "error: 1 sample(s) failed" in err
    assert rows(db, "SELECT status FROM runs") == [("incomplete",)]
    [(status, why)] = rows(
        db,
        "SELECT extraction_status, error FROM samples WHERE dataset = ? AND sample_id = ?",
        [dataset, sample_id],
    )
    assert status == "error" and "no generated text" in why, why
    assert rows(db, "SELECT count(*) FROM sample_metrics WHERE sample_id = ?", [sample_id]) == [(0,)]
    with FakeOpenAI() as healthy:
        assert main(run_args(healthy.url, tok_dir, db, "--resume")) == 0
        assert healthy.requests == 1  # exactly the failed question
    assert rows(db, "SELECT status FROM runs") == [("complete",)]
    assert len({(r[1], r[2]) for r in table(db)}) == TOTAL


@pytest.mark.integration
def test_partial_views_merge_the_complete_run_after_a_failed_rerun(tok_dir, tmp_path, capsys, monkeypatch):
    """Issue 45, failure 2: with partial runs included, the failed rerun (every sample an error,
    no metric row) was "the latest" and the complete run before it vanished: `export
    --include-partial` found no metric, the cost view was empty, the app showed only a warning.
    A complete run now outranks any partial one of the same method, model and dataset; partial
    runs fill in only where nothing complete exists."""
    db = tmp_path / "r.duckdb"
    with FakeOpenAI() as srv:
        assert main(run_args(srv.url, tok_dir, db)) == 0
    export = ["export", "--format", "markdown", "--db", str(db)]
    capsys.readouterr()
    views_out = {}
    for view in ("leaderboard", "cost"):
        assert main([*export, "--view", view]) == 0
        views_out[view] = capsys.readouterr().out
    with FakeOpenAI(fault="500") as failing:
        assert main(run_args(failing.url, tok_dir, db)) == 1
    capsys.readouterr()
    complete_run = rows(db, "SELECT run_id FROM runs WHERE status = 'complete'")[0][0]
    for view in ("leaderboard", "cost"):
        assert main([*export, "--view", view, "--include-partial"]) == 0, capsys.readouterr().err
        out = capsys.readouterr().out
        assert len(out.splitlines()) == len(views_out[view].splitlines()) > 1, out
    from harness.results import queries

    store = queries.open_results(db)
    (pid,) = [p for (p,) in rows(db, "SELECT DISTINCT protocol_id FROM runs")]
    values = queries.latest_values(store, pid, ["em"], complete_only=False)
    assert set(values["run_id"]) == {complete_run} and len(values) == TOTAL
    costs = queries.latest_costs(store, pid, complete_only=False)
    assert set(costs["run_id"]) == {complete_run} and len(costs) == TOTAL

    pytest.importorskip("streamlit")
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    import leaderboards

    monkeypatch.setenv(leaderboards.DB_ENV, str(db))
    at = AppTest.from_file(str(Path(leaderboards.__file__).resolve().parent / "app.py"), default_timeout=60)
    at.query_params["partial"] = "1"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.warning, [w.value for w in at.warning]
    board = at.dataframe[0].value
    assert len(board) == 1 and board["method"].tolist() == ["direct"]
