"""Errors the harness raises on purpose. Each message names the file, line or URL and what to do.

The CLI prints a ``HarnessError`` as one line (``error: ...``) and exits with status 2;
anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
from collections.abc import Callable, Iterator


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


class DiskFullError(HarnessError):
    """No space left on the disk a file is being written to."""


CACHE_ADVICE = "free space (or set RAR_HARNESS_CACHE to a folder on another disk) and rerun"


def is_disk_full(e: BaseException) -> bool:
    """Whether ``e`` says the disk is full: ENOSPC from the OS, or the text of a library that wraps
    it (SQLite's ``database or disk is full``, DuckDB's and others' ``No space left on device``, and
    numpy's short write ``OSError: 24790 requested and 2016 written``, which has no errno)."""
    if isinstance(e, OSError) and e.errno == errno.ENOSPC:
        return True
    text = str(e)
    if isinstance(e, OSError) and e.errno is None and re.fullmatch(r"\d+ requested and \d+ written", text):
        return True
    return "No space left on device" in text or "database or disk is full" in text


@contextlib.contextmanager
def disk_full_is_one_line(
    path: str | os.PathLike[str], what: str, advice: str = CACHE_ADVICE
) -> Iterator[None]:
    """Turn a full disk inside the block into one :class:`DiskFullError` naming ``path`` and
    ``what`` was being written; anything else passes unchanged."""
    try:
        yield
    except Exception as e:
        if is_disk_full(e):
            raise DiskFullError(f"{path}: the disk is full while writing {what}; {advice}") from None
        raise


def print_one_line(e: HarnessError) -> int:
    """Print ``e`` as the one line a refusal is (``error: ...`` on stderr, credentials redacted: a
    message may quote a URL) and return its exit status, 2. ``harness`` and :func:`script_exit` both
    end a refusal here."""
    import sys

    from harness.secrets import redact

    print(f"error: {redact(str(e))}", file=sys.stderr)
    return 2


def script_exit(main: Callable[[], int]) -> int:
    """Run a ``scripts/`` entry point the way ``harness`` runs a command: a :class:`HarnessError` is
    :func:`print_one_line`; anything else is a bug and keeps its traceback. Use as
    ``sys.exit(script_exit(main))``."""
    try:
        return int(main() or 0)
    except HarnessError as e:
        return print_one_line(e)
