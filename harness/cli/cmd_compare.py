"""``harness compare RUN_A RUN_B``: two runs (or two methods under one protocol), question by question."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from harness.cli import add_command
from harness.cli.options import add_db_arg, add_model_arg, add_protocol_arg

if TYPE_CHECKING:
    from harness.metrics.paired import PairedTest
    from harness.results.compare import Comparison

EXAMPLES = """\
  harness compare ircot sure --db results/showcase-2026-11-24.duckdb        # two methods, the only protocol
  harness compare ircot sure --db results/showcase-2026-11-24.duckdb --per-question changed.csv
  harness compare 20261124-0911-ircot 20261124-0905-sure --metric f1       # two run ids
  harness compare search_r1 naive_rag --protocol mini --model qwen2.5-3b-instruct
  harness compare a b --per-question changed.jsonl                         # JSON Lines instead of CSV
  harness compare direct naive_rag --datasets hotpotqa,2wikimultihopqa,musique   # the multi-hop average
"""

DESCRIPTION = """\
Compare two scorings of the same questions. RUN_A and RUN_B are evaluation run ids, or method
names whose latest complete runs under --protocol are taken (as the leaderboard takes them).
Both must be under the same protocol, on the same metric (--metric, default the protocol's
primary metric). On the questions both scored it prints, per dataset and over all of them (each
dataset weighted equally, as the papers' Avg.): the difference B - A in points with its paired
bootstrap 95% interval, the questions where each side scores higher (for 0/1 metrics: the
discordant pairs) and the two-sided p-value: exact McNemar (scipy binomtest of the discordant
counts) for 0/1 metrics; for other metrics the exact sign-flip (paired permutation) test while
at most 30 differences are non-zero, the seeded paired bootstrap above that: the same test, on the
same questions in the same order, as the leaderboard's tie marks; uncorrected. Then the questions whose
value changed; --per-question FILE writes all of them (CSV, or JSON Lines for .jsonl). The
database is opened read-only."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub,
        "compare",
        help="paired comparison of two runs or two methods (McNemar / paired bootstrap)",
        description=DESCRIPTION,
        examples=EXAMPLES,
        handler=handle,
    )
    p.add_argument("run_a", metavar="RUN_A", help="a run id, or a method name (its latest runs)")
    p.add_argument("run_b", metavar="RUN_B", help="a run id, or a method name; the difference is B - A")
    p.add_argument("--metric", default=None, help="stored metric name (default: the protocol's primary)")
    add_protocol_arg(p, default=None, help="protocol id or name for method names (default: the only one)")
    add_model_arg(p, default=None, help="the model of a method that ran with several")
    p.add_argument(
        "--datasets",
        default=None,
        help="comma-separated datasets to compare on (default: every dataset both scored)",
    )
    add_db_arg(p)
    p.add_argument(
        "--per-question", type=Path, default=None, metavar="FILE", help="write every changed question here"
    )
    p.add_argument("--show", type=int, default=20, help="changed questions printed (default 20; 0: none)")


def handle(args: argparse.Namespace) -> int:
    from harness.results.compare import compare, resolve_sides, write_per_question
    from harness.results.queries import open_results

    store = open_results(args.db)
    a, b, metric = resolve_sides(
        store, args.run_a, args.run_b, metric=args.metric, protocol=args.protocol, model=args.model
    )
    datasets = [d.strip() for d in args.datasets.split(",") if d.strip()] if args.datasets else None
    c = compare(a, b, metric, datasets)
    print(render(c, show=args.show), end="")
    if args.per_question is not None:
        write_per_question(c, args.per_question)
        print(f"wrote {args.per_question}: {len(c.changed)} changed questions")
    return 0


def _p(p: float) -> str:
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _row(name: str, t: PairedTest) -> list[str]:
    d = t.diff
    return [
        name,
        str(t.n),
        f"{100 * d.mean:+.1f} [{100 * d.lo:+.1f}, {100 * d.hi:+.1f}]",
        str(t.a_better),
        str(t.b_better),
        _p(t.p),
        "yes" if t.separated() else "no",
    ]


def render(c: Comparison, *, show: int = 20) -> str:
    """The comparison as plain text: the per-dataset and overall table, then the changed questions."""
    from harness.results.tables import fmt_value

    a, b = c.a.spec, c.b.spec
    header = ["dataset", "n", f"{b} - {a} (points) [95%]", f"{a} better", f"{b} better", "p", "p < 0.05"]
    rows = [_row(d, t) for d, t in c.per_dataset]
    if len(c.per_dataset) > 1:
        rows.append(_row("all (datasets weighted equally)", c.overall))
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(r: list[str]) -> str:
        return "  ".join(
            x.ljust(w) if i == 0 else x.rjust(w) for i, (x, w) in enumerate(zip(r, widths, strict=True))
        )

    tests = list(dict.fromkeys([*(t.test for _, t in c.per_dataset), c.overall.test]))
    test = " / ".join(tests)
    out = [
        f"{a} ({c.a.model}, {c.a.training or '?'}) vs {b} ({c.b.model}, {c.b.training or '?'}) · {c.metric} · "
        f"protocol {c.a.protocol_name} ({c.a.protocol_id})",
        f"runs: {a}: {', '.join(c.a.run_ids)}; {b}: {', '.join(c.b.run_ids)}",
        "",
        line(header),
        *(line(r) for r in rows),
        "",
        f"p: {test}, two-sided, each row on its own (not corrected for multiple comparisons); it decides."
        + (
            " The interval is the paired percentile bootstrap's, which at small n can exclude 0 where the"
            " exact test does not."
            if "paired bootstrap" not in tests
            else ""
        )
        + (f" {c.only_one} questions scored by one side only are left out." if c.only_one else ""),
        f"{len(c.changed)} questions changed ({a} better on {c.overall.a_better}, {b} on {c.overall.b_better}).",
    ]
    for r in c.changed.head(max(show, 0)).itertuples(index=False):
        q = str(r.question).replace("\n", " ")
        out.append(
            f"  {r.dataset}/{r.sample_id}: {a} {fmt_value(float(r.a_value), 2)} -> {b} "
            f"{fmt_value(float(r.b_value), 2)}  {q[:80]}"
        )
    if 0 < show < len(c.changed):
        out.append(f"  ... {len(c.changed) - show} more (--per-question FILE writes them all)")
    return "\n".join(out) + "\n"
