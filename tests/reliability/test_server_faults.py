"""A generation server that fails (HTTP 500, a hang past the client's timeout, a body that is not
JSON, a connection dropped mid-reply) never produces a scored answer: the sample is stored as an
error with its reason, the run ends `incomplete`, `harness run` says how many on one stderr line
and exits 1, and `--resume` against a healthy server gives exactly the table of a clean run."""

from __future__ import annotations

import pytest

from harness.cli import main
from tests.reliability.fake_openai import FakeOpenAI
from tests.reliability.helpers import TOTAL, questions, rows, run_args, table

# the reason each fault leaves in samples.error (the client's exception, after its retries)
FAULTS = {
    "500": "InternalServerError",
    "hang": "APITimeoutError",
    "malformed": "JSONDecodeError",
    "drop": "APIConnectionError",
}


@pytest.fixture(scope="module")
def clean_table(tok_dir, tmp_path_factory):
    db = tmp_path_factory.mktemp("clean") / "clean.duckdb"
    with FakeOpenAI() as srv:
        assert main(run_args(srv.url, tok_dir, db)) == 0
    t = table(db)
    assert len({(r[1], r[2]) for r in t}) == TOTAL
    return t


@pytest.mark.integration
def test_failed_requests_are_errors_not_zeros_then_resumed(tok_dir, tmp_path, capsys, clean_table):
    db = tmp_path / "r.duckdb"
    qs = questions()
    # each of the first four questions fails its own way; the last two are answered
    plan = {q: fault for (_, _, q), fault in zip(qs, FAULTS, strict=False)}
    with FakeOpenAI(faults=plan) as srv:
        assert main(run_args(srv.url, tok_dir, db)) == 1
        assert srv.faults == 2 * len(FAULTS)  # each tried twice (--retries 1), then given up
    err = capsys.readouterr().err
    assert "Traceback" not in err
    [line] = [x for x in err.splitlines() if x.startswith("error:")]
    assert line.startswith("error: 4 sample(s) failed after the backend's retries and are not scored")
    assert "marked incomplete" in line and "--resume" in line
    assert rows(db, "SELECT status FROM runs") == [("incomplete",)]
    # stored as errors with the reason, and nothing scored for them: no metric row, no zero
    stored = dict(
        ((d, s), (st, e))
        for d, s, st, e in rows(db, "SELECT dataset, sample_id, extraction_status, error FROM samples")
    )
    assert len(stored) == TOTAL
    for (dataset, sample_id, _q), fault in zip(qs, FAULTS, strict=False):
        status, why = stored[(dataset, sample_id)]
        assert status == "error" and FAULTS[fault] in why, (fault, why)
    assert rows(db, "SELECT count(DISTINCT (dataset, sample_id)) FROM sample_metrics") == [(2,)]
    assert {(r[1], r[2]) for r in table(db)} == {(d, s) for d, s, _ in qs[len(FAULTS) :]}

    with FakeOpenAI() as healthy:  # the cause is fixed: --resume retries exactly the failed samples
        assert main(run_args(healthy.url, tok_dir, db, "--resume")) == 0
        assert healthy.requests == len(FAULTS)
    assert rows(db, "SELECT status FROM runs") == [("complete",)]
    assert rows(db, "SELECT count(*) FROM samples WHERE extraction_status = 'error'") == [(0,)]
    assert table(db) == clean_table


@pytest.mark.integration
def test_failed_samples_are_counted_not_averaged(tok_dir, tmp_path, capsys):
    from harness.results.store import Store
    from harness.results.summary import summary

    db = tmp_path / "r.duckdb"
    dataset, _, question = questions()[0]
    with FakeOpenAI(faults={question: "500"}) as srv:
        assert main(run_args(srv.url, tok_dir, db)) == 1
    out = capsys.readouterr()
    assert "error: 1 sample(s) failed" in out.err
    assert "errors" in out.out  # the summary table shows the count
    (run_id,) = [r for (r,) in rows(db, "SELECT run_id FROM runs")]
    df = summary(Store(db, read_only=True), [run_id]).set_index("dataset")
    assert df["n"].sum() == TOTAL - 1 and df["errors"].sum() == 1 and df.loc[dataset, "errors"] == 1
    # the failed question is in no mean: each EM is the mean over that dataset's scored questions
    scored = rows(
        db,
        "SELECT dataset, avg(value), count(*) FROM sample_metrics WHERE metric = 'em' GROUP BY ALL",
    )
    for ds, em, n in scored:
        assert df.loc[ds, "em"] == pytest.approx(em) and df.loc[ds, "n"] == n


@pytest.mark.integration
def test_judge_failures_are_counted_and_exit_nonzero(tok_dir, tmp_path, capsys):
    db = tmp_path / "r.duckdb"
    with FakeOpenAI() as srv:
        assert main(run_args(srv.url, tok_dir, db)) == 0
    (run_id,) = [r for (r,) in rows(db, "SELECT run_id FROM runs")]
    capsys.readouterr()
    with FakeOpenAI(fault="500") as judge:
        args = ["judge", "--run", run_id, "--db", str(db), "--judge-url", judge.url]
        args += ["--judge-model", "fake-model", "--judge-retries", "0", "--no-progress"]
        assert main(args) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"error: {TOTAL} judge request(s) failed after their retries" in err
    # no judge score was written for them (a failed verdict is never a 0)
    assert rows(db, "SELECT count(*) FROM sample_metrics WHERE metric LIKE 'judge@%'") == [(0,)]
