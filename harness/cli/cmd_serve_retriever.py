"""``harness serve-retriever``: an HTTP retrieval server speaking Search-R1's ``POST /retrieve``."""

from __future__ import annotations

import argparse

from harness.cli import add_command
from harness.cli.options import add_connection_limit_args, add_device_arg, limits_error
from harness.cli.retrieval_options import add_retriever_args, setup_logging
from harness.retrieval.encoder import set_encoder_device

EXAMPLES = """\
  harness serve-retriever                                   # bm25s, closed corpus, 127.0.0.1:8000, top-3
  harness serve-retriever --retriever dense --port 8001 --topk 5
  harness serve-retriever --corpus wiki18.jsonl.gz --retriever pyserini --cache
  harness serve-retriever --port 0                          # any free port (the line printed names it)
  harness serve-retriever --max-queries 8192 --max-body-bytes 16777216   # bigger training batches
  harness serve-retriever --max-reply-bytes 134217728       # replies up to 128 MiB
  curl -s -X POST http://127.0.0.1:8000/retrieve -H 'Content-Type: application/json' \\
       -d '{"queries": ["who wrote hamlet"], "topk": 3, "return_scores": true}'
  curl -s http://127.0.0.1:8000/health                      # what is served: corpus, retriever, index, limits
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub,
        "serve-retriever",
        help="serve a retriever over HTTP (Search-R1 /retrieve, ReCall /search and /batch_search)",
        description=(
            "Serve a retriever over HTTP so external trainers (Search-R1, verl's search tool, verl-tool) "
            "and `harness run --retriever-url` use the harness's retrieval unchanged. Endpoints: "
            "POST /retrieve (Search-R1), POST /search and /batch_search (ReCall/FlashRAG), GET /health "
            "(corpus, retriever, index id, limits). Requests over the limits below get 413 (body) or "
            "422 (queries, length, topk, hits) or 413 (reply budget) with a one-line JSON reason; see docs/retrieval-server.md."
        ),
        examples=EXAMPLES,
        handler=_run,
    )
    add_device_arg(p, what="the dense encoder")
    add_retriever_args(p)
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port, 0 for any free one (default 8000)")
    p.add_argument(
        "--topk", type=int, default=3, help="passages per query when a request gives none (default 3)"
    )
    p.add_argument(
        "--cache", action="store_true", help="answer repeated (query, k) from the persistent result cache"
    )
    p.add_argument(
        "--search-threads",
        type=int,
        default=None,
        help="threads searching at once (default: 4 for pyserini, whose search is thread-safe; 1 otherwise)",
    )
    _add_limit_args(p.add_argument_group("limits (per request)"))


def _add_limit_args(lim: argparse._ArgumentGroup) -> None:
    """The ``--max-*`` flags of :class:`harness.retrieval.server.ServerLimits`, with its defaults."""
    from harness.retrieval.server import ServerLimits

    d = ServerLimits()
    add_connection_limit_args(
        lim,
        max_body_bytes=d.max_body_bytes,
        read_timeout_s=d.read_timeout_s,
        max_connections=d.max_connections,
        beyond_connections="beyond it the one waiting longest for a request is closed with 408, "
        "503 when all are being answered",
    )
    lim.add_argument(
        "--max-queries",
        type=int,
        default=d.max_queries,
        help=f"queries per request (default {d.max_queries})",
    )
    lim.add_argument(
        "--max-query-chars",
        type=int,
        default=d.max_query_chars,
        help=f"characters per query (default {d.max_query_chars})",
    )
    lim.add_argument("--max-topk", type=int, default=d.max_topk, help=f"largest topk (default {d.max_topk})")
    lim.add_argument(
        "--max-hits",
        type=int,
        default=d.max_hits,
        help=f"largest queries x topk in one reply (default {d.max_hits})",
    )
    lim.add_argument(
        "--max-reply-bytes",
        type=int,
        default=d.max_reply_bytes,
        help=f"largest reply in bytes, 413 above; checked before the search from the corpus's passage "
        f"sizes and again while the reply is built (default {d.max_reply_bytes})",
    )


def limits_from_args(args: argparse.Namespace):
    """The :class:`ServerLimits` the flags give, or one ConfigError naming the flag."""
    from pydantic import ValidationError

    from harness.retrieval.server import ServerLimits

    flags = {
        "max_body_bytes": args.max_body_bytes,
        "max_queries": args.max_queries,
        "max_query_chars": args.max_query_chars,
        "max_topk": args.max_topk,
        "max_hits": args.max_hits,
        "max_reply_bytes": args.max_reply_bytes,
        "read_timeout_s": args.read_timeout,
        "max_connections": args.max_connections,
    }
    try:
        return ServerLimits(**flags)
    except ValidationError as e:
        raise limits_error(e) from None


def _run(args: argparse.Namespace) -> int:
    set_encoder_device(args.device)
    from harness.errors import ConfigError
    from harness.retrieval.factory import make_retriever
    from harness.retrieval.server import bind, create_app, serve

    setup_logging()
    limits = limits_from_args(args)
    if not 1 <= args.topk <= limits.max_topk:
        raise ConfigError(f"--topk must be between 1 and --max-topk ({limits.max_topk}), got {args.topk}")
    if not 0 <= args.port <= 65535:
        raise ConfigError(f"--port must be between 0 and 65535, got {args.port}")
    sock = bind(args.host, args.port)  # before the index loads: a taken port fails in a second
    try:
        r = make_retriever(args.retriever, args.corpus, progress=True, cache=args.cache)
        try:
            app = create_app(r, default_topk=args.topk, limits=limits, search_threads=args.search_threads)
            corpus = r.corpus_spec
            host, port = sock.getsockname()[:2]
            print(
                f"serving {r.name} (index {r.index_id}) over {corpus.id if corpus else '?'} "
                f"({corpus.n_passages if corpus else '?'} passages) on http://{host}:{port}\n"
                '  POST /retrieve {"queries": [...], "topk": k, "return_scores": true}   (Search-R1)\n'
                "  POST /search, /batch_search                                         (ReCall / FlashRAG)\n"
                "  GET  /health\n"
                f"  limits: {limits.model_dump_json()}",
                flush=True,
            )
            serve(app, limits, sock)
        finally:
            r.close()
    finally:
        sock.close()
    return 0
