"""The probes of a careless or hostile user: every bad argument, a truncated results file, a model
or server that does not exist. Each is one line on stderr (no traceback), before any model loads or
any row is written; and no credential in a URL is ever stored."""

from __future__ import annotations

import pytest

from harness.cli import main
from tests.reliability.fake_openai import FakeOpenAI
from tests.reliability.helpers import TOTAL, one_line, rows, run_args

BASE = ["run", "--method", "direct", "--bench", "mini-multihop", "--no-progress"]


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        ("--limit", "0", "argument --limit: expected a positive integer (1 or more), got 0"),
        ("--limit", "-1", "argument --limit: expected a positive integer (1 or more), got -1"),
        ("--sample", "0", "argument --sample: expected a positive integer (1 or more), got 0"),
        ("--batch-size", "0", "argument --batch-size: expected a positive integer (1 or more), got 0"),
        ("--top-k", "0", "argument --top-k: expected a positive integer (1 or more), got 0"),
        ("--retries", "-1", "argument --retries: expected an integer >= 0, got -1"),
        ("--request-timeout", "0", "argument --request-timeout: expected a positive number, got 0"),
        ("--threads", "0", "argument --threads: expected a positive integer (1 or more), got 0"),
    ],
)
def test_bad_numbers_are_one_line_and_write_nothing(flag, value, says, tmp_path, capsys):
    db = tmp_path / "r.duckdb"
    with pytest.raises(SystemExit) as exit_:
        main([*BASE, "--db", str(db), flag, value])
    assert exit_.value.code == 2
    assert one_line(capsys.readouterr().err) == f"harness run: error: {says} (see harness run --help)"
    assert not db.exists()


def test_threads_with_a_server_is_one_line(tmp_path, capsys):
    db = tmp_path / "r.duckdb"
    argv = [*BASE, "--db", str(db), "--threads", "2", "--base-url", "http://127.0.0.1:9/v1", "--model", "m"]
    assert main(argv) == 2
    assert one_line(capsys.readouterr().err) == (
        "error: --threads sets an in-process model's threads; a --base-url server has its own"
    )
    assert not db.exists()


def test_threads_slots_and_draft_reach_the_backend(tmp_path, capsys, monkeypatch):
    import argparse
    import os

    # --threads is lowered to the cores the load average leaves free (fit_threads): idle cores here
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    monkeypatch.setattr("harness.llm.server._cpus", lambda: 2)
    monkeypatch.setattr("harness.llm.server.busy_cores", lambda: 0.0)

    from harness.cli.cmd_run import add_parser, backend_options

    sub = argparse.ArgumentParser().add_subparsers()
    add_parser(sub)
    args = sub.choices["run"].parse_args(["--threads", "2"])
    assert backend_options(args) == {"threads": 2}
    args = sub.choices["run"].parse_args(["--slots", "4", "--draft", "ngram"])
    assert backend_options(args) == {"max_batch_size": 4, "draft": "ngram"}
    argv = ["run", "--method", "direct", "--backend", "transformers", "--draft", "ngram"]
    assert main([*argv, "--db", str(tmp_path / "r.duckdb")]) == 2
    assert "the transformers backend does not draft" in one_line(capsys.readouterr().err)


def test_unknown_bench_creates_no_file(tmp_path, capsys):
    db = tmp_path / "r.duckdb"
    assert main(["run", "--method", "direct", "--bench", "nosuchbench", "--db", str(db)]) == 2
    assert one_line(capsys.readouterr().err).startswith("error: unknown bench 'nosuchbench'")
    assert not db.exists()


def test_unknown_model_leaves_no_run(tmp_path, capsys):
    db = tmp_path / "r.duckdb"
    assert main([*BASE, "--limit", "1", "--model", "nosuchmodel", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    # refused before the run starts: the error is the only line (no protocol line, no results file)
    assert one_line(err).startswith("error: model 'nosuchmodel' is neither a")
    assert not db.exists()  # no results file at all, so no `running` (or any) row


@pytest.mark.integration
def test_dead_base_url_is_one_line_before_anything(tok_dir, tmp_path, capsys):
    with FakeOpenAI() as srv:
        dead = srv.url  # a port that was just free, now closed
    db = tmp_path / "r.duckdb"
    assert main(run_args(dead, tok_dir, db)) == 2
    line = one_line(capsys.readouterr().err)
    assert (
        line.startswith(f"error: cannot reach the OpenAI-compatible server at {dead}")
        and "--base-url" in line
    )
    assert not db.exists()


@pytest.mark.integration
def test_a_server_that_does_not_serve_the_model(tok_dir, tmp_path, capsys):
    db = tmp_path / "r.duckdb"
    with FakeOpenAI() as srv:
        args = run_args(srv.url, tok_dir, db)
        args[args.index("fake-model")] = "gpt-9"
        assert main(args) == 2
        assert srv.requests == 0
    assert "does not serve model 'gpt-9'; it serves fake-model" in one_line(capsys.readouterr().err)


@pytest.mark.integration
@pytest.mark.parametrize("cut", ["empty", "header", "half"])
def test_truncated_results_file_is_one_line_before_any_work(cut, tok_dir, tmp_path, capsys):
    db = tmp_path / "r.duckdb"
    with FakeOpenAI() as srv:
        assert main(run_args(srv.url, tok_dir, db)) == 0
    size = db.stat().st_size
    with db.open("r+b") as f:
        f.truncate({"empty": 0, "header": 100, "half": size // 2}[cut])
    capsys.readouterr()
    with FakeOpenAI() as srv:
        assert main(run_args(srv.url, tok_dir, db, "--resume")) == 2
        assert srv.requests == 0  # nothing was solved before the file was refused
    line = one_line(capsys.readouterr().err)
    assert line.startswith(f"error: {db}: the results database is damaged or truncated (")
    assert "move it aside" in line
    # the read-only commands say the same
    for argv in (["regress", "--db", str(db)], ["export", "--format", "csv", "--db", str(db)]):
        assert main(argv) == 2
        assert "damaged or truncated" in one_line(capsys.readouterr().err)


@pytest.mark.integration
def test_credentials_in_urls_are_never_stored(tok_dir, tmp_path, capsys):
    from harness.llm.base import BackendSpec, make_backend

    db = tmp_path / "r.duckdb"
    with FakeOpenAI(fault="500", fault_when="Question") as srv:
        url = srv.url.replace("http://", "http://me:sk-SECRET1@") + "?api_key=sk-SECRET2"
        assert main(run_args(url, tok_dir, db)) == 1  # every request fails: the reasons name the URL
        backend = make_backend(BackendSpec(kind="openai", model="fake-model", base_urls=(url,)))
        assert "sk-SECRET" not in str(backend.describe())
    out = capsys.readouterr()
    assert "sk-SECRET" not in out.out + out.err
    stored = rows(
        db,
        """SELECT string_agg(command || protocol_json || method_spec_json || label, '') FROM runs
           UNION ALL SELECT string_agg(coalesce(error, '') || response, '') FROM samples""",
    )
    text = "".join(str(x) for (x,) in stored)
    assert "sk-SECRET" not in text
    assert "me:***@127.0.0.1" in text and "api_key=***" in text
    assert rows(db, "SELECT count(*) FROM samples WHERE extraction_status = 'error'") == [(TOTAL,)]


def test_store_migrates_an_old_file(tmp_path):
    import duckdb

    from harness.results.store import Store

    db = tmp_path / "old.duckdb"
    Store(db)
    with duckdb.connect(str(db)) as con:  # a file from before runs had owners
        for col in ("owner_pid", "owner_host", "heartbeat_at"):
            con.execute(f"ALTER TABLE runs DROP COLUMN {col}")
    Store(db)
    cols = {c for (c,) in rows(db, "SELECT column_name FROM duckdb_columns() WHERE table_name = 'runs'")}
    assert {"owner_pid", "owner_host", "heartbeat_at"} <= cols
