"""The showcase tables in docs/showcase.md are what ``harness export`` writes from
the committed showcase databases: a number edited by hand, or a database replaced without
regenerating the tables, fails here."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.cli import main

ROOT = Path(__file__).resolve().parents[2]
TABLES = {  # database -> the documents that print its table
    "results/showcase-2026-11-24.duckdb": ["docs/showcase.md"],
    "results/showcase50-2026-11-24.duckdb": ["docs/showcase.md"],
}


@pytest.mark.parametrize("db", sorted(TABLES))
def test_the_documented_showcase_tables_are_the_databases_export(db, tmp_path, capsys):
    copy = tmp_path / "showcase.duckdb"  # the export reads a copy: the committed file stays as is
    shutil.copyfile(ROOT / db, copy)
    assert main(["export", "--format", "markdown", "--intervals", "--db", str(copy)]) == 0
    table = capsys.readouterr().out.strip()
    assert table.count("\n| ") >= 4 and "[" in table  # a table with rows and intervals
    for doc in TABLES[db]:
        assert table in (ROOT / doc).read_text(), f"{doc}: its table is not `harness export` of {db}"
