"""The real app in headless Chromium (Debian's chromium through Playwright), on the fixture database:
every page loads, and what issue 21 asked a reader to be able to trust is on screen."""

from __future__ import annotations

from urllib.parse import urlencode

from tests.leaderboard.browser import (
    BROWSER_MARKS,
    PAGES,
    chromium_page,
    grid_headers,
    grid_scroll_overflow,
    leaderboard_server,
    table_cells,
    wait_for_app,
)
from tests.leaderboard.fixtures import CORRECTION, MODEL, OTHER_MODEL, PROMPT

pytestmark = BROWSER_MARKS


def test_leaderboard_in_chromium(fixture_db, tmp_path):
    pid = fixture_db.protocol.protocol_id
    with leaderboard_server(fixture_db.path, tmp_path / "server.log") as url, chromium_page() as page:
        outside: list[str] = []  # self-hosted assets only: no request leaves the loopback server
        page.on(
            "request",
            lambda r: None if r.url.startswith((url, "data:", "blob:", "about:")) else outside.append(r.url),
        )
        # every page loads without an exception box
        for path, title in PAGES.items():
            page.goto(f"{url}/{path}?protocol={pid}")
            wait_for_app(page, title)
            assert page.locator('[data-testid="stException"]').count() == 0, path

        # the leaderboard: best average first; every score column on screen, nothing to scroll
        page.goto(f"{url}/?protocol={pid}")
        cells = table_cells(page)
        headers = grid_headers(page)
        assert headers[:3] == ["method", "type", "model"]  # two models: the model column is shown
        # avg single-hop is PopQA alone in this fixture: not repeated
        assert headers[3:] == ["avg all · n=12", "avg multi-hop · n=8", "PopQA · n=4", "HotpotQA · n=4",
                               "MuSiQue · n=4"]  # fmt: skip
        assert grid_scroll_overflow(page) <= 1
        cells = (
            page.locator('[data-testid="stDataFrame"]').first.locator('[role="gridcell"]').all_inner_texts()
        )
        assert [cells[i] for i in range(0, 4 * (len(cells) // 4), len(cells) // 4)] == [
            "search_r1", "naive_rag", "direct", "direct",
        ]  # fmt: skip

        # a permalink restores metric and sort
        page.goto(f"{url}/?{urlencode({'protocol': pid, 'metric': 'f1', 'sort': 'popqa'})}")
        table_cells(page)
        page.wait_for_timeout(500)
        chosen = [
            i.input_value()
            for i in page.locator('[data-testid="stMain"] [data-testid="stSelectbox"] input').all()
        ]
        assert chosen[:2] == ["F1", "PopQA · n=4"]
        rows = table_cells(page)
        models = [c for c in rows if c in (MODEL, OTHER_MODEL)]
        assert models[:2] == [MODEL, MODEL] and rows[0] == "search_r1"

        # reported vs reproduced: a count stays 2.9; the paper's seven-set average is the paper's alone
        page.goto(f"{url}/reported?{urlencode({'protocol': pid, 'paper': 'tiresrag_r1'})}")
        page.wait_for_selector("table.rar-reported:not(.rar-summary) td", timeout=60_000)
        assert (
            "2.9\n1 [0.51, 1]\nn=4 · Δ —"
            in page.locator("table.rar-reported:not(.rar-summary) td").all_inner_texts()
        )  # not comparable
        page.goto(f"{url}/reported?{urlencode({'protocol': pid, 'paper': 'search_r1'})}")
        page.wait_for_selector("table.rar-reported:not(.rar-summary) td", timeout=60_000)
        page.wait_for_timeout(500)
        cells = page.locator("table.rar-reported:not(.rar-summary) td").all_inner_texts()
        assert "40.0\n50.0 [15.0, 85.0]\nn=4 · Δ —" in cells and "35.0" in cells  # corpus, retriever differ

        # the trajectory: the prompt (collapsed until opened) and the injected correction message
        q = {"protocol": pid, "traj_a": f"search_r1 · {MODEL}", "traj_dataset": "hotpotqa", "q": "hotpotqa-0"}
        page.goto(f"{url}/trajectories?{urlencode(q)}")
        wait_for_app(page, "Trajectory explorer")
        page.get_by_text("prompt of turn 0 · generation · stored").first.click()
        page.get_by_text(PROMPT[:40]).first.wait_for(state="visible", timeout=30_000)
        correction = CORRECTION.strip().split(". ")[0]
        page.get_by_text(correction).first.wait_for(state="visible", timeout=30_000)
        page.screenshot(path=str(tmp_path / "trajectory.png"), full_page=True)
        assert outside == []  # e.g. a Material-icon favicon would be fetched from fonts.gstatic.com
    assert (tmp_path / "trajectory.png").stat().st_size > 10_000
