"""``harness regress``: an unchanged run passes, a run with one method's predictions corrupted fails."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from harness.cli import main
from harness.errors import ConfigError
from harness.results.regress import POOLED, Baseline, BaselineEntry, baseline_from_values, compare, markdown
from leaderboards.queries import latest_values, open_results
from tests.leaderboard import fixtures


@pytest.fixture(scope="module")
def baseline_file(fixture_db, tmp_path_factory):
    path = tmp_path_factory.mktemp("baseline") / "baseline.json"
    assert (
        main(
            [
                "regress",
                "--layers",
                "scores",
                "--update",
                "--reason",
                "test",
                "--against",
                str(path),
                "--db",
                str(fixture_db.path),
            ]
        )
        == 0
    )
    return path


def test_update_writes_per_question_values(baseline_file, fixture_db):
    b = Baseline.load(baseline_file)
    keys = {(e.method, e.protocol_id, e.dataset, e.metric) for e in b.entries}
    assert ("naive_rag", fixture_db.other_protocol.protocol_id, "hotpotqa", "em") in keys
    e = next(
        e for e in b.entries
        if (e.method, e.protocol_id, e.dataset, e.metric) == ("naive_rag", fixture_db.protocol.protocol_id, "popqa", "em")
    )  # fmt: skip
    assert e.values == {"popqa-0": 1.0, "popqa-1": 1.0, "popqa-2": 1.0, "popqa-3": 0.0}
    assert e.mean == 0.75 and e.n == 4
    assert set(b.runs) == {*fixture_db.run_ids.values(), "naive_rag-fixture-top5", "direct-fixture-qwen"}
    assert b.runs[fixture_db.run_ids["direct"]] == "fixture direct"


def test_unchanged_run_passes(baseline_file, tmp_path, capsys):
    again = fixtures.build(tmp_path / "again.duckdb", tag="-again")  # new run ids, same questions and answers
    assert (
        main(["regress", "--layers", "scores", "--against", str(baseline_file), "--db", str(again.path)]) == 0
    )
    out = capsys.readouterr()
    assert out.out.startswith(
        "| verdict | method | model | protocol | dataset | metric | n | baseline | current | delta |"
    )
    assert "FAIL" not in out.out
    assert "regress: passed" in out.err


def test_corrupted_method_fails(baseline_file, tmp_path, capsys):
    broken = fixtures.build(tmp_path / "broken.duckdb", corrupt="naive_rag", tag="-broken")
    assert (
        main(["regress", "--layers", "scores", "--against", str(baseline_file), "--db", str(broken.path)])
        == 1
    )
    out = capsys.readouterr()
    assert "regress: FAILED" in out.err
    fails = [line for line in out.out.splitlines() if line.startswith("| **FAIL**")]
    assert fails and all("| naive_rag |" in line for line in fails)
    pid = broken.protocol.protocol_id
    assert any(f"| {pid} | popqa | em |" in line for line in fails)  # 3 of 4 right -> 0: beyond noise
    assert any(f"| {pid} | {POOLED} | em |" in line for line in fails)  # 6 of 12 right -> 0
    # musique had 1 of 4 right: a drop on one question of four is within noise
    assert not any(f"| {pid} | musique | em |" in line for line in fails)


def test_missing_method_fails_with_a_clear_line(baseline_file, fixture_db):
    values = latest_values(open_results(fixture_db.path))
    without = values[values["model"] != "qwen-test"]
    comps = compare(Baseline.load(baseline_file), without)
    missing = [c for c in comps if c.failed]
    assert [(c.method, c.model, c.dataset, c.metric) for c in missing if c.metric == "em"] == [
        ("direct", "qwen-test", "popqa", "em")
    ]
    assert missing[0].detail.startswith("missing: no run of direct (qwen-test) on popqa with ")
    assert "| **FAIL** | direct | qwen-test |" in markdown(comps)


def test_changed_protocol_is_named(fixture_db):
    values = latest_values(open_results(fixture_db.path))
    base = baseline_from_values(values)
    moved = values.assign(
        protocol_id=values["protocol_id"].str.replace(fixture_db.protocol.protocol_id, "0" * 12)
    )
    failed = [c for c in compare(base, moved) if c.failed]
    assert failed
    assert "it has them under protocol 000000000000: a protocol setting changed" in failed[0].detail
    assert "rewrite the baseline with --update" in failed[0].detail


def test_missing_questions_fail(baseline_file, fixture_db):
    values = latest_values(open_results(fixture_db.path))
    fewer = values[values["sample_id"] != "popqa-3"]
    failed = [c for c in compare(Baseline.load(baseline_file), fewer) if c.failed]
    assert failed and all(c.dataset in ("popqa", POOLED) for c in failed)
    assert "lacks 1 of the baseline's 4 questions (e.g. popqa-3)" in failed[0].detail


def test_new_keys_are_listed_not_failed(fixture_db):
    values = latest_values(open_results(fixture_db.path))
    base = baseline_from_values(values[values["method"] != "search_r1"])
    comps = compare(base, values)
    assert not any(c.failed for c in comps)
    assert {c.method for c in comps if c.verdict == "new"} == {"search_r1"}


def _values(vals: list[float]) -> pd.DataFrame:
    n = len(vals)
    return pd.DataFrame(
        {
            "method": ["m"] * n, "model": ["x"] * n, "label": [""] * n, "protocol_id": ["p"] * n,
            "protocol_name": ["mini"] * n, "run_id": ["r"] * n, "dataset": ["d"] * n,
            "sample_id": [str(i) for i in range(n)], "metric": ["em"] * n, "value": vals,
        }
    )  # fmt: skip


def test_paired_verdicts():
    base = baseline_from_values(_values([1.0] * 10 + [0.0] * 10))
    [ok] = compare(base, _values([1.0] * 10 + [0.0] * 10))
    assert (ok.verdict, ok.delta, ok.detail) == ("ok", 0.0, "identical")
    [noise] = compare(base, _values([0.0] + [1.0] * 9 + [1.0] + [0.0] * 9))  # one flip each way
    assert noise.verdict == "ok" and noise.delta == 0.0
    [drop] = compare(base, _values([0.0] * 20))
    assert drop.verdict == "FAIL" and drop.delta == -0.5 and drop.diff.hi < 0
    [tolerated] = compare(base, _values([0.0] * 20), tolerance=0.6)
    assert tolerated.verdict == "ok"
    [up] = compare(base, _values([1.0] * 20))
    assert up.verdict == "improved"


def test_means_only_baseline_uses_the_tolerance():
    entry = BaselineEntry(
        method="m", model="x", protocol_id="p", protocol_name="mini", dataset="d", metric="em", n=4, mean=0.5
    )
    base = Baseline(created_at="t", tolerance=0.1, entries=[entry])
    [within] = compare(base, _values([1.0, 0.0, 0.0, 0.6]))  # mean 0.4: drop 0.1, not more
    assert within.verdict == "ok"
    [beyond] = compare(base, _values([1.0, 0.0, 0.0, 0.0]))
    assert beyond.verdict == "FAIL" and "dropped 0.2500 > tolerance 0.1" in beyond.detail
    with pytest.raises(ConfigError, match="tolerance must be >= 0"):
        compare(base, _values([1.0]), tolerance=-1)


def test_bad_baseline_files(tmp_path):
    with pytest.raises(ConfigError, match="no baseline file; create it with `harness regress --update"):
        Baseline.load(tmp_path / "none.json")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": 1}))
    with pytest.raises(ConfigError, match="not a valid baseline file"):
        Baseline.load(bad)


def _set_status(path, method: str, status: str) -> None:
    import duckdb

    with duckdb.connect(str(path)) as con:
        con.execute("UPDATE runs SET status = ? WHERE method = ?", [status, method])


def test_partial_runs_are_left_out_and_named(baseline_file, tmp_path, capsys):
    db = fixtures.build(tmp_path / "partial.duckdb", tag="-partial")  # same scores as the baseline
    _set_status(db.path, "naive_rag", "incomplete")  # e.g. a run with failed samples, or killed
    assert main(["regress", "--layers", "scores", "--against", str(baseline_file), "--db", str(db.path)]) == 1
    out = capsys.readouterr()
    assert "regress: left out 2 run(s) that did not end complete: naive_rag-fixture-partial-1, " in out.err
    fails = [line for line in out.out.splitlines() if line.startswith("| **FAIL**")]
    assert fails and all("| naive_rag |" in line for line in fails)
    assert all("it did not finish" in line for line in fails if "| all (pooled) |" not in line)
    # asked for explicitly, the partial runs are compared (here their scores are unchanged)
    assert (
        main(
            [
                "regress",
                "--layers",
                "scores",
                "--against",
                str(baseline_file),
                "--db",
                str(db.path),
                "--include-partial",
            ]
        )
        == 0
    )


def test_update_never_writes_credentials(tmp_path):
    import duckdb

    db = fixtures.build(tmp_path / "secret.duckdb", tag="-secret")
    with duckdb.connect(str(db.path)) as con:  # a file written before commands were redacted
        con.execute(
            "UPDATE runs SET command = 'harness run --base-url http://me:sk-SECRET@host/v1?api_key=sk-TWO'"
        )
    out = tmp_path / "b.json"
    assert (
        main(
            [
                "regress",
                "--layers",
                "scores",
                "--update",
                "--reason",
                "test",
                "--against",
                str(out),
                "--db",
                str(db.path),
            ]
        )
        == 0
    )
    text = out.read_text()
    assert "sk-SECRET" not in text and "sk-TWO" not in text
    assert "http://me:***@host/v1?api_key=***" in text


def test_baseline_commands_carry_no_machine_paths():
    from harness.results.regress import portable_command

    cmd = (
        "/tmp/ci-clone2/.tox/py/bin/harness run --method direct,naive_rag --bench mini --limit 3 "
        "--db /tmp/ci-clone2/.tox/regress/tmp/ci.duckdb --corpus=~/data/wiki-18.jsonl --no-progress"
    )
    assert portable_command(cmd) == (
        "harness run --method direct,naive_rag --bench mini --limit 3 --db '<path>/ci.duckdb' "
        "'--corpus=<path>/wiki-18.jsonl' --no-progress"
    )
    assert portable_command("/usr/bin/python3 -m harness run --db results/h.duckdb") == (
        "harness run --db results/h.duckdb"
    )
