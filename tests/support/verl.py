"""The real verl package for tests/verl: skipped where verl is not installed (the default suite),
required under ``tox -e verl`` (``RAR_REQUIRE_VERL=1``), where a failing import is a failure
naming the missing module, not a silent skip."""

from __future__ import annotations

import os

import pytest


def import_verl_or_skip() -> None:
    if os.environ.get("RAR_REQUIRE_VERL"):
        import verl  # noqa: F401  (tox -e verl: must import)
    else:
        pytest.importorskip("verl")
