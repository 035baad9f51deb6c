"""``harness compare``: the paired comparison of two methods on the committed showcase database
(ircot vs sure: 7 vs 0 discordant questions, exact McNemar p = 0.016), its per-question export,
and the refusals (different protocols, unknown names). The committed file stays byte-identical."""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import duckdb
import pytest

from harness.cli import main

ROOT = Path(__file__).resolve().parents[2]
SHOWCASE = ROOT / "results" / "showcase-2026-11-24.duckdb"
IRCOT_NOT_SURE = {  # the showcase's questions ircot answers exactly and sure does not
    ("hotpotqa", "5a84c4135542994c784dda31"),
    ("hotpotqa", "5a88a1e55542997e5c09a64d"),
    ("hotpotqa", "5adcbc645542994d58a2f6b6"),
    ("popqa", "1356748"),
    ("popqa", "4285368"),
    ("popqa", "5405575"),
    ("popqa", "6312455"),
}


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _em(method: str) -> dict[tuple[str, str], float]:
    """EM per question of a method's run in the showcase, straight from the tables."""
    con = duckdb.connect(str(SHOWCASE), read_only=True)
    try:
        rows = con.execute(
            """SELECT m.dataset, m.sample_id, m.value FROM sample_metrics m JOIN runs r USING (run_id)
               WHERE r.method = ? AND m.metric = 'em'""",
            [method],
        ).fetchall()
    finally:
        con.close()
    return {(d, s): v for d, s, v in rows}


def test_compare_prints_the_discordant_counts_and_exports_the_changed_questions(tmp_path, capsys) -> None:
    before = _sha(SHOWCASE)
    out = tmp_path / "changed.csv"
    assert main(["compare", "ircot", "sure", "--db", str(SHOWCASE), "--per-question", str(out)]) == 0
    text = capsys.readouterr().out
    overall = next(line for line in text.splitlines() if line.startswith("all (datasets weighted equally)"))
    assert overall.split()[4:] == ["40", "-17.5", "[-30.0,", "-7.5]", "7", "0", "0.016", "yes"]
    assert "p: exact McNemar, two-sided" in text and "not corrected for multiple comparisons" in text
    assert "bootstrap" in text  # the interval says which method it is
    with out.open() as f:
        rows = list(csv.DictReader(f))
    assert {(r["dataset"], r["sample_id"]) for r in rows} == IRCOT_NOT_SURE
    ircot, sure = _em("ircot"), _em("sure")
    changed = {k for k in ircot if ircot[k] != sure[k]}
    assert changed == IRCOT_NOT_SURE  # recomputed from the tables: exactly these 7
    assert all((r["a"], r["b"], r["a_value"], r["b_value"]) == ("ircot", "sure", "1.0", "0.0") for r in rows)
    assert _sha(SHOWCASE) == before  # read-only


def test_compare_second_pair_and_jsonl(tmp_path, capsys) -> None:
    out = tmp_path / "changed.jsonl"
    assert main(["compare", "search_o1", "ircot", "--db", str(SHOWCASE), "--per-question", str(out)]) == 0
    overall = next(
        line for line in capsys.readouterr().out.splitlines() if line.startswith("all (datasets weighted")
    )
    # search_o1 better on 1 question, ircot on 9: p = 2 * 11 / 1024
    assert overall.split()[-4:] == ["1", "9", "0.021", "yes"]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 10 and {r["a"] for r in rows} == {"search_o1"}


def test_compare_by_run_id_equals_by_method(capsys) -> None:
    con = duckdb.connect(str(SHOWCASE), read_only=True)
    try:
        (run_a,), (run_b,) = con.execute(
            "SELECT run_id FROM runs WHERE method IN ('ircot', 'sure') ORDER BY method"
        ).fetchall()
    finally:
        con.close()
    assert main(["compare", run_a, run_b, "--db", str(SHOWCASE), "--show", "0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert next(x for x in lines if x.startswith("all (")).split()[-4:] == ["7", "0", "0.016", "yes"]


def test_compare_refuses_runs_under_different_protocols(tmp_path, capsys) -> None:
    db = tmp_path / "two.duckdb"
    db.write_bytes(SHOWCASE.read_bytes())
    con = duckdb.connect(str(db))
    try:
        con.execute("UPDATE runs SET protocol_id = 'otherprotocol' WHERE method = 'sure'")
        (run_a,), (run_b,) = con.execute(
            "SELECT run_id FROM runs WHERE method IN ('ircot', 'sure') ORDER BY method"
        ).fetchall()
    finally:
        con.close()
    assert main(["compare", run_a, run_b, "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "not comparable: protocol a3f10dd19191 vs otherprotocol" in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ircot", "nosuch"], "'nosuch' is neither an evaluation run id"),
        (["ircot", "ircot"], "RUN_A and RUN_B are the same"),
        (["ircot", "sure", "--metric", "nosuch"], "no values of metric 'nosuch'"),
    ],
)
def test_compare_errors_are_one_line(args, message, capsys) -> None:
    assert main(["compare", *args, "--db", str(SHOWCASE)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_compare_help_has_examples(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    assert "harness compare ircot sure" in capsys.readouterr().out
