"""Command-line options shared by the retrieval commands (index, retrieve, serve-retriever,
eval-retrieval). Nothing heavy is imported here."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

RETRIEVER_HELP = (
    "bm25s (default), pyserini, dense, dense-hnsw, hybrid, or a JSON spec such as "
    '\'{"kind": "dense", "index_type": "HNSW"}\''
)


def add_retriever_args(p: argparse.ArgumentParser, *, default: str | None = "bm25s") -> None:
    p.add_argument("--retriever", default=default, help=RETRIEVER_HELP)
    p.add_argument(
        "--corpus",
        type=Path,
        default=None,
        help="wiki-18 jsonl(.gz) corpus (default: the packaged closed corpus, ~28k passages)",
    )


def setup_logging() -> None:
    """Show the retrieval layer's messages (index builds, rebuilds) on stderr."""
    logger = logging.getLogger("harness.retrieval")
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False


def parse_ks(text: str) -> list[int]:
    from harness.errors import ConfigError

    try:
        ks = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise ConfigError(f"--k takes comma-separated integers, got {text!r}") from None
    if not ks or ks[0] < 1:
        raise ConfigError(f"--k values must be >= 1, got {text!r}")
    return ks


def add_remote_args(p: argparse.ArgumentParser) -> None:
    """``--retriever-url`` and ``--retriever-declare`` (see harness.retrieval.remote)."""
    p.add_argument(
        "--retriever-url",
        default=None,
        metavar="URL",
        help="search through a Search-R1-compatible server (POST /retrieve), e.g. "
        "http://127.0.0.1:8000/retrieve from `harness serve-retriever`; the protocol records what "
        "its GET /health describes, and its id ends in -remote (-remote-unverified if nothing)",
    )
    p.add_argument(
        "--retriever-declare",
        default=None,
        metavar="SPEC",
        help="with --retriever-url, for a server without GET /health: the retriever it runs "
        "(a preset name or JSON spec, as --retriever); the protocol id ends in -remote-declared",
    )


def remote_protocol_from_args(proto, args: argparse.Namespace):
    """``proto`` with remote retrieval when ``--retriever-url`` is given (else ``proto``); prints
    one line on stderr saying what the protocol records about the server."""
    import sys

    from harness.errors import ConfigError

    url = getattr(args, "retriever_url", None)
    declared = getattr(args, "retriever_declare", None)
    if url is None:
        if declared is not None:
            raise ConfigError("--retriever-declare needs --retriever-url")
        return proto
    from harness.retrieval.client import RetrievalClient
    from harness.retrieval.remote import describe_remote, parse_declared, remote_protocol

    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"--retriever-url must be an http(s) URL, got {url!r}")
    client = RetrievalClient(url)
    try:
        out = remote_protocol(
            proto, client, declared=parse_declared(declared), corpus_path=getattr(args, "corpus", None)
        )
    finally:
        client.close()
    print(describe_remote(out, client.base_url), file=sys.stderr)
    return out
