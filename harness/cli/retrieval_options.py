"""Command-line options shared by the retrieval commands (index, retrieve, serve-retriever,
eval-retrieval) and the remote-retriever options of ``run`` and ``train``. Nothing heavy is
imported here."""

from __future__ import annotations

import argparse
import logging

from harness.cli.options import add_corpus_arg

RETRIEVER_HELP = (
    "bm25s (default), pyserini, dense, dense-hnsw, hybrid, or a JSON spec such as "
    '\'{"kind": "dense", "index_type": "HNSW"}\''
)


def add_retriever_args(p: argparse.ArgumentParser, *, default: str | None = "bm25s") -> None:
    p.add_argument("--retriever", default=default, help=RETRIEVER_HELP)
    add_corpus_arg(p, help="wiki-18 jsonl(.gz) corpus (default: the packaged closed corpus, ~28k passages)")


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
    """``--retriever-url`` and ``--retriever-declare`` (see harness.eval.remote; the run set-up,
    :func:`harness.eval.setup.build_protocol`, reads them)."""
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
