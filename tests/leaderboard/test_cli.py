"""``harness leaderboard``: what it writes before starting, and the server command it becomes."""

from __future__ import annotations

import hashlib
import os
import shutil
import sys

import pytest

import leaderboards
from harness.cli import main
from leaderboards.queries import open_results, reported


class _Exec(Exception):
    pass


@pytest.fixture
def captured_exec(monkeypatch):
    calls = []

    def fake_execve(path, argv, env):
        calls.append((path, argv, env))
        raise _Exec

    monkeypatch.setattr(os, "execve", fake_execve)
    return calls


def test_leaderboard_syncs_then_becomes_streamlit(fixture_db, tmp_path, captured_exec):
    db = tmp_path / "copy.duckdb"
    shutil.copy(fixture_db.path, db)
    with pytest.raises(_Exec):
        main(["leaderboard", "--db", str(db), "--sync", "--port", "8642", "--host", "127.0.0.1"])
    [(path, argv, env)] = captured_exec
    assert path == sys.executable
    assert argv[1:4] == ["-m", "streamlit", "run"]
    assert argv[4].endswith("leaderboards/app.py")
    flags = dict(zip(argv[5::2], argv[6::2], strict=True))
    assert flags == {
        "--server.headless": "true",
        "--server.address": "127.0.0.1",
        "--server.port": "8642",
        "--browser.gatherUsageStats": "false",
        "--client.toolbarMode": "viewer",
    }
    assert env[leaderboards.DB_ENV] == str(db.resolve())
    papers = set(reported(open_results(db))["paper"])
    assert {"search_r1", "eval_rar", "r_search"} <= papers  # every registered paper's table


@pytest.mark.parametrize("flags", [[], ["--no-sync"]])
def test_by_default_the_file_is_left_byte_identical(fixture_db, tmp_path, captured_exec, flags):
    db = tmp_path / "copy.duckdb"
    shutil.copy(fixture_db.path, db)
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    with pytest.raises(_Exec):
        main(["leaderboard", "--db", str(db), *flags])
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert set(reported(open_results(db))["paper"]) == {"search_r1", "tiresrag_r1"}  # the fixture's own rows
    assert captured_exec[0][1][captured_exec[0][1].index("--server.port") + 1] == "8501"


def test_leaderboard_without_database(tmp_path, capsys):
    assert main(["leaderboard", "--db", str(tmp_path / "none.duckdb")]) == 2
    assert "no results database here; run `harness run" in capsys.readouterr().err
