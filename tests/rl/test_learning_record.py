"""docs/training.md's learning-run tables are what the committed record of the run renders: a number
edited by hand, or a record replaced without regenerating the tables, fails here. The record
itself is checked too: every checkpoint on exactly the split's held-out questions, and the
template-majority rows equal to the baseline recomputed now from the training split."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "results" / "learning-2026-11-26.json"
DOC = ROOT / "docs" / "training.md"


def test_the_documented_learning_tables_are_the_records():
    from harness.rl.learning_record import check_record, learning_tables, load_record

    record = load_record(RECORD)
    check_record(record)
    tables = learning_tables(record)
    assert tables.count("\n| ") >= 8  # the held-out table, the paired table, the RL curve
    assert tables in DOC.read_text(), (
        f"{DOC}: its tables are not `scripts/learning_record.py tables {RECORD}`"
    )


def test_the_record_holds_every_checkpoint_of_the_run():
    from harness.rl.learning_record import BASELINE, checkpoints, load_record

    labels = [c.label for c in checkpoints(load_record(RECORD))]
    assert labels[:3] == ["untrained", BASELINE, "SFT"] and labels[-1] == "SFT+RL"
