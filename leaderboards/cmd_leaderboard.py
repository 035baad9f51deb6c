"""``harness leaderboard``: the Streamlit app over a results database."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from harness.cli import add_command
from harness.cli.options import add_db_arg

EXAMPLES = """\
  harness leaderboard                                   # results/harness.duckdb on http://127.0.0.1:8501
  harness leaderboard --db runs/ci.duckdb --port 8600
  harness leaderboard --host 0.0.0.0                    # reachable from other machines
  harness leaderboard --sync                            # first write the papers' numbers and prices into --db
"""

DESCRIPTION = """\
Start the leaderboard app (Streamlit) over a DuckDB results file: the leaderboard per protocol
(score and 95% interval per cell, partial runs left out unless asked for), reported vs
reproduced numbers as the papers' own tables, cost and efficiency (Pareto) plots, a trajectory
explorer, training curves and a metric glossary; every page's choices are in its URL. The app
reads with short read-only connections, so `harness run` can keep writing to the same file, and
fetches nothing from the internet. The file is only read: it stays byte-identical (a committed
results/*.duckdb leaves `git status` clean); the papers' published numbers come from the
registered methods for every paper the file has none of. --sync first writes them into the
file's `reported` table (replacing each paper's rows) and the price table (harness.results.cost
presets + prices.json next to the file) into `prices`. See docs/leaderboard.md."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub,
        "leaderboard",
        help="start the Streamlit leaderboard over a results database",
        description=DESCRIPTION,
        examples=EXAMPLES,
        handler=handle,
    )
    add_db_arg(p)
    p.add_argument("--port", type=int, default=8501, help="port (default 8501)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    sync = p.add_mutually_exclusive_group()
    sync.add_argument(
        "--sync",
        action="store_true",
        help="first write the papers' published numbers and the price table into --db",
    )
    sync.add_argument(
        "--no-sync",
        action="store_true",
        help="open --db read-only, write nothing (the default; kept for scripts that pass it)",
    )


def app_path() -> Path:
    import leaderboards

    return Path(leaderboards.__file__).resolve().parent / "app.py"


def streamlit_command(app: Path, host: str, port: int) -> list[str]:
    """The server command (headless, no usage statistics: nothing is sent to or fetched from the
    internet; the favicon is an emoji, the fonts and icons are Streamlit's bundled ones)."""
    return [
        sys.executable, "-m", "streamlit", "run", str(app),
        "--server.headless", "true",
        "--server.address", host,
        "--server.port", str(port),
        "--browser.gatherUsageStats", "false",
        "--client.toolbarMode", "viewer",
    ]  # fmt: skip


def handle(args: argparse.Namespace) -> int:
    import importlib.util

    from harness.errors import ConfigError

    db = args.db.expanduser().resolve()
    if not db.is_file():
        raise ConfigError(f"{db}: no results database here; run `harness run ... --db {args.db}` first")
    if importlib.util.find_spec("streamlit") is None:
        raise ConfigError("the leaderboard needs Streamlit: pip install 'rar-harness[ui]'")
    if args.sync:
        from harness.results.cost import sync_prices
        from harness.results.store import Store
        from leaderboards.reported_sync import sync_reported

        papers, rows = sync_reported(db)
        sync_prices(Store(db))
        print(
            f"{db}: {rows} reported numbers from {papers} papers and the price table written", file=sys.stderr
        )
    from leaderboards import DB_ENV

    env = {**os.environ, DB_ENV: str(db)}
    print(f"leaderboard on http://{args.host}:{args.port} (results: {db}); Ctrl-C stops it", file=sys.stderr)
    sys.stderr.flush()
    cmd = streamlit_command(app_path(), args.host, args.port)
    if os.name == "posix":  # become the server: one process to stop, Ctrl-C reaches Streamlit directly
        os.execve(cmd[0], cmd, env)
    return subprocess.call(cmd, env=env)
