"""Issue 59's reading checks in headless Chromium over copies of the committed showcase databases:
the reported tables fit a 1,360 px window (no table wider than its frame), the reported view opens
on a table that has a number of ours, and the leaderboard's tie marks survive turning the
intervals off."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.leaderboard.browser import (
    BROWSER_MARKS,
    chromium_page,
    leaderboard_server,
    table_cells,
    wait_for_app,
)

ROOT = Path(__file__).resolve().parents[2]
SHOWCASE = ROOT / "results" / "showcase-2026-11-24.duckdb"
SHOWCASE50 = ROOT / "results" / "showcase50-2026-11-24.duckdb"

pytestmark = [
    *BROWSER_MARKS,
    pytest.mark.skipif(not SHOWCASE50.is_file(), reason=f"{SHOWCASE50} is not in this checkout"),
]


def _ties(page) -> list[str]:
    cells = table_cells(page)
    return sorted(c for c in cells if c.strip().endswith("≈"))


def test_reported_tables_fit_and_open_on_ours_and_ties_survive_the_interval_toggle(tmp_path):
    db = tmp_path / "showcase.duckdb"
    shutil.copyfile(SHOWCASE, db)
    with leaderboard_server(db, tmp_path / "server.log") as url, chromium_page(1360, 1000) as page:
        page.goto(f"{url}/reported?paper=search_r1")
        wait_for_app(page, "Reported vs reproduced")
        page.wait_for_selector("table.rar-reported:not(.rar-summary) td", timeout=90_000)
        tables = page.locator("table.rar-reported").all()
        assert len(tables) > 1
        for t in tables:  # every table fits its frame: nothing cut off at 1,360 px
            assert t.evaluate("e => e.scrollWidth <= e.parentElement.clientWidth + 1")
            box = t.bounding_box()
            assert box["x"] + box["width"] <= 1360

        page.goto(url)
        wait_for_app(page, "Leaderboard")
        with_ci = _ties(page)
        assert with_ci and all("[" in c for c in with_ci)
        page.goto(f"{url}/?show_ci=0")
        wait_for_app(page, "Leaderboard")
        without = _ties(page)
        assert [c.split(" ")[0] for c in without] == [c.split(" ")[0] for c in with_ci]  # the same marks

    db50 = tmp_path / "showcase50.duckdb"
    shutil.copyfile(SHOWCASE50, db50)
    with leaderboard_server(db50, tmp_path / "server50.log") as url, chromium_page(1600, 1000) as page:
        page.goto(f"{url}/reported")
        wait_for_app(page, "Reported vs reproduced")
        page.wait_for_selector("table.rar-reported:not(.rar-summary) td", timeout=90_000)
        first = page.locator("table.rar-reported:not(.rar-summary)").first
        assert first.locator("span.ours").count() > 0  # it used to open on 24 tables without one
