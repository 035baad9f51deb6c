"""Screenshots of every page of the leaderboard app over a results database (for docs/).

Starts ``harness leaderboard --db DB --no-sync`` on a free 127.0.0.1 port, opens each page in
headless Chromium (Debian's ``chromium`` driven by Playwright, flags ``--headless --no-sandbox
--disable-gpu --disable-background-networking --disable-component-update --disable-sync``), waits
until Streamlit has finished running the page, saves one PNG per page, and stops the server by its
PID. Pages that choose something (a question, a paper) take it from the URL, like a permalink::

    python scripts/screenshots.py --db results/showcase.duckdb --out docs/screenshots
    python scripts/screenshots.py --db results/showcase.duckdb --protocol 6e4f6c275573 \\
        --trajectory "search_r1 · smollm2-135m-instruct" --dataset hotpotqa --question hotpotqa-0 \\
        --paper tiresrag_r1

Needs ``playwright`` (python package) and ``chromium`` (``apt-get install -y chromium``); no
browser download, no network.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# URL path -> (file name, page title)
PAGES = {
    "": ("leaderboard", "Leaderboard"),
    "reported": ("reported", "Reported vs reproduced"),
    "cost": ("cost", "Cost and efficiency"),
    "trajectories": ("trajectories", "Trajectory explorer"),
    "training": ("training", "Training runs"),
    "glossary": ("glossary", "Metric glossary"),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_healthy(url: str, proc: subprocess.Popen, log: Path, timeout: float = 120.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            sys.exit(f"screenshots: the leaderboard exited with {proc.returncode}: {log.read_text()[-1500:]}")
        try:
            if httpx.get(f"{url}/_stcore/health", timeout=2).text == "ok":
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            sys.exit(f"screenshots: no healthy leaderboard at {url} after {timeout:.0f}s; log: {log}")
        time.sleep(0.25)


def settle(page, title: str) -> None:
    """Until the title is shown, Streamlit is idle, and charts and tables had time to draw."""
    page.get_by_role("heading", name=title).first.wait_for(state="visible", timeout=90_000)
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=90_000
    )
    page.wait_for_timeout(2500)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", type=Path, required=True, help="results database")
    ap.add_argument("--out", type=Path, default=Path("docs/screenshots"), help="directory for the PNGs")
    ap.add_argument("--protocol", default=None, help="protocol id (default: the app's first)")
    ap.add_argument("--metric", default=None, help="leaderboard metric id (default: the app's first)")
    ap.add_argument("--paper", default=None, help="paper on the reported page (default: the first)")
    ap.add_argument("--trajectory", default=None, help='trajectory page method, e.g. "search_r1 · MODEL"')
    ap.add_argument("--dataset", default=None, help="trajectory page dataset")
    ap.add_argument("--question", default=None, help="trajectory page sample id")
    ap.add_argument("--width", type=int, default=1600)
    ap.add_argument("--height", type=int, default=1000)
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    args = ap.parse_args(argv)
    if not args.db.is_file():
        sys.exit(f"screenshots: {args.db}: no results database here")
    if not Path(args.chromium).exists():
        sys.exit(
            f"screenshots: {args.chromium}: no chromium (apt-get install -y chromium, or --chromium PATH)"
        )
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="screenshots-") as tmp:
        log = Path(tmp) / "server.log"
        cmd = [
            sys.executable,
            "-m",
            "harness",
            "leaderboard",
            "--db",
            str(args.db),
            "--port",
            str(port),
            "--no-sync",
        ]
        with open(log, "w") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        try:
            wait_healthy(url, proc, log)
            with sync_playwright() as p:
                ctx = p.chromium.launch_persistent_context(
                    str(Path(tmp) / "profile"),
                    executable_path=args.chromium,
                    headless=True,
                    args=FLAGS,
                    viewport={"width": args.width, "height": args.height},
                )
                page = ctx.new_page()
                for path, (name, title) in PAGES.items():
                    q = {"protocol": args.protocol}
                    if path == "":
                        q["metric"] = args.metric
                    elif path == "reported":
                        q["paper"] = args.paper
                    elif path == "trajectories":
                        q.update(traj_a=args.trajectory, traj_dataset=args.dataset, q=args.question)
                    query = urlencode({k: v for k, v in q.items() if v})
                    page.goto(f"{url}/{path}" + (f"?{query}" if query else ""))
                    settle(page, title)
                    # Streamlit scrolls inside its main block, so a full-page shot is one viewport:
                    # grow the viewport to the content's height instead (at most 8000 px).
                    for _ in range(2):  # a taller viewport can reflow the page: measure again
                        tall = page.evaluate(
                            "() => document.querySelector('[data-testid=\"stMain\"]').scrollHeight"
                        )
                        page.set_viewport_size(
                            {"width": args.width, "height": min(max(args.height, tall), 8000)}
                        )
                        settle(page, title)
                    page.mouse.move(args.width - 5, 5)  # no hover tooltip in the picture
                    target = args.out / f"{name}.png"
                    page.screenshot(path=str(target), full_page=True)
                    page.set_viewport_size({"width": args.width, "height": args.height})
                    print(f"{target}: {title}", file=sys.stderr)
                ctx.close()
        finally:
            proc.terminate()  # harness leaderboard exec's Streamlit: this PID is the server
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=15)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
