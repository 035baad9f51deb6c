"""Backends for the backend tests, over the shared model fixtures of tests/conftest.py."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_backend(tiny_dir: Path):
    from harness.llm import BackendSpec, make_backend

    return make_backend(BackendSpec(model=str(tiny_dir), max_batch_size=8))


@pytest.fixture(scope="session")
def smollm2_backend(smollm2_dir: Path):
    from harness.llm import BackendSpec, make_backend

    return make_backend(BackendSpec(model="default", max_batch_size=8))
