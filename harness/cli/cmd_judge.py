"""``harness judge``: LLM-judge scores for stored predictions, and where the judge and EM disagree."""

from __future__ import annotations

import argparse
import sys

from harness.cli import add_command
from harness.cli.judge_options import add_judge_args
from harness.cli.options import add_db_arg

EXAMPLES = """\
  harness serve-model &                                   # a local judge on http://127.0.0.1:8765/v1
  harness judge --run direct-20250101-120000-ab12cd --judge-url http://127.0.0.1:8765/v1 --judge-model smollm2
  harness judge --method direct,search_r1 --bench mini-multihop --judge-url http://127.0.0.1:8765/v1 \\
      --judge-model smollm2 --judge-prompt when_to_search
  OPENAI_API_KEY=... harness judge --method search_r1 --bench multihop \\
      --judge-url https://api.openai.com/v1 --judge-model gpt-4o-mini --judge-prompt r1_searcher --judge-rpm 500
  harness judge --run RUN --judge-backend llamacpp --judge-model default      # in-process, no server
  harness judge --list-prompts
  # the packaged 135M model makes the plumbing run on a laptop, but it is no judge (it says YES to
  # almost anything): report judge numbers from a strong model (e.g. Qwen2.5-72B via vllm serve, gpt-4o)
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub,
        "judge",
        help="add LLM-judge scores to stored predictions (cached; agreement with EM and cover-EM)",
        description=(
            "Judge the stored predictions of runs with an LLM (an OpenAI-compatible server or an "
            "in-process backend). Verdicts are cached in the results database and never asked twice; "
            "scores land in sample_metrics as judge@<model>:<prompt-hash>. Replies that cannot be "
            "parsed, and failed requests, are counted by status, never scored."
        ),
        examples=EXAMPLES,
        handler=handle,
    )
    p.add_argument("--run", action="append", default=[], help="run id to judge (repeatable)")
    p.add_argument("--method", default=None, help="with --bench: the newest run of each method (comma list)")
    p.add_argument("--bench", default=None, help="with --method: the bench of the runs")
    add_db_arg(p)
    p.add_argument("--list-prompts", action="store_true", help="list the registered judge prompts and exit")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_judge_args(p)


def handle(args: argparse.Namespace) -> int:
    if args.list_prompts:
        return list_prompts()
    from harness.cli.judge_options import judge_spec_from_args, print_report, report_judge_failures
    from harness.errors import ConfigError
    from harness.judge.factory import make_judge
    from harness.judge.stored import judge_runs, resolve_runs
    from harness.results.cost import load_prices, prices_path
    from harness.results.store import Store

    spec = judge_spec_from_args(args)
    if spec is None:
        raise ConfigError("give the judge: --judge-url URL --judge-model NAME (or --judge-backend llamacpp)")
    store = Store(args.db, create=False)  # judging adds to stored runs: the file must exist
    run_ids = resolve_runs(store, run_ids=args.run, method=args.method, bench=args.bench)
    judge = make_judge(spec, store, progress=not args.no_progress)  # probes the server first
    print(
        f"judging runs {', '.join(run_ids)} with {judge.model} · prompt {judge.prompt.name} "
        f"({judge.prompt.prompt_hash})",
        file=sys.stderr,
    )
    report = judge_runs(store, run_ids, judge)
    print_report(report, price_table=load_prices(prices_path(store)))
    return report_judge_failures(report)


def list_prompts() -> int:
    from rich.console import Console
    from rich.table import Table

    from harness.judge.prompts import describe_prompts

    t = Table(title="judge prompts (metric name: judge@<model>:<hash>)")
    for h in ("id", "version", "hash", "judges", "source"):
        t.add_column(h)
    for row in describe_prompts():
        t.add_row(*row)
    Console(width=200).print(t)
    return 0
