"""docs/training.md's marked table blocks are exactly what their commands print from the committed
records (scripts/training_tables.py --check), and a changed number in a block is caught and restored
by the regeneration."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.scripts import load_script

pytestmark = pytest.mark.integration  # runs the table commands as processes

ROOT = Path(__file__).resolve().parents[2]


def _tool():
    return load_script("training_tables")  # its dataclass looks its module up


def test_every_table_block_of_the_training_pages_is_its_records_output():
    tool = _tool()
    names = {b.name for page in tool.PAGES for b in tool.blocks(ROOT / page)}
    assert {"long-run", "heldout", "learning"} <= names
    assert tool.main(["--check"]) == 0


def test_a_changed_number_is_caught_and_regenerated(tmp_path: Path):
    tool = _tool()
    page = tmp_path / "training.md"
    shutil.copy(ROOT / "docs" / "training.md", page)
    (block,) = [b for b in tool.blocks(page) if b.name == "long-run"]
    text = page.read_text()
    i = text.index("| step 20 | llamacpp | 400 | 0.552", block.span[0])
    page.write_text(text[:i] + text[i:].replace("0.552", "0.553", 1))
    assert tool.main(["--check", str(page)]) == 1
    assert tool.main([str(page)]) == 0
    assert page.read_text() == (ROOT / "docs" / "training.md").read_text()
