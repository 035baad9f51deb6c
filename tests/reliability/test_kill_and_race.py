"""kill -9 at seeded random points, then `--resume`: the table equals a clean run's exactly, nothing
lost or duplicated. A `--resume` racing a live run is refused with one line, and the live run
finishes untouched.

The killed `harness run` is the CLI's own ``main`` in a forked child (the interpreter and its
imports are already warm, so a trial costs a second, not a fresh 10 s start-up); the fake server
sends it SIGKILL from inside its k-th request, plus a seeded delay that lands the kill in a
request, between batches, or inside a store write."""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import threading
import time

import pytest

from harness.cli import main
from tests.reliability.fake_openai import FakeOpenAI
from tests.reliability.helpers import TOTAL, one_line, rows, run_args, table

SEEDS = (0, 1, 2)
FORK = multiprocessing.get_context("fork")


def _child(argv: list[str]) -> None:
    import sys

    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - the child's only output
    os._exit(main(argv))


@pytest.fixture(scope="module")
def clean_table(tok_dir, tmp_path_factory):
    db = tmp_path_factory.mktemp("clean") / "clean.duckdb"
    with FakeOpenAI() as srv:
        assert main(run_args(srv.url, tok_dir, db, "--batch-size", "1")) == 0
    return table(db)


@pytest.mark.integration
@pytest.mark.parametrize("seed", SEEDS)
def test_kill9_at_a_random_point_then_resume_equals_clean(seed, tok_dir, tmp_path, capsys, clean_table):
    rng = random.Random(seed)
    kill_at = rng.randint(2, TOTAL - 1)  # the k-th request: some samples are done, some are not
    delay = rng.uniform(0.0, 0.05)
    db = tmp_path / "killed.duckdb"
    with FakeOpenAI() as srv:
        child = FORK.Process(target=_child, args=(run_args(srv.url, tok_dir, db, "--batch-size", "1"),))

        def kill(n: int) -> None:
            if n == kill_at:
                threading.Timer(delay, os.kill, (child.pid, signal.SIGKILL)).start()
            elif n > kill_at:  # the run cannot outpace its kill: the next answer waits for it
                time.sleep(2)

        srv.on_request = kill
        child.start()
        child.join(timeout=60)
        assert child.exitcode == -signal.SIGKILL, f"the kill did not land (exit {child.exitcode})"
    done = rows(db, "SELECT count(*) FROM samples")[0][0]
    assert 0 < done < TOTAL, f"killed at request {kill_at}: {done} of {TOTAL} samples"
    assert rows(db, "SELECT status FROM runs") == [("running",)]  # its owner is dead

    with FakeOpenAI() as healthy:
        assert main(run_args(healthy.url, tok_dir, db, "--batch-size", "1", "--resume")) == 0
        assert healthy.requests == TOTAL - done  # only what was not finished
    assert "Traceback" not in capsys.readouterr().err
    n, distinct = rows(db, "SELECT count(*), count(DISTINCT (run_id, dataset, sample_id)) FROM samples")[0]
    assert n == distinct == TOTAL
    assert rows(db, "SELECT status FROM runs") == [("complete",)]  # resumed, not restarted
    assert table(db) == clean_table


@pytest.mark.integration
def test_resume_racing_a_live_run_is_refused(tok_dir, tmp_path, capsys, clean_table):
    db = tmp_path / "live.duckdb"
    started = threading.Event()
    with FakeOpenAI(delay=0.3) as srv:  # a slow server keeps the first run alive
        srv.on_request = lambda n: started.set()
        child = FORK.Process(target=_child, args=(run_args(srv.url, tok_dir, db, "--batch-size", "1"),))
        child.start()
        assert started.wait(60)
        time.sleep(0.1)
        requests_before = srv.requests
        assert main(run_args(srv.url, tok_dir, db, "--batch-size", "1", "--resume")) == 2
        err = capsys.readouterr().err  # the plan, then one error line
        line = one_line(err[err.index("\nerror: ") + 1 :])
        assert "is being written by process" in line and f"{child.pid}" in line and "--resume" in line
        child.join(timeout=60)
        assert child.exitcode == 0  # the live run was not disturbed
        assert srv.requests == TOTAL  # the refused resume asked nothing
        assert requests_before >= 1
    assert rows(db, "SELECT status, owner_pid FROM runs") == [("complete", child.pid)]
    assert table(db) == clean_table


@pytest.mark.integration
def test_sigterm_ends_the_run_interrupted_with_its_time_then_resume_completes(
    tok_dir, tmp_path, capsys, clean_table
):
    """`kill PID` (SIGTERM) is how a background run is stopped (it ignores SIGINT): the run ends
    `interrupted` with its seconds recorded and exit 143, and `--resume` finishes it."""
    db = tmp_path / "termed.duckdb"
    with FakeOpenAI() as srv:
        child = FORK.Process(target=_child, args=(run_args(srv.url, tok_dir, db, "--batch-size", "1"),))

        def term(n: int) -> None:
            if n == 3:
                os.kill(child.pid, signal.SIGTERM)
            elif n > 3:  # the run cannot outpace its signal
                time.sleep(2)

        srv.on_request = term
        child.start()
        child.join(timeout=60)
        assert child.exitcode == 143
    ((status, seconds),) = rows(db, "SELECT status, seconds FROM runs")
    assert status == "interrupted" and seconds > 0
    done = rows(db, "SELECT count(*) FROM samples")[0][0]
    assert 0 < done < TOTAL
    with FakeOpenAI() as healthy:
        assert main(run_args(healthy.url, tok_dir, db, "--batch-size", "1", "--resume")) == 0
        assert healthy.requests == TOTAL - done
    assert "Traceback" not in capsys.readouterr().err
    assert rows(db, "SELECT status FROM runs") == [("complete",)]
    assert table(db) == clean_table
