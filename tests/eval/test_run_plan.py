"""A safe first run (harness/eval/plan.py, harness/cli/cmd_run.py): `harness run` with no --method
refuses in one line outside a terminal and writes nothing; a method whose protocol cannot fit the
backend's context is refused before the results file is opened; the plan's lines and estimates."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.cli import main
from harness.errors import ConfigError
from harness.eval import plan
from harness.eval.plan import Cost, MethodPlan, confirm, describe, format_duration


def _listing(folder: Path) -> list[tuple[str, int]]:
    return sorted((str(p.relative_to(folder)), p.stat().st_size) for p in folder.rglob("*"))


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A working directory of its own: `harness run` without --db writes under ./results."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(plan, "interactive", lambda: False)  # as in CI, whatever runs pytest
    return tmp_path


def test_no_method_outside_a_terminal_is_one_line_and_writes_nothing(workdir, capsys):
    before = _listing(workdir)
    assert main(["run"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err  # one line: no plan, no notes
    assert err.startswith("error: no --method given: this runs all ") and "pass --yes" in err
    assert "nothing was written" in err
    assert _listing(workdir) == before == []


def test_a_protocol_that_cannot_fit_the_context_is_refused_before_the_store(workdir, capsys):
    db = workdir / "r.duckdb"
    before = _listing(workdir)
    argv = ["run", "--method", "search_o1_released", "--bench", "mini-multihop", "--db", str(db)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "max_new_tokens=8192" in err and "4096-token context" in err
    assert not db.exists() and _listing(workdir) == before


def test_method_all_skips_the_method_that_cannot_fit_with_the_reason(workdir, capsys, monkeypatch):
    # stop right after the plan: what matters is that nothing refuses before it
    monkeypatch.setattr(plan, "confirm", lambda *a, **k: (_ for _ in ()).throw(ConfigError("stop here")))
    db = workdir / "r.duckdb"
    assert main(["run", "--method", "all", "--limit", "1", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.splitlines()[0].startswith("plan: bench mini-multihop; model smollm2-135m-instruct (llamacpp)")
    assert "  direct " in err and "3 questions (hotpotqa 1, 2wikimultihopqa 1, musique 1)" in err
    assert "its own protocol: a separate run" in err  # arena
    assert err.rstrip().endswith("error: stop here") and not db.exists()


RUNS = [
    MethodPlan("direct", "mini", "c8d41debe210", (("hotpotqa", 600), ("musique", 400))),
    MethodPlan("search_r1", "mini", "c8d41debe210", (("hotpotqa", 600), ("musique", 400))),
]


def test_the_plan_estimates_from_recorded_costs_and_says_which_it_lacks():
    lines = describe(
        RUNS, {"direct": Cost(llm_calls=1.0, seconds=0.6, samples=40)}, "note", head="plan", asked="mini"
    )
    assert lines[0] == "plan"
    assert lines[1].endswith("1,000 questions (hotpotqa 600, musique 400); ~1,000 LLM calls, ~10 min")
    assert lines[2].endswith("no recorded cost")
    assert (
        lines[3]
        == "total: 2 run(s), 2,000 questions; ~1,000 LLM calls, ~10 min for the 1 with a recorded cost"
    )
    assert lines[4] == "note"


def test_durations_read_in_the_unit_a_person_would_use():
    assert [format_duration(s) for s in (42, 600, 7200, 3 * 86400)] == ["42 s", "10 min", "2.0 h", "3.0 days"]


def test_confirmation_rules(monkeypatch):
    small = [MethodPlan("direct", "mini", "x", (("hotpotqa", 5),))]
    big = [MethodPlan("direct", "mini", "x", (("hotpotqa", plan.CONFIRM_ABOVE + 1),))]
    monkeypatch.setattr(plan, "interactive", lambda: False)
    confirm(small, method_given=True, yes=False, example="e")  # named methods: no question
    confirm(big, method_given=True, yes=False, example="e")  # a script above the threshold runs
    confirm(small, method_given=False, yes=True, example="e")
    with pytest.raises(ConfigError, match="no --method given.*pass --yes to run it, or choose, e.g. e"):
        confirm(small, method_given=False, yes=False, example="e")
    monkeypatch.setattr(plan, "interactive", lambda: True)
    r, w = os.pipe()
    os.write(w, b"n\n")
    os.close(w)
    with open(r) as answer:
        monkeypatch.setattr("sys.stdin", answer)
        with pytest.raises(ConfigError, match="not started; nothing was written"):
            confirm(big, method_given=True, yes=False, example="e")
