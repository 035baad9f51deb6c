"""Drive the real leaderboard in headless Chromium (Debian's ``chromium`` through Playwright).

``leaderboard_server`` starts ``harness leaderboard`` on a free 127.0.0.1 port and stops it by its
PID; ``chromium_page`` opens a fresh browser profile with the flags this machine's closed network
needs. Also used to take ``docs/leaderboard.png``::

    python -c "from tests.leaderboard.browser import screenshot; screenshot('r.duckdb', 'docs/leaderboard.png')"
"""

from __future__ import annotations

import importlib.util
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TABLE_CELLS = '[data-testid="stDataFrame"] [role="gridcell"]'
HEADER_CELLS = '[data-testid="stDataFrame"] [role="columnheader"]'
PAGES: dict[str, str] = {
    "": "Leaderboard",
    "reported": "Reported vs reproduced",
    "cost": "Cost and efficiency",
    "trajectories": "Trajectory explorer",
    "training": "Training runs",
    "glossary": "Metric glossary",
}
"""The app's pages: URL path -> title."""


def chromium_path() -> str | None:
    return shutil.which("chromium") or (
        str(Path("/usr/bin/chromium")) if Path("/usr/bin/chromium").exists() else None
    )


BROWSER_MARKS = [
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
"""A browser test module's ``pytestmark``: integration, skipped without Playwright, Streamlit or
Chromium."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def leaderboard_server(db: Path, log: Path, *, sync: bool = False, timeout: float = 90.0) -> Iterator[str]:
    """``harness leaderboard --db db`` on a free port; yields its URL once ``/_stcore/health`` is ok."""
    import httpx

    port = free_port()
    cmd = [sys.executable, "-m", "harness", "leaderboard", "--db", str(db), "--port", str(port)]
    if not sync:
        cmd.append("--no-sync")
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"the leaderboard server exited with {proc.returncode}: {log.read_text()[-2000:]}"
                )
            try:
                if httpx.get(f"{url}/_stcore/health", timeout=2).text == "ok":
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"no healthy leaderboard at {url} after {timeout:.0f}s: {log.read_text()[-2000:]}"
                )
            time.sleep(0.25)
        yield url
    finally:
        proc.terminate()  # harness leaderboard exec's Streamlit: this PID is the server
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


@contextmanager
def chromium_page(width: int = 1600, height: int = 1000) -> Iterator[object]:
    """A page of a fresh headless Chromium profile (Playwright ``Page``)."""
    from playwright.sync_api import sync_playwright

    exe = chromium_path()
    if exe is None:
        raise RuntimeError("chromium is not installed (apt-get install -y chromium)")
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile, sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(
            profile,
            executable_path=exe,
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": width, "height": height},
        )
        try:
            yield ctx.new_page()
        finally:
            ctx.close()


def table_cells(page, timeout_ms: float = 60_000) -> list[str]:
    """The leaderboard table's cell texts (the grid's accessibility table; visible columns)."""
    page.wait_for_selector(TABLE_CELLS, state="attached", timeout=timeout_ms)
    return page.locator(TABLE_CELLS).all_inner_texts()


def grid_headers(page) -> list[str]:
    """The first table's column headers currently rendered (the grid renders the visible ones)."""
    grid = page.locator('[data-testid="stDataFrame"]').first
    return [h.strip() for h in grid.locator('[role="columnheader"]').all_inner_texts()]


def grid_scroll_overflow(page, index: int = 0) -> float:
    """How many pixels the ``index``-th table is wider than its frame (0: no horizontal scroll):
    the grid's scroller's ``scrollWidth - clientWidth``."""
    grid = page.locator('[data-testid="stDataFrame"]').nth(index)
    grid.locator(".dvn-scroller").first.wait_for(state="attached", timeout=30_000)
    return float(grid.locator(".dvn-scroller").first.evaluate("e => e.scrollWidth - e.clientWidth"))


def wait_for_app(page, title: str, timeout_ms: float = 60_000) -> None:
    """Until the page's title is shown and Streamlit is no longer running the script."""
    page.get_by_role("heading", name=title).first.wait_for(state="visible", timeout=timeout_ms)
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=timeout_ms
    )


def screenshot(
    db: str | Path, out: str | Path, *, metric: str | None = None, width: int = 1900, height: int = 1000
) -> None:
    """A PNG of the leaderboard page over ``db`` (optionally after choosing a metric by its label)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with (
        tempfile.TemporaryDirectory() as tmp,
        leaderboard_server(Path(db), Path(tmp) / "server.log") as url,
        chromium_page(width, height) as page,
    ):
        page.goto(url)
        table_cells(page)
        if metric is not None:
            page.locator('[data-testid="stMain"] [data-testid="stSelectbox"]').first.click()
            page.get_by_role("option", name=metric, exact=True).click()
            page.wait_for_timeout(1500)
            table_cells(page)
            page.mouse.click(width - 40, height - 40)  # move the focus off the select box
        page.mouse.move(width - 40, height - 40)
        page.wait_for_timeout(500)
        page.screenshot(path=str(out), full_page=True)
