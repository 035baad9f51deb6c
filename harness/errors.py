"""Errors the harness raises on purpose. Each message names the file, line or URL and what to do.

The CLI prints a ``HarnessError`` as one line (``error: ...``) and exits with status 2;
anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import os


class HarnessError(Exception):
    """Base class: a user-facing problem with a clear message."""


class DataError(HarnessError):
    """A malformed data row or file."""

    def __init__(self, path: str | os.PathLike[str], message: str, line: int | None = None):
        self.path = str(path)
        self.line = line
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


class ConfigError(HarnessError):
    """An unknown name, a bad option, or settings that contradict each other."""


class RetrievalIndexError(HarnessError):
    """A missing, corrupt or mismatched retrieval index."""


class ServerError(HarnessError):
    """An unreachable or misbehaving server (names the URL)."""


class StoreError(HarnessError):
    """The results database cannot be opened or written."""
