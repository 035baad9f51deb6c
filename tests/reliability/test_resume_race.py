"""Two `harness run ... --resume` of the same new run started together (issue 33, failure 7):
both look, both find nothing; only one may create the run. The other is refused with one line
naming the run and its process, asks the model nothing more, and the run finishes with every
sample once.

The two runs are the CLI's own ``main`` in forked children; a barrier after ``find_resumable``
holds each until both have looked, so the race is certain, not a matter of timing."""

from __future__ import annotations

import multiprocessing
import os
import sys

import pytest

from harness.cli import main
from harness.results.store import Store
from tests.reliability.fake_openai import FakeOpenAI
from tests.reliability.helpers import TOTAL, rows, run_args

FORK = multiprocessing.get_context("fork")


def _child(argv: list[str], err_path: str) -> None:
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - the child's only output
    sys.stderr = open(err_path, "w")  # noqa: SIM115
    code = main(argv)
    sys.stderr.flush()
    os._exit(code)


@pytest.mark.integration
def test_two_resumes_of_a_new_run_started_together_make_one_run(tok_dir, tmp_path, monkeypatch):
    db = tmp_path / "race.duckdb"
    barrier = FORK.Barrier(2)
    find = Store.find_resumable

    def find_then_wait(self, **kw):
        found = find(self, **kw)
        barrier.wait(timeout=60)  # both children have looked (and found nothing) before either creates
        return found

    monkeypatch.setattr(Store, "find_resumable", find_then_wait)  # inherited by the forked children
    with FakeOpenAI(delay=0.05) as srv:
        argv = run_args(srv.url, tok_dir, db, "--batch-size", "1", "--resume")
        errs = [tmp_path / f"err{i}.txt" for i in range(2)]
        children = [FORK.Process(target=_child, args=(argv, str(e))) for e in errs]
        for c in children:
            c.start()
        for c in children:
            c.join(timeout=120)
        assert srv.requests == TOTAL  # the refused one asked nothing
    codes = sorted(c.exitcode for c in children)
    assert codes == [0, 2], codes
    runs = rows(db, "SELECT run_id, status, owner_pid FROM runs")
    assert len(runs) == 1, runs
    (run_id, status, owner) = runs[0]
    assert status == "complete"
    winner = next(c for c in children if c.exitcode == 0)
    loser = next(e for c, e in zip(children, errs, strict=True) if c.exitcode == 2)
    assert owner == winner.pid
    err = loser.read_text()
    assert "Traceback" not in err
    [line] = [x for x in err.splitlines() if x.startswith("error:")]
    assert f"run {run_id} with the same settings was started by process {winner.pid}" in line
    assert "--resume" in line
    n, distinct = rows(db, "SELECT count(*), count(DISTINCT (run_id, dataset, sample_id)) FROM samples")[0]
    assert n == distinct == TOTAL
