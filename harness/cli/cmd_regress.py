"""``harness regress``: fail when a score drops beyond noise against a committed baseline."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.cli import add_command

EXAMPLES = """\
  harness run --method direct,naive_rag --bench mini-multihop --limit 3 --db /tmp/ci.duckdb --no-progress
  harness regress --against results/baseline.json --db /tmp/ci.duckdb      # exit 1 on a drop
  harness regress --against results/baseline.json --db /tmp/ci.duckdb --update   # accept the new scores
  harness regress --against old.json --db results/harness.duckdb --tolerance 0.02
"""

DESCRIPTION = """\
Compare the latest scores of every (method, model, protocol, dataset, metric) in the database with
a baseline file, print a markdown table of every comparison, and exit 1 when any fails.

With per-question values in the baseline (what --update writes), the current run is paired with
the baseline on the same questions: a score fails when the paired-bootstrap 95% interval of
(current - baseline) lies below zero and the drop exceeds the tolerance. Entries without
per-question values fail when the mean drops by more than the tolerance. A baseline entry with no
counterpart in the database (method, dataset or metric missing, or questions missing) fails.
Keys in the database that the baseline lacks are listed as `new` and do not fail.

Only runs that ended `complete` are compared (and written by --update): a killed, failed or
incomplete run (failed samples) is left out, and a baseline entry found only in such a run fails
with a detail naming it. --include-partial compares them too (their missing questions fail)."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub,
        "regress",
        help="compare the latest scores with a committed baseline (exit 1 on a drop beyond noise)",
        description=DESCRIPTION,
        examples=EXAMPLES,
        handler=handle,
    )
    p.add_argument("--against", type=Path, default=Path("results/baseline.json"), help="baseline JSON file")
    p.add_argument("--db", type=Path, default=Path("results/harness.duckdb"), help="results database")
    p.add_argument("--update", action="store_true", help="rewrite the baseline from the database")
    p.add_argument(
        "--tolerance",
        type=float,
        default=None,
        help="largest drop of a mean that never fails (default: the baseline's own, written by --update; 0)",
    )
    p.add_argument("--protocol", default=None, help="with --update: only this protocol id")
    p.add_argument("--output", type=Path, default=None, help="also write the markdown table here")
    p.add_argument(
        "--include-partial",
        action="store_true",
        help="also use runs that did not end complete (killed, failed, with failed samples)",
    )


def handle(args: argparse.Namespace) -> int:
    from harness.errors import ConfigError
    from harness.regress import Baseline, baseline_from_values, compare, markdown
    from leaderboards.queries import latest_runs, latest_values, open_results

    store = open_results(args.db)
    complete_only = not args.include_partial
    values = latest_values(store, args.protocol, complete_only=complete_only)
    partial = latest_values(store, args.protocol, complete_only=False) if complete_only else values
    left_out = sorted(set(partial["run_id"]) - set(values["run_id"]))
    if left_out:
        print(
            f"regress: left out {len(left_out)} run(s) that did not end complete: {', '.join(left_out)} "
            "(finish them with `harness run ... --resume`, or pass --include-partial)",
            file=sys.stderr,
        )
    if args.update:
        if values.empty:
            raise ConfigError(f"{args.db}: no complete evaluation runs to take a baseline from")
        runs = latest_runs(store, args.protocol, complete_only=complete_only)
        provenance = {str(r.run_id): str(r.command or "") for r in runs.itertuples()}
        baseline = baseline_from_values(values, tolerance=args.tolerance or 0.0, runs=provenance)
        baseline.save(args.against)
        keys = {(e.method, e.model, e.protocol_id) for e in baseline.entries}
        print(
            f"wrote {args.against}: {len(baseline.entries)} entries ({len(keys)} method/model/protocol, "
            f"{sum(e.n for e in baseline.entries)} values)",
            file=sys.stderr,
        )
        return 0
    baseline = Baseline.load(args.against)
    comparisons = compare(baseline, values, tolerance=args.tolerance, partial=partial)
    text = markdown(comparisons)
    print(text)
    if args.output is not None:
        args.output.write_text(text)
    failed = [c for c in comparisons if c.failed]
    counts = {v: sum(c.verdict == v for c in comparisons) for v in ("ok", "improved", "new", "FAIL")}
    summary = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    if failed:
        print(f"regress: FAILED ({summary}) against {args.against}", file=sys.stderr)
        for c in failed:
            print(
                f"  {c.method} / {c.model} / {c.protocol_id} / {c.dataset} / {c.metric}: {c.detail}",
                file=sys.stderr,
            )
        return 1
    print(f"regress: passed ({summary}) against {args.against}", file=sys.stderr)
    return 0
