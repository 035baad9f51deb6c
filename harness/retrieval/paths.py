"""Where retrieval artefacts live: ``$RAR_HARNESS_CACHE`` (default ``~/.cache/rar-harness``).

<cache>/corpora/<key>/     a corpus prepared for lookup (offsets + mmap), see ``corpus.py``
<cache>/indexes/<index_id>/  one index per (corpus content hash, retriever spec)
<cache>/results.sqlite     the persistent result cache, see ``cache.py``
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "RAR_HARNESS_CACHE"


def cache_root() -> Path:
    """The harness cache directory (created on first use)."""
    env = os.environ.get(CACHE_ENV)
    root = Path(env).expanduser() if env else Path.home() / ".cache" / "rar-harness"
    root.mkdir(parents=True, exist_ok=True)
    return root


def indexes_dir() -> Path:
    return cache_root() / "indexes"


def index_dir_for(index_id: str) -> Path:
    return indexes_dir() / index_id


def corpora_dir() -> Path:
    return cache_root() / "corpora"


def result_cache_path() -> Path:
    return cache_root() / "results.sqlite"
