"""``harness eval-retrieval``: recall of gold passages at k, per dataset, for several retrievers."""

from __future__ import annotations

import argparse

from harness.cli import add_command
from harness.cli.options import add_corpus_arg, add_db_arg, add_device_arg
from harness.cli.retrieval_options import setup_logging
from harness.retrieval.encoder import set_encoder_device

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
    from rich.table import Table

    from harness.cli.retrieval_options import parse_ks
    from harness.data.benches import Selection, get_bench, load_bench
    from harness.errors import ConfigError
    from harness.retrieval.base import spec_json
    from harness.retrieval.evaluate import recall_at_ks
    from harness.retrieval.factory import as_corpus, build_retriever, parse_spec

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
    # (name, spec, corpus spec, make retriever): the corpus recorded with each row is the one searched
    todo: list = []
    corpus = None
    if specs:
        corpus = as_corpus(args.corpus, progress=True)
        for name, spec in specs:
            todo.append(
                (name, spec, corpus.spec, lambda spec=spec: build_retriever(spec, corpus, progress=True))
            )
    if args.retriever_url:
        from harness.retrieval.client import RetrievalClient
        from harness.retrieval.spec import CorpusSpec

        # hits are mapped to the corpus's passage ids (Search-R1's own server sends none, or row numbers)
        client = RetrievalClient(args.retriever_url, corpus=corpus or as_corpus(args.corpus, progress=True))
        remote_corpus = client.corpus_spec  # an unreachable server fails here, naming the URL
        name = "remote" if remote_corpus is not None else "remote-unverified"
        if remote_corpus is None:
            remote_corpus = CorpusSpec(id="unknown", content_hash="", n_passages=0)
        out.print(f"[dim]{name}: {client.shown_url} serves {client.spec.model_dump_json()}[/dim]")
        names.append(name)
        todo.append((name, client.spec, remote_corpus, lambda: client))

    results = []
    for name, spec, corpus_spec, make in todo:
        r = make()
        try:
            for entry, examples in entries:
                rows = recall_at_ks(r, entry.dataset, examples, ks, name=name)
                results.extend((spec, corpus_spec, row) for row in rows)
                skipped = rows[0].skipped
                note = f" ({skipped} without gold passages skipped)" if skipped else ""
                out.print(
                    f"[dim]{name}: {entry.dataset} {rows[0].n} questions in {rows[0].seconds:.2f} s{note}[/dim]"
                )
        finally:
            r.close()

    shown = corpus.spec if corpus is not None else todo[0][2]
    title = (
        f"recall of gold passages @k: bench {bench.name}, corpus {shown.id} ({shown.n_passages:,} passages)"
    )
    table = Table(title=title)
    table.add_column("dataset", no_wrap=True)
    table.add_column("retriever", no_wrap=True)
    table.add_column("n", justify="right", no_wrap=True)
    for k in ks:
        table.add_column(f"@{k}", justify="right", no_wrap=True)
    datasets = [e.dataset for e, _ in entries]
    by_key = {(row.dataset, row.retriever, row.k): row for _, _, row in results}
    sections = [*datasets, "all (micro)"] if len(datasets) > 1 else datasets
    for si, ds in enumerate(sections):
        for ni, nm in enumerate(names):
            if ds == "all (micro)":
                rows = {k: [by_key[(d, nm, k)] for d in datasets if by_key[(d, nm, k)].n] for k in ks}
                n = sum(r.n for r in rows[ks[0]])
                cells = [f"{sum(r.recall * r.n for r in rows[k]) / n:.3f}" if n else "-" for k in ks]
            else:
                n = by_key[(ds, nm, ks[0])].n
                cells = [_cell(by_key[(ds, nm, k)].recall) if n else "-" for k in ks]
            end_section = ni == len(names) - 1 and si < len(sections) - 1
            table.add_row(ds if ni == 0 else "", nm, str(n), *cells, end_section=end_section)
    out.print(table)

    if not args.no_store:
        from harness.results.store import DEFAULT_DB, RetrievalEvalRow, Store

        db = args.db or DEFAULT_DB
        store_rows = [
            RetrievalEvalRow(
                bench=bench.name,
                dataset=row.dataset,
                retriever=row.retriever,
                retriever_spec=spec_json(spec),
                corpus_id=corpus_spec.id,
                corpus_hash=corpus_spec.content_hash,
                k=row.k,
                recall=row.recall,
                n=row.n,
                seconds=row.seconds,
            )
            for spec, corpus_spec, row in results
            if row.recall == row.recall  # NaN: not computable (unmapped remote hits), never stored
        ]
        Store(db).add_retrieval_evals(store_rows)
        out.print(f"[dim]{len(store_rows)} rows stored in {db} (table retrieval_evals)[/dim]")
    return 0


def _cell(recall: float) -> str:
    """A recall, or "n/a" when it is not computable (a remote server's passages mapped to no corpus id)."""
    return "n/a" if recall != recall else f"{recall:.3f}"
