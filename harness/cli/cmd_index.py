"""``harness index``: build (or check) a retrieval index over a corpus."""

from __future__ import annotations

import argparse

from harness.cli import add_command
from harness.retrieval.cli_options import add_retriever_args, setup_logging

EXAMPLES = """\
  harness index                                  # bm25s over the packaged closed corpus (seconds)
  harness index --retriever pyserini             # Lucene BM25 (needs the pyserini extra)
  harness index --retriever dense                # MiniLM + faiss Flat (10-20 min on 2 CPU cores; resumable)
  harness index --retriever hybrid               # both of the above
  harness index --corpus wiki18.jsonl.gz --retriever bm25s --force
  harness index --retriever dense --check        # load only: verify the index matches, never build
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
    add_retriever_args(p)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--force", action="store_true", help="rebuild even when a matching index exists")
    mode.add_argument("--check", action="store_true", help="only load and verify an existing index")
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
    out.print(f"  built      {m.created_at} in {m.build_seconds:.1f} s")


def _run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from harness.retrieval.factory import as_corpus, build_retriever, parse_spec

    setup_logging()
    spec = parse_spec(args.retriever)
    corpus = as_corpus(args.corpus, progress=True)
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
