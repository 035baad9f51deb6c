"""The reported view in headless Chromium over the committed showcase database (opened read-only:
the file stays byte-identical): the cross-paper summary comes first, and no table whose caption
says the protocol differs shows a difference (Δ)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from urllib.parse import urlencode

import pytest

from tests.leaderboard.browser import BROWSER_MARKS, chromium_page, leaderboard_server, wait_for_app

SHOWCASE = Path(__file__).resolve().parents[2] / "results" / "showcase-2026-11-24.duckdb"

pytestmark = [
    *BROWSER_MARKS,
    pytest.mark.skipif(not SHOWCASE.is_file(), reason=f"{SHOWCASE} is not in this checkout"),
]


def test_reported_view_opens_on_the_summary_and_shows_no_difference_where_the_protocol_differs(tmp_path):
    before = hashlib.sha256(SHOWCASE.read_bytes()).hexdigest()
    with leaderboard_server(SHOWCASE, tmp_path / "server.log") as url, chromium_page(1600, 1000) as page:
        page.goto(f"{url}/reported?{urlencode({'paper': 'search_r1'})}")
        wait_for_app(page, "Reported vs reproduced")
        page.wait_for_selector("table.rar-summary td", timeout=60_000)
        page.wait_for_selector("table.rar-reported:not(.rar-summary) td", timeout=60_000)
        # the summary is the first table on the page, above every paper table
        first = page.locator("table.rar-reported").first
        assert "rar-summary" in (first.get_attribute("class") or "")
        summary = page.locator("table.rar-summary tbody tr td:first-child").all_inner_texts()
        assert summary == ["arena", "eval_rar", "r_search", "search_r1", "tiresrag_r1", "when_to_search"]
        heading = page.get_by_text("Across the papers", exact=True).first.bounding_box()
        table2 = page.locator("table.rar-reported:not(.rar-summary)").first.bounding_box()
        assert heading["y"] < table2["y"]
        # the showcase ran mini (closed corpus, bm25s): every Search-R1 table says the protocol differs,
        # and no cell carries a difference
        captions = page.locator('[data-testid="stCaptionContainer"]').all_inner_texts()
        assert any("protocol differs: corpus wiki18 vs closed" in c for c in captions)
        assert page.locator("table.rar-reported span.delta").count() == 0
        metas = [m for m in page.locator("table.rar-reported span.meta").all_inner_texts() if "Δ" in m]
        assert metas and all(m.endswith("Δ —") for m in metas)
        # our number once per method and model of ours: a later paper row of the method refers to it
        assert page.get_by_text("ours as above").count() > 0
        assert "not comparable: corpus, retriever" in page.locator("table.rar-reported").nth(1).inner_text()
    assert hashlib.sha256(SHOWCASE.read_bytes()).hexdigest() == before
