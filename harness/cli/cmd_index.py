"""``harness index``: build (or check) a retrieval index over a corpus, or import a prebuilt one
(``harness index import``: a faiss index or a Lucene directory built by Search-R1 / FlashRAG)."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli import add_command
from harness.cli.options import add_device_arg
from harness.cli.retrieval_options import add_retriever_args, setup_logging
from harness.retrieval.encoder import set_encoder_device

EXAMPLES = """\
  harness index                                  # bm25s over the packaged closed corpus (seconds)
  harness index --retriever pyserini             # Lucene BM25 (needs the pyserini extra)
  harness index --retriever dense                # MiniLM + faiss Flat (10-20 min on 2 CPU cores; resumable)
  harness index --retriever hybrid               # both of the above
  harness index --corpus wiki18.jsonl.gz --retriever bm25s --force
  harness index --retriever dense --check        # load only: verify the index matches, never build
  harness index --retriever pyserini --export-row-ids searchr1-bm25   # for Search-R1's retrieval_server.py
  # a prebuilt Search-R1 / FlashRAG e5 Flat index over wiki-18 (no re-encoding; validated, then linked):
  harness index import --corpus wiki-18.jsonl --faiss-index e5_Flat.index --retriever \
      '{"kind": "dense", "encoder": {"model": "/models/e5-base-v2", "query_prefix": "query: ", "passage_prefix": "passage: "}}'
  harness index import --corpus wiki-18.jsonl --lucene-index indexes/bm25 --retriever pyserini
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub,
        "index",
        help="build a retrieval index (bm25s, pyserini, dense, hybrid) over a corpus",
        description=(
            "Build a retrieval index once; later commands load it. The index lives in "
            "$RAR_HARNESS_CACHE/indexes/<index_id> with an index.json describing it."
        ),
        examples=EXAMPLES,
        handler=_run,
    )
    add_device_arg(p, what="the dense encoder")
    p.add_argument(
        "action",
        nargs="?",
        choices=["build", "import"],
        default="build",
        help="build (default): build or check the harness's own index; import: take a prebuilt one",
    )
    add_retriever_args(p, default=None)  # bm25s; dense / pyserini for an imported index
    imp = p.add_argument_group("import (harness index import)")
    src = imp.add_mutually_exclusive_group()
    src.add_argument("--faiss-index", type=Path, help="a faiss index file (Flat or HNSW, inner product)")
    src.add_argument("--lucene-index", type=Path, help="a Lucene index directory (pyserini / Anserini)")
    imp.add_argument(
        "--spot-check",
        type=int,
        default=16,
        metavar="N",
        help="passages searched with their own text, each must come back first (default 16)",
    )
    imp.add_argument("--copy", action="store_true", help="copy the index instead of linking to it")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--force", action="store_true", help="rebuild even when a matching index exists")
    mode.add_argument("--check", action="store_true", help="only load and verify an existing index")
    p.add_argument(
        "--export-row-ids",
        type=Path,
        default=None,
        metavar="DIR",
        help="with --retriever pyserini: write DIR/corpus.jsonl (row-number ids) and the Lucene index "
        "DIR/bm25 in the layout Search-R1's retrieval_server.py (BM25) reads; see docs/remote-retrieval.md",
    )
    p.add_argument(
        "--reencode",
        action="store_true",
        help="dense: also delete cached passage embeddings and encode again (implies --force)",
    )


def _describe(r, out) -> None:
    from harness.retrieval.hybrid import HybridRetriever

    if isinstance(r, HybridRetriever):
        _describe(r.sparse, out)
        _describe(r.dense, out)
        out.print(f"[bold]hybrid[/bold] index id {r.index_id} (RRF k={r.spec.rrf_k}, depth {r.spec.depth})")
        return
    m = r.meta
    out.print(f"[bold]{m.retriever.kind}[/bold] index {m.index_id}")
    out.print(f"  directory  {r.index_dir}")
    out.print(f"  corpus     {m.corpus.id}: {m.n_docs:,} passages, sha256 {m.corpus.content_hash[:16]}...")
    if m.analyzer:
        out.print(f"  analyzer   {m.analyzer}")
    if m.dim:
        out.print(f"  encoder    {m.encoder} (dim {m.dim})")
    out.print(f"  spec       {m.retriever.model_dump_json()}")
    if m.imported_from:
        out.print(f"  imported   {m.created_at} from {m.imported_from}")
    else:
        out.print(f"  built      {m.created_at} in {m.build_seconds:.1f} s")


def _import(args: argparse.Namespace, spec) -> int:
    from rich.console import Console

    from harness.errors import ConfigError
    from harness.retrieval.factory import as_corpus, build_retriever
    from harness.retrieval.importing import import_faiss_index, import_lucene_index

    if args.faiss_index is None and args.lucene_index is None:
        raise ConfigError("harness index import needs --faiss-index FILE or --lucene-index DIR")
    if args.corpus is None:
        raise ConfigError("harness index import needs --corpus: the jsonl the index was built from")
    if args.spot_check < 1:
        raise ConfigError(f"--spot-check must be >= 1, got {args.spot_check}")
    corpus = as_corpus(args.corpus, progress=True)
    if args.faiss_index is not None:
        if getattr(spec, "kind", None) != "dense":
            raise ConfigError(
                "--faiss-index needs a dense --retriever (a preset or a JSON spec of the encoder)"
            )
        import_faiss_index(args.faiss_index, corpus, spec, sample=args.spot_check, copy=args.copy)
    else:
        if getattr(spec, "kind", None) != "pyserini":
            raise ConfigError("--lucene-index needs --retriever pyserini (or a pyserini JSON spec)")
        import_lucene_index(args.lucene_index, corpus, spec, sample=args.spot_check, copy=args.copy)
    r = build_retriever(spec, corpus, mode="load")  # loads as any later command will
    _describe(r, Console())
    r.close()
    return 0


def _run(args: argparse.Namespace) -> int:
    set_encoder_device(args.device)
    from rich.console import Console

    from harness.errors import ConfigError
    from harness.retrieval.factory import as_corpus, build_retriever, parse_spec

    setup_logging()
    default = "dense" if args.faiss_index else "pyserini" if args.lucene_index else "bm25s"
    spec = parse_spec(args.retriever or default)
    if args.action == "import":
        if args.force or args.check or args.reencode:
            raise ConfigError(
                "--force, --check and --reencode are for building, not for harness index import"
            )
        return _import(args, spec)
    if args.faiss_index is not None or args.lucene_index is not None:
        raise ConfigError("--faiss-index / --lucene-index go with `harness index import`")
    corpus = as_corpus(args.corpus, progress=True)
    if args.export_row_ids is not None:
        if spec.kind != "pyserini" or args.check or args.reencode:
            raise ConfigError("--export-row-ids goes with --retriever pyserini (Search-R1's BM25 server)")
        from harness.retrieval.lucene import export_row_id_lucene

        path, index = export_row_id_lucene(corpus, args.export_row_ids, progress=True)
        Console().print(
            f"Search-R1 layout: corpus {path} ({len(corpus)} passages, ids = row numbers), Lucene index {index}\n"
            f"start upstream's server as docs/remote-retrieval.md says, with --index_path {index} "
            f"--corpus_path {path} --retriever_name bm25"
        )
        return 0
    if args.reencode:
        from harness.retrieval.dense import remove_embeddings
        from harness.retrieval.encoder import load_encoder

        dense = getattr(spec, "dense", spec)
        if getattr(dense, "kind", None) == "dense":
            remove_embeddings(corpus, load_encoder(dense.encoder))
    mode = "load" if args.check else "rebuild" if (args.force or args.reencode) else "auto"
    r = build_retriever(spec, corpus, mode=mode, progress=True)
    _describe(r, Console())
    r.close()
    return 0
