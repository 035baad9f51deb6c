"""``harness eval-retrieval``: recall of gold passages at k, per dataset, for several retrievers."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from harness.cli import add_command
from harness.cli.options import add_corpus_arg, add_db_arg, add_device_arg
from harness.cli.retrieval_options import setup_logging
from harness.retrieval.encoder import set_encoder_device

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from harness.retrieval.evaluate import Evaluated, RecallAtK

EXAMPLES = """\
  harness eval-retrieval                                      # bm25s on mini-multihop, k = 1,3,5
  harness eval-retrieval --bench mini-multihop --retrievers bm25s,pyserini,dense,hybrid --k 1,3,5
  harness eval-retrieval --bench mini --retrievers bm25s --k 1,5,10 --limit 100 --db /tmp/r.duckdb
  harness eval-retrieval --retriever-url http://127.0.0.1:8000/retrieve     # a retrieval server
  harness eval-retrieval --retriever-url http://127.0.0.1:8000/retrieve --retrievers bm25s   # both
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub,
        "eval-retrieval",
        help="recall@k of gold passages per dataset for one or more retrievers (stored in DuckDB)",
        examples=EXAMPLES,
        handler=_run,
    )
    add_device_arg(p, what="the dense encoder")
    p.add_argument("--bench", default="mini-multihop", help="bench name (default mini-multihop)")
    p.add_argument(
        "--retrievers",
        default=None,
        help="comma-separated: bm25s, pyserini, dense, dense-hnsw, hybrid "
        "(default bm25s, or none with --retriever-url)",
    )
    p.add_argument("--k", default="1,3,5", help="comma-separated cut-offs (default 1,3,5)")
    p.add_argument("--limit", type=int, default=None, help="first N questions of each dataset")
    add_corpus_arg(p, help="corpus file (default: packaged closed corpus)")
    add_db_arg(p, default=None, help="DuckDB file (default results/harness.duckdb)")
    p.add_argument("--no-store", action="store_true", help="print only; do not write to the database")
    p.add_argument(
        "--retriever-url",
        default=None,
        metavar="URL",
        help="also evaluate a Search-R1-compatible server (POST /retrieve), as retriever 'remote' "
        "('remote-unverified' when it does not describe its corpus and index in GET /health)",
    )


def _run(args: argparse.Namespace) -> int:
    set_encoder_device(args.device)
    from rich.console import Console

    from harness.cli.retrieval_options import parse_ks
    from harness.data.benches import Selection, get_bench, load_bench
    from harness.errors import ConfigError
    from harness.retrieval.evaluate import evaluate_retrievers, retrievers_to_evaluate
    from harness.retrieval.factory import parse_spec

    setup_logging()
    ks = parse_ks(args.k)
    default = "" if args.retriever_url else "bm25s"
    names = [n.strip() for n in (args.retrievers or default).split(",") if n.strip()]
    if not names and not args.retriever_url:
        raise ConfigError("--retrievers is empty")
    if args.limit is not None and args.limit < 1:
        raise ConfigError("--limit must be >= 1")
    specs = [(n, parse_spec(n)) for n in names]  # fail on a typo before any index is built
    bench = get_bench(args.bench)
    selection = Selection(mode="first", n=args.limit) if args.limit else Selection()
    entries = load_bench(bench, selection)
    out = Console()

    def say(line: str) -> None:
        out.print(f"[dim]{line}[/dim]")

    todo, corpus = retrievers_to_evaluate(specs, args.corpus, args.retriever_url, say=say)
    datasets = [(e.dataset, examples) for e, examples in entries]
    results = evaluate_retrievers(todo, datasets, ks, say=say)
    shown = corpus.spec if corpus is not None else todo[0].corpus
    title = (
        f"recall of gold passages @k: bench {bench.name}, corpus {shown.id} ({shown.n_passages:,} passages)"
    )
    out.print(
        recall_table([r.row for r in results], [d for d, _ in datasets], [c.name for c in todo], ks, title)
    )
    if not args.no_store:
        _store(args.db, bench.name, results, out)
    return 0


def recall_table(
    rows: list[RecallAtK], datasets: list[str], names: list[str], ks: list[int], title: str
) -> Table:
    """The recall table: a section per dataset (and ``all (micro)`` over several: each dataset
    weighted by its questions), a line per retriever, a column per k."""
    from rich.table import Table

    from harness.retrieval.evaluate import micro_recall

    table = Table(title=title)
    table.add_column("dataset", no_wrap=True)
    table.add_column("retriever", no_wrap=True)
    table.add_column("n", justify="right", no_wrap=True)
    for k in ks:
        table.add_column(f"@{k}", justify="right", no_wrap=True)
    by_key = {(row.dataset, row.retriever, row.k): row for row in rows}
    sections = [*datasets, "all (micro)"] if len(datasets) > 1 else datasets
    for si, ds in enumerate(sections):
        for ni, nm in enumerate(names):
            if ds == "all (micro)":
                pooled = {k: micro_recall([by_key[(d, nm, k)] for d in datasets]) for k in ks}
                n = pooled[ks[0]][0]
                cells = [f"{pooled[k][1]:.3f}" if n else "-" for k in ks]
            else:
                n = by_key[(ds, nm, ks[0])].n
                cells = [_cell(by_key[(ds, nm, k)].recall) if n else "-" for k in ks]
            end_section = ni == len(names) - 1 and si < len(sections) - 1
            table.add_row(ds if ni == 0 else "", nm, str(n), *cells, end_section=end_section)
    return table


def _store(db: Path | None, bench: str, results: list[Evaluated], out: Console) -> None:
    """Store the computable rows (a NaN recall, unmapped remote hits, never is) in ``db``'s
    ``retrieval_evals`` table."""
    from harness.results.store import DEFAULT_DB, RetrievalEvalRow, Store
    from harness.retrieval.base import spec_json

    db = db or DEFAULT_DB
    store_rows = [
        RetrievalEvalRow(
            bench=bench,
            dataset=r.row.dataset,
            retriever=r.row.retriever,
            retriever_spec=spec_json(r.spec),
            corpus_id=r.corpus.id,
            corpus_hash=r.corpus.content_hash,
            k=r.row.k,
            recall=r.row.recall,
            n=r.row.n,
            seconds=r.row.seconds,
        )
        for r in results
        if r.row.recall == r.row.recall  # NaN: not computable (unmapped remote hits), never stored
    ]
    Store(db).add_retrieval_evals(store_rows)
    out.print(f"[dim]{len(store_rows)} rows stored in {db} (table retrieval_evals)[/dim]")


def _cell(recall: float) -> str:
    """A recall, or "n/a" when it is not computable (a remote server's passages mapped to no corpus id)."""
    return "n/a" if recall != recall else f"{recall:.3f}"
