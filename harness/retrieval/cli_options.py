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


def add_retriever_args(p: argparse.ArgumentParser, *, default: str = "bm25s") -> None:
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
