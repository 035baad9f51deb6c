"""The run lifecycle (``harness.results.lifecycle``): the rows it creates, resumes and finishes."""

from __future__ import annotations

import json
import platform
import re
import sys
from types import SimpleNamespace

import duckdb
import pytest

from harness.errors import StoreError
from harness.eval.protocol import preset
from harness.results import lifecycle
from harness.results.store import RunRecord, Store, this_owner

RUN_ID = re.compile(r"^(?P<name>.+)-\d{8}-\d{6}-[0-9a-f]{6}$")


@pytest.fixture
def store(tmp_path) -> Store:
    return Store(tmp_path / "r.duckdb", lock_timeout=5.0)


def eval_run(store: Store, run_id: str = "r1", **kw) -> str:
    args = dict(
        run_id=run_id,
        kind="eval",
        method="direct",
        model="m",
        backend="transformers",
        protocol=preset("mini"),
        method_spec_hash="h1",
        method_spec_json='{"x": 1}',
        bench="mini-multihop",
    )
    args.update(kw)
    return lifecycle.create_run(store, **args)


def test_command_line_is_shell_quoted_and_redacted():
    argv = ["harness", "run", "--label", "a b", "--base-url", "http://u:pw@h:1/v1", "--x", "y=2"]
    assert lifecycle.command_line(argv) == "harness run --label 'a b' --base-url http://u:***@h:1/v1 --x y=2"


def test_new_run_id_names_the_run_and_is_unique():
    a, b = lifecycle.new_run_id("search_r1"), lifecycle.new_run_id("search_r1")
    assert RUN_ID.match(a).group("name") == "search_r1" and a != b


def test_versions_name_python_and_the_installed_packages():
    v = lifecycle.versions()
    assert v["python"] == platform.python_version()
    assert v["duckdb"] == duckdb.__version__
    assert set(v) <= {"python", *lifecycle.VERSIONED_PACKAGES}


def test_create_run_records_provenance_and_this_command(store, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["harness", "run", "--base-url", "http://k@h/v1", "--label", "a b"])
    proto = preset("mini")
    assert eval_run(store, label="lab", n_expected=7, owned=True) == "r1"
    run = store.get_run("r1")
    assert (run.kind, run.method, run.model, run.backend, run.bench) == (
        "eval",
        "direct",
        "m",
        "transformers",
        "mini-multihop",
    )
    assert (run.protocol_id, run.protocol_name, run.protocol_json) == (
        proto.protocol_id,
        proto.name,
        proto.model_dump_json(),
    )
    assert (run.method_spec_hash, run.method_spec_json, run.label, run.n_expected) == (
        "h1",
        '{"x": 1}',
        "lab",
        7,
    )
    assert run.command == "harness run --base-url http://***@h/v1 --label 'a b'"
    assert run.git_commit == lifecycle.git_commit()
    assert re.fullmatch(r"([0-9a-f]{40}(\+dirty)?)?", run.git_commit)
    assert json.loads(run.versions_json) == lifecycle.versions()
    assert (run.status, run.seconds, run.ended_at) == ("running", 0.0, None)
    assert (run.owner_pid, run.owner_host, run.heartbeat_at) == (*this_owner(), None)


def test_a_given_command_is_stored_redacted_and_an_unowned_run_has_no_owner(store):
    eval_run(store, command="harness run --base-url https://h/v1?api_key=s3cret")
    run = store.get_run("r1")
    assert run.command == "harness run --base-url https://h/v1?api_key=***"
    assert (run.owner_pid, run.owner_host) == (None, None)


def test_create_train_run_is_the_train_row_of_a_recipe(store, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["harness", "train", "--method", "toy"])
    proto = preset("mini")
    specs = []
    method = SimpleNamespace(
        name="toy", spec=lambda p: specs.append(p) or SimpleNamespace(spec_hash="spec-h")
    )
    recipe = SimpleNamespace(bench="mini-singlehop", model_dump_json=lambda: '{"recipe": 1}')
    run_id = lifecycle.create_train_run(
        store, prefix="sft", method=method, recipe=recipe, protocol=proto, model="base", label="sft recipe r"
    )
    assert RUN_ID.match(run_id).group("name") == "sft-toy" and specs == [proto]
    run = store.get_run(run_id)
    assert (run.kind, run.method, run.model, run.backend, run.bench, run.label) == (
        "train",
        "toy",
        "base",
        "transformers",
        "mini-singlehop",
        "sft recipe r",
    )
    assert (run.method_spec_hash, run.method_spec_json) == ("spec-h", '{"recipe": 1}')
    # a training row records its owner process, so a later --resume can tell a dead run from a live one
    assert run.command == "harness train --method toy" and run.owner_pid == lifecycle.this_owner()[0]


def test_resume_run_claims_the_newest_unfinished_identical_run(store):
    key = dict(method="direct", model="m", protocol_id=preset("mini").protocol_id, bench="mini-multihop")
    assert lifecycle.resume_run(store, method_spec_hash="h1", **key) is None
    eval_run(store)
    store.finish_run("r1", "interrupted", 3.0)
    assert lifecycle.resume_run(store, method_spec_hash="h2", **key) is None
    assert lifecycle.resume_run(store, method_spec_hash="h1", **key) == ("r1", False)
    run = store.get_run("r1")
    assert (run.status, run.owner_pid, run.owner_host, run.seconds) == ("running", *this_owner(), 3.0)


def test_resume_run_returns_a_complete_run_untouched(store):
    key = dict(method="direct", model="m", protocol_id=preset("mini").protocol_id, bench="mini-multihop")
    eval_run(store)
    store.finish_run("r1", "complete", 3.0)
    before = store.get_run("r1")
    assert lifecycle.resume_run(store, method_spec_hash="h1", **key) == ("r1", True)
    assert store.get_run("r1") == before  # not claimed, not re-finished


def test_resume_run_refuses_a_run_a_live_process_writes(store):
    import os

    eval_run(store)
    store.finish_run("r1", "running", 0.0)
    key = dict(method="direct", model="m", protocol_id=preset("mini").protocol_id, bench="mini-multihop")
    with store.connect() as con:  # owned by our parent: alive, not us
        con.execute("UPDATE runs SET owner_pid = ? WHERE run_id = 'r1'", [os.getppid()])
    with pytest.raises(StoreError, match=f"run r1 is being written by process {os.getppid()}"):
        lifecycle.resume_run(store, method_spec_hash="h1", **key)


def test_running_finishes_complete_or_with_the_status_it_is_given(store):
    eval_run(store, "a")
    with lifecycle.running(store, "a") as active:
        assert active.run_id == "a" and store.get_run("a").status == "running"
    assert store.get_run("a").status == "complete" and active.seconds == store.get_run("a").seconds

    eval_run(store, "b")
    with lifecycle.running(store, "b") as active:
        active.status = "incomplete"
    assert store.get_run("b").status == "incomplete"


def test_running_marks_failed_or_interrupted_and_lets_the_error_through(store):
    eval_run(store, "a")
    with pytest.raises(RuntimeError, match="boom"), lifecycle.running(store, "a") as active:
        active.status = "incomplete"  # never reached the end: the exception decides
        raise RuntimeError("boom")
    assert store.get_run("a").status == "failed" and store.get_run("a").ended_at is not None

    eval_run(store, "b")
    with pytest.raises(KeyboardInterrupt), lifecycle.running(store, "b"):
        raise KeyboardInterrupt
    assert store.get_run("b").status == "interrupted"


def test_seconds_add_up_over_resumptions_and_release_keeps_them(store):
    eval_run(store)
    store.finish_run("r1", "interrupted", 10.0)
    with lifecycle.running(store, "r1") as active:
        pass
    assert active.seconds >= 10.0 and store.get_run("r1").seconds == active.seconds
    store.finish_run("r1", "running", 7.5)
    lifecycle.release(store, "r1")
    run = store.get_run("r1")
    assert (run.status, run.seconds) == ("failed", 7.5)


def test_finishing_a_vanished_run_writes_nothing(store):
    assert lifecycle.finish_run(store, "ghost", "complete", 5.0) == 0.0
    assert store.get_run("ghost") is None


def test_rows_have_the_columns_of_a_run_record(store):
    eval_run(store)
    cols = list(store.query("SELECT * FROM runs").columns)
    assert cols == list(RunRecord.__dataclass_fields__)


@pytest.mark.parametrize("fails", [False, True])
def test_harness_train_records_and_ends_its_run_row(fails, tmp_path, monkeypatch, capsys):
    """`harness train` creates its row through the lifecycle and ends it however training ends
    (the trainer is replaced: this checks the bookkeeping, not training)."""
    import harness.rl.trainer as trainer_module
    from harness.cli import main

    class Trainer:
        def __init__(self, method, recipe, **kw):
            self.run_id = kw["run_id"]

        def train(self):
            if fails:
                raise RuntimeError("boom")
            return SimpleNamespace(checkpoint=tmp_path / "final")

    monkeypatch.setattr(trainer_module, "Trainer", Trainer)
    db = tmp_path / "t.duckdb"
    argv = [
        "train",
        "--method",
        "search_r1",
        "--recipe",
        "cpu-smoke",
        "--db",
        str(db),
        "--out",
        str(tmp_path / "o"),
    ]
    monkeypatch.setattr(sys, "argv", ["harness", *argv])
    if fails:
        with pytest.raises(RuntimeError, match="boom"):
            main(argv)
    else:
        assert main(argv) == 0
    results = Store(db, read_only=True)
    (run_id,) = results.query("SELECT run_id FROM runs")["run_id"]
    run = results.get_run(run_id)
    assert RUN_ID.match(run.run_id).group("name") == "train-search_r1"
    assert (run.kind, run.method, run.backend, run.label, run.status) == (
        "train",
        "search_r1",
        "transformers",
        "recipe cpu-smoke",
        "failed" if fails else "complete",
    )
    assert run.command == "harness " + " ".join(argv) and run.ended_at is not None
    if not fails:
        assert f"run: {run.run_id} (metrics in {db}, table train_steps)" in capsys.readouterr().out


@pytest.mark.integration
def test_git_commit_is_read_once_with_a_dirty_mark(tmp_path, monkeypatch):
    import subprocess

    assert lifecycle.read_git_commit(tmp_path) == ""  # not a checkout
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "f.txt").write_text("a")
    subprocess.run([*git, "add", "f.txt"], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "x"], cwd=tmp_path, check=True)
    sha = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True
    ).stdout.strip()
    assert lifecycle.read_git_commit(tmp_path) == sha
    (tmp_path / "untracked.txt").write_text("u")  # untracked files are not the code that ran
    assert lifecycle.read_git_commit(tmp_path) == sha
    (tmp_path / "f.txt").write_text("b")
    assert lifecycle.read_git_commit(tmp_path) == sha + "+dirty"
    # the process's commit was read at import: a later commit is not the code that runs
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("git read again"))
    assert lifecycle.git_commit() == lifecycle.git_commit()
