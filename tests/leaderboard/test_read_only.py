"""Read-only by default: opening a committed ``results/*.duckdb`` in the app (every page), starting
``harness leaderboard`` on it, ``harness export`` of every view and ``harness compare`` leave the file
byte-identical (and ``git status`` clean)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import leaderboards
from harness.cli import main

ROOT = Path(__file__).resolve().parents[2]
# the databases committed with the repository, the showcase runs; not a user's own runs in results/
# (`harness run` writes results/harness.duckdb by default, git ignores it), which the tests would
# otherwise pick up: after `tox -e run` the export of its two protocols asks for --protocol (exit 2)
COMMITTED = sorted((ROOT / "results").glob("showcase*.duckdb"))
PAGES = ["app_pages/reported.py", "app_pages/cost.py", "app_pages/trajectories.py", "app_pages/training.py"]


def _hashes() -> dict[Path, str]:
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in COMMITTED}


def _git_status() -> str:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        return ""
    return subprocess.run(
        ["git", "status", "--porcelain", "--", "results"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_there_are_committed_databases() -> None:
    assert len(COMMITTED) >= 2


@pytest.mark.integration
@pytest.mark.parametrize("db", COMMITTED, ids=lambda p: p.name)
def test_export_and_compare_leave_the_file_byte_identical(db, tmp_path, capsys) -> None:
    before, status = _hashes(), _git_status()
    for view in ("leaderboard", "reported", "cost"):
        assert main(["export", "--format", "markdown", "--view", view, "--db", str(db)]) == 0
    assert main(["export", "--format", "csv", "--out", str(tmp_path / "b.csv"), "--db", str(db)]) == 0
    assert main(["compare", "direct", "naive_rag", "--db", str(db), "--show", "0"]) == 0
    capsys.readouterr()
    assert _hashes() == before
    assert _git_status() == status


def test_leaderboard_command_leaves_the_file_byte_identical(monkeypatch) -> None:
    class Exec(Exception):
        pass

    def fake_execve(path, argv, env):
        raise Exec

    monkeypatch.setattr(os, "execve", fake_execve)
    before = _hashes()
    for db in COMMITTED:
        with pytest.raises(Exec):
            main(["leaderboard", "--db", str(db)])
    assert _hashes() == before


@pytest.mark.integration
def test_every_app_page_leaves_the_file_byte_identical(monkeypatch) -> None:
    pytest.importorskip("streamlit", reason="the leaderboard app needs the ui extra (streamlit)")
    from streamlit.testing.v1 import AppTest

    before, status = _hashes(), _git_status()
    app = Path(leaderboards.__file__).resolve().parent / "app.py"
    for db in COMMITTED:
        monkeypatch.setenv(leaderboards.DB_ENV, str(db))
        at = AppTest.from_file(str(app), default_timeout=120)
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        for page in PAGES:
            at.switch_page(page).run()
            assert not at.exception, (page, [e.value for e in at.exception])
    assert _hashes() == before
    assert _git_status() == status
