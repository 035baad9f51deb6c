"""``harness retrieve "query"``: a quick look at what a retriever returns."""

from __future__ import annotations

import argparse

from harness.cli import add_command
from harness.cli.retrieval_options import add_retriever_args, setup_logging

EXAMPLES = """\
  harness retrieve "who wrote hamlet" --k 3                  # bm25s over the packaged closed corpus
  harness retrieve "first album of the beatles" --retriever dense --k 5
  harness retrieve "q1" "q2" --json                          # several queries, machine-readable
  harness retrieve "who wrote hamlet" --url http://127.0.0.1:8000   # ask a running serve-retriever
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub,
        "retrieve",
        help="search a corpus and print the top passages",
        examples=EXAMPLES,
        handler=_run,
    )
    p.add_argument("queries", nargs="+", metavar="QUERY", help="one or more queries")
    p.add_argument("--k", type=int, default=3, help="passages per query (default 3)")
    add_retriever_args(p)
    p.add_argument("--url", default=None, help="query a retrieval server instead of a local index")
    p.add_argument("--json", action="store_true", help="print JSON lines instead of a table")
    p.add_argument("--width", type=int, default=240, help="characters of passage text shown (default 240)")


def _run(args: argparse.Namespace) -> int:
    import json

    from rich.console import Console
    from rich.table import Table

    from harness.retrieval.factory import make_retriever

    setup_logging()
    r = make_retriever(args.url or args.retriever, args.corpus, progress=True)
    try:
        results = r.search(args.queries, args.k)
    finally:
        r.close()
    if args.json:
        for q, hits in zip(args.queries, results, strict=True):
            rows = [{"id": h.doc_id, "score": h.score, "title": h.title, "text": h.text} for h in hits]
            print(json.dumps({"query": q, "hits": rows}, ensure_ascii=False))
        return 0
    out = Console()
    for q, hits in zip(args.queries, results, strict=True):
        table = Table(title=f"{q}  [dim]({r.name}, k={args.k})[/dim]", show_lines=True, expand=True)
        table.add_column("#", justify="right", width=2)
        table.add_column("score", justify="right", width=8)
        table.add_column("id", no_wrap=True)
        table.add_column("passage", ratio=1)
        for i, h in enumerate(hits, 1):
            text = h.text if len(h.text) <= args.width else h.text[: args.width].rstrip() + " ..."
            table.add_row(str(i), f"{h.score:.4f}", h.doc_id, f"[bold]{h.title}[/bold]\n{text}")
        if not hits:
            table.add_row("", "", "", "[dim]no passage shares a term with this query[/dim]")
        out.print(table)
    return 0
