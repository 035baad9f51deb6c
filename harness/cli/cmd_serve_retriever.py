"""``harness serve-retriever``: an HTTP retrieval server speaking Search-R1's ``POST /retrieve``."""

from __future__ import annotations

import argparse

from harness.cli import add_command
from harness.retrieval.cli_options import add_retriever_args, setup_logging

EXAMPLES = """\
  harness serve-retriever                                   # bm25s, closed corpus, 127.0.0.1:8000, top-3
  harness serve-retriever --retriever dense --port 8001 --topk 5
  harness serve-retriever --corpus wiki18.jsonl.gz --retriever pyserini --cache
  curl -s -X POST http://127.0.0.1:8000/retrieve -H 'Content-Type: application/json' \\
       -d '{"queries": ["who wrote hamlet"], "topk": 3, "return_scores": true}'
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub,
        "serve-retriever",
        help="serve a retriever over HTTP (Search-R1 /retrieve, ReCall /search and /batch_search)",
        description=(
            "Serve a retriever over HTTP so external trainers (Search-R1, verl's search tool, verl-tool) "
            "use the harness's retrieval unchanged. Endpoints: POST /retrieve (Search-R1), "
            "POST /search and /batch_search (ReCall/FlashRAG), GET /health."
        ),
        examples=EXAMPLES,
        handler=_run,
    )
    add_retriever_args(p)
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument(
        "--topk", type=int, default=3, help="passages per query when a request gives none (default 3)"
    )
    p.add_argument(
        "--max-topk", type=int, default=1000, help="largest topk a request may ask for (default 1000)"
    )
    p.add_argument(
        "--cache", action="store_true", help="answer repeated (query, k) from the persistent result cache"
    )


def _run(args: argparse.Namespace) -> int:
    import uvicorn

    from harness.errors import ConfigError
    from harness.retrieval.factory import make_retriever
    from harness.retrieval.server import create_app

    setup_logging()
    if not 1 <= args.topk <= args.max_topk:
        raise ConfigError(f"--topk must be between 1 and --max-topk ({args.max_topk})")
    r = make_retriever(args.retriever, args.corpus, progress=True, cache=args.cache)
    app = create_app(r, default_topk=args.topk, max_topk=args.max_topk)
    corpus = r.corpus_spec
    print(
        f"serving {r.name} (index {r.index_id}) over {corpus.id if corpus else '?'} "
        f"({corpus.n_passages if corpus else '?'} passages) on http://{args.host}:{args.port}\n"
        '  POST /retrieve {"queries": [...], "topk": k, "return_scores": true}   (Search-R1)\n'
        "  POST /search, /batch_search                                         (ReCall / FlashRAG)\n"
        "  GET  /health",
        flush=True,
    )
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    finally:
        r.close()
    return 0
