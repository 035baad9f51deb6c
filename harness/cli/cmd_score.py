"""``harness score FILE``: score any predictions file with the harness metrics."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from harness.cli import add_command

if TYPE_CHECKING:
    from harness.eval.predictions import ScoreReport

EXAMPLES = """\
  harness score predictions.jsonl                       # em, f1, cover_em, cover_em_tokens with 95% CIs
  harness score out/intermediate_data.json              # FlashRAG's output format
  harness score preds.jsonl --metrics em,f1,f1_squad    # choose metrics (harness list metrics)
  harness score preds.jsonl --metrics em,retrieval_recall@3,evidence_recall   # needs retrieved_ids, gold_ids
  harness score preds.jsonl --per-sample scored.jsonl   # one JSON line per input line, every metric
  harness score preds.jsonl --json                      # machine-readable aggregates
"""

DESCRIPTION = """\
Score a predictions file with the harness metrics and print each metric's mean with a 95%
percentile-bootstrap interval and n.

Input: JSON Lines with `id` and/or `question`, `prediction` (or `pred`), and `golden_answers`
(or `answers`, a non-empty list of strings); or FlashRAG's intermediate_data.json (a JSON array of
items with `golden_answers` and `output.pred`). Every row is checked before anything is written;
a bad row is reported with its file and line."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub,
        "score",
        help="score a predictions file (jsonl or FlashRAG json) with our metrics",
        description=DESCRIPTION,
        examples=EXAMPLES,
        handler=run,
    )
    p.add_argument("file", metavar="FILE", help="predictions: .jsonl, or a JSON array (FlashRAG)")
    p.add_argument(
        "--metrics",
        default=None,
        help="comma-separated metric names (default: em,f1,cover_em,cover_em_tokens)",
    )
    p.add_argument("--per-sample", metavar="OUT.jsonl", default=None, help="write per-sample metrics here")
    p.add_argument("--json", action="store_true", help="print a JSON object instead of a table")
    p.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")


def run(args: argparse.Namespace) -> int:
    from harness.errors import ConfigError
    from harness.eval.predictions import score_file
    from harness.metrics.registry import DEFAULT_METRICS, parse_metric_list

    names = DEFAULT_METRICS if args.metrics is None else parse_metric_list(args.metrics)
    if args.resamples < 1:
        raise ConfigError(f"--resamples must be at least 1, got {args.resamples}")
    if args.per_sample:  # a folder given here was an IsADirectoryError traceback after scoring (issue 61)
        from pathlib import Path

        from harness.cli.options import output_file

        output_file(Path(args.per_sample), flag="--per-sample", suffix=".jsonl")
    report = score_file(
        args.file, names, per_sample=args.per_sample, n_resamples=args.resamples, seed=args.seed
    )
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        _print_table(report)
    if args.per_sample:
        print(f"per-sample metrics: {args.per_sample} ({report.n} lines)", file=sys.stderr)
    return 0


def _print_table(report: ScoreReport) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{report.path}  (n={report.n})", title_justify="left")
    table.add_column("metric")
    table.add_column("version", justify="right")
    table.add_column("mean ×100", justify="right")
    table.add_column(f"{1 - report.alpha:.0%} CI ×100", justify="right")
    table.add_column("n", justify="right")
    for m in report.metrics:
        a = report.aggregates[m.name]
        table.add_row(
            m.name, m.version, f"{100 * a.mean:.2f}", f"[{100 * a.lo:.2f}, {100 * a.hi:.2f}]", str(a.n)
        )
    table.caption = f"percentile bootstrap, {report.n_resamples} resamples, seed {report.seed}"
    Console().print(table)
