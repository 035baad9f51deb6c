"""Regenerate the tables of docs/training*.md from the committed records, or check that they are.

    python scripts/training_tables.py            # rewrite every marked block from its command
    python scripts/training_tables.py --check    # exit 1 when a block differs from its command's output
    python scripts/training_tables.py --list     # the blocks and their commands

A block is written in the page as

    <!-- <name> tables: python scripts/<script>.py <args> -->
    ...the command's output, verbatim...
    <!-- end of <name> tables -->

and its command prints tables from a record under ``results/`` only (no model, no network), so the
page's numbers are the records' (``tests/rl/test_training_tables.py`` runs ``--check``). A learning
run's record (``scripts/rl_run_record.py build``, ``scripts/eval_heldout.py``) gets its block by adding
the two marker lines with its ``tables`` command, then running this script.
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("docs/training.md", "docs/training-overview.md")
BLOCK = re.compile(
    r"(?P<open><!-- (?P<name>[\w-]+) tables: python (?P<script>scripts/[\w/]+\.py)(?P<args>[^\n]*?) -->\n)"
    r"(?P<body>.*?)"
    r"(?P<close><!-- end of (?P=name) tables -->)",
    re.DOTALL,
)


@dataclass(frozen=True)
class Block:
    page: Path
    name: str
    script: str
    args: tuple[str, ...]
    body: str
    span: tuple[int, int]  # of the body in the page


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    return [
        Block(page, m["name"], m["script"], tuple(shlex.split(m["args"])), m["body"], m.span("body"))
        for m in BLOCK.finditer(text)
    ]


def render(block: Block) -> str:
    """The block's command's output (run from the repository root with this interpreter)."""
    proc = subprocess.run(
        [sys.executable, block.script, *block.args], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise SystemExit(
            f"{block.page.name}: `python {block.script} {' '.join(block.args)}` failed: {proc.stderr.strip()[-400:]}"
        )
    out = proc.stdout.strip("\n")
    return f"\n{out}\n\n" if block.body.startswith("\n") else f"{out}\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare only; exit 1 when a block differs")
    ap.add_argument("--list", action="store_true", help="print the blocks and their commands")
    ap.add_argument("pages", nargs="*", default=list(PAGES), help=f"pages (default: {' '.join(PAGES)})")
    args = ap.parse_args(argv)
    bad = 0
    for rel in args.pages:
        page = ROOT / rel
        found = blocks(page)
        if args.list:
            for b in found:
                print(f"{rel}: {b.name}: python {b.script} {' '.join(b.args)}")
            continue
        text = page.read_text()
        for b in reversed(found):  # from the end, so earlier spans stay valid
            new = render(b)
            if new.strip() != b.body.strip():
                bad += 1
                print(f"{rel}: block {b.name!r} differs from `python {b.script} {' '.join(b.args)}`")
                text = text[: b.span[0]] + new + text[b.span[1] :]
        if not args.check and text != page.read_text():
            page.write_text(text)
            print(f"{rel}: rewritten")
    if args.check and bad:
        print(f"{bad} block(s) differ: run python scripts/training_tables.py")
    return 1 if (args.check and bad) else 0


if __name__ == "__main__":
    from harness.errors import script_exit

    sys.exit(script_exit(main))
