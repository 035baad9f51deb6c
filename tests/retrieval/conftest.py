"""Retrieval test fixtures: a private cache directory per test and tiny hand-made corpora."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.retrieval.helpers import TINY, write_jsonl


@pytest.fixture(autouse=True)
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "cache"
    monkeypatch.setenv("RAR_HARNESS_CACHE", str(d))
    return d


@pytest.fixture
def tiny_path(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "tiny.jsonl", TINY)


@pytest.fixture
def tiny_corpus(tiny_path: Path):
    from harness.retrieval.corpus import open_corpus

    c = open_corpus(tiny_path)
    yield c
    c.close()
