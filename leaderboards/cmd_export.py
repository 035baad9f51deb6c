"""``harness export``: a leaderboard view as CSV, Parquet or Markdown."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.cli import add_command
from harness.cli.options import add_db_arg, add_protocol_arg, output_file

EXAMPLES = """\
  harness export --format markdown                                  # the leaderboard (primary metric) to stdout
  harness export --format markdown --intervals --db results/showcase.duckdb   # docs/showcase.md's table
  harness export --format csv --metric f1 --out leaderboard.csv
  harness export --format parquet --view cost --protocol mini --out cost.parquet
  harness export --format markdown --view reported --protocol 69c8288e8887 --out reported.md
  harness export --format markdown --view reported --paper search_r1 --db results/showcase.duckdb   # one paper
  harness export --format latex --metric EM --protocol mini --out table.tex   # a paper table (booktabs)
  harness export --format csv --include-partial --out all.csv                  # killed runs too, marked
  harness export --format markdown --holm --db results/showcase.duckdb         # ties Holm-corrected per column
  harness export --run ircot-20261124-091134-f4b45c --samples --out outputs/    # results JSON + samples JSONL
"""

DESCRIPTION = """\
Export one view of the leaderboard app for one protocol: `leaderboard` (methods x datasets with
average columns and 95% interval bounds), `reported` (published vs measured numbers) or `cost`
(accuracy, retrievals, tokens, Pareto flags). CSV and Parquet are data: fractions, numeric
`<column>_lo` / `<column>_hi` interval columns. Markdown and LaTeX are paper tables: % with one
decimal, best in bold, readable dataset names, rows grouped by method type, ≈ (a dagger in LaTeX)
on a row that a paired test (exact McNemar for 0/1 metrics, else the paired bootstrap; each row
against the best on the questions both answered, 0.05 per pair, uncorrected unless --holm) does not
separate from the best; --intervals puts each score's 95% interval in its cell. --metric (default: the protocol's primary metric) is matched
case-insensitively (EM, em, cover-EM). Partial runs (not `complete`) are left out unless
--include-partial. --protocol takes an id or a unique name; it may be omitted when the database
holds a single protocol. The reported view works on any database: the registered papers' numbers
are read from the package when the file has none. --run ID --samples --out DIR writes, instead of a
view, the run's results JSON and one samples JSON Lines file per dataset under DIR/<model>/, as
lm-evaluation-harness's --output_path --log_samples lays them out (docs/results-files.md)."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    from leaderboards import EXPORT_FORMATS, EXPORT_VIEWS

    p = add_command(
        sub,
        "export",
        help=f"export a leaderboard view ({', '.join(EXPORT_FORMATS)})",
        description=DESCRIPTION,
        examples=EXAMPLES,
        handler=handle,
    )
    p.add_argument(
        "--format", default=None, choices=EXPORT_FORMATS, help="output format (required for a view)"
    )
    p.add_argument(
        "--run",
        action="append",
        default=None,
        metavar="ID",
        help="with --samples: the evaluation run(s) to write (repeat the flag for several)",
    )
    p.add_argument(
        "--samples",
        action="store_true",
        help="write each --run's results JSON and samples JSONL under --out DIR (not a view)",
    )
    p.add_argument(
        "--allow-empty",
        action="store_true",
        help="write a view with no rows instead of failing (by default an empty result is an error)",
    )
    p.add_argument(
        "--view", default="leaderboard", choices=EXPORT_VIEWS, help="which view (default leaderboard)"
    )
    add_protocol_arg(p, default=None, help="protocol id or name (default: the only one stored)")
    p.add_argument(
        "--metric", default=None, help="metric (default: the protocol's primary one; see the app's list)"
    )
    p.add_argument("--dataset", default=None, help="cost view: one dataset (default: all)")
    p.add_argument(
        "--paper",
        default=None,
        help="reported view: one paper's tables (e.g. search_r1; case and -/_ ignored; default: every paper)",
    )
    add_db_arg(p)
    p.add_argument("--out", type=Path, default=None, help="output file (markdown, latex: default stdout)")
    p.add_argument(
        "--include-partial",
        action="store_true",
        help="include runs that did not end complete (marked in the status column) where no complete run "
        "of the same method, model and dataset exists; a complete run is never hidden by a newer partial one",
    )
    p.add_argument(
        "--intervals",
        action="store_true",
        help="markdown, latex leaderboard: each cell is `score [lo, hi]`, its 95%% interval",
    )
    p.add_argument(
        "--holm",
        action="store_true",
        help="markdown, latex leaderboard: ties (≈) with Holm's correction across each column's rows "
        "(default: 0.05 per pair, uncorrected)",
    )


def handle(args: argparse.Namespace) -> int:
    from harness.errors import ConfigError, is_disk_full
    from leaderboards.export import build_view, write
    from leaderboards.queries import open_results

    if args.samples or args.run:
        return _write_samples(args)
    if args.format is None:
        raise ConfigError("--format is required to export a view (or pass --run ID --samples --out DIR)")
    if args.paper is not None and args.view != "reported":
        raise ConfigError(
            f"--paper {args.paper!r} applies to --view reported only (this is --view {args.view})"
        )

    view = build_view(
        open_results(args.db),
        args.view,
        protocol=args.protocol,
        metric=args.metric,
        dataset=args.dataset,
        include_partial=args.include_partial,
        intervals=args.intervals,
        paper=args.paper,
        holm=args.holm,
    )
    if view.frame.empty and not args.allow_empty:
        raise ConfigError(
            f"{view.title}: no rows (the filters match nothing stored in {args.db}); nothing written. "
            "Check --protocol, --metric, --dataset and --include-partial, or pass --allow-empty"
        )
    try:
        text = write(view, args.format, None if args.out is None else output_file(args.out))
    except OSError as e:  # a full disk, /dev/full, no permission: one line (issue 61), not a traceback
        why = "the disk is full" if is_disk_full(e) else (e.strerror or str(e))
        raise ConfigError(
            f"--out {args.out}: cannot write it ({why}); give --out somewhere writable"
        ) from None
    if text is not None:
        sys.stdout.write(text)
    else:
        print(f"wrote {args.out}: {view.title}, {len(view.frame)} rows", file=sys.stderr)
    return 0


def _write_samples(args: argparse.Namespace) -> int:
    from harness.errors import ConfigError
    from harness.results.outputs import write_run_outputs
    from leaderboards.queries import open_results

    if not (args.samples and args.run and args.out is not None):
        raise ConfigError("--samples needs --run ID (one or more) and --out DIR, and --run needs --samples")
    if args.out.exists() and not args.out.is_dir():
        raise ConfigError(f"--out {args.out}: a file; --samples writes a folder of files there")
    store = open_results(args.db)
    for run_id in args.run:
        paths = write_run_outputs(store, run_id, args.out)
        print(f"wrote {paths[0]} and {len(paths) - 1} samples files", file=sys.stderr)
    return 0
