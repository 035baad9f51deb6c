"""The real app in headless Chromium: the server starts, the leaderboard table shows the methods."""

from __future__ import annotations

import importlib.util

import pytest

from tests.leaderboard.browser import chromium_page, chromium_path, leaderboard_server, table_cells
from tests.leaderboard.fixtures import MODEL, OTHER_MODEL

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        importlib.util.find_spec("playwright") is None,
        reason="playwright is not installed (pip install playwright)",
    ),
    pytest.mark.skipif(
        importlib.util.find_spec("streamlit") is None, reason="streamlit is not installed (the ui extra)"
    ),
    pytest.mark.skipif(
        chromium_path() is None, reason="chromium is not installed (apt-get install -y chromium)"
    ),
]


def test_leaderboard_in_chromium(fixture_db, tmp_path):
    with leaderboard_server(fixture_db.path, tmp_path / "server.log") as url, chromium_page() as page:
        page.goto(f"{url}/?protocol={fixture_db.protocol.protocol_id}")
        cells = table_cells(page)
        headers = page.locator('[data-testid="stDataFrame"] [role="columnheader"]').all_inner_texts()
        assert headers[:4] == ["method", "label", "model", "avg all"]
        # four rows of (method, label, model), best average first
        rows = [cells[i : i + 3] for i in range(0, len(cells), len(cells) // 4)]
        assert [r[:3] for r in rows] == [
            ["search_r1", "untrained policy", MODEL],
            ["naive_rag", "", MODEL],
            ["direct", "", MODEL],
            ["direct", "", OTHER_MODEL],
        ]
        assert page.get_by_text("Protocol", exact=True).count() >= 1
        page.screenshot(path=str(tmp_path / "leaderboard.png"), full_page=True)
    assert (tmp_path / "leaderboard.png").stat().st_size > 10_000
