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


@pytest.fixture(scope="module")
def tiny_loaded(tiny_dir: Path):
    """The shared tiny model and tokenizer, loaded once per module (no prefix cache of its own)."""
    from harness.llm import BackendSpec
    from harness.llm.transformers_backend import TransformersBackend

    b = TransformersBackend(BackendSpec(model=str(tiny_dir), prefix_cache_tokens=0))
    return b.model, b.tokenizer


@pytest.fixture
def make_tiny(tiny_loaded, tiny_dir: Path):
    """A transformers backend over the shared tiny model with its own (empty) prefix cache."""
    from harness.llm import BackendSpec
    from harness.llm.transformers_backend import TransformersBackend

    def build(tokens: int = 32768, batch: int = 8, decode: str = "auto") -> TransformersBackend:
        spec = BackendSpec(
            model=str(tiny_dir), prefix_cache_tokens=tokens, max_batch_size=batch, decode=decode
        )
        return TransformersBackend(spec, model=tiny_loaded[0], tokenizer=tiny_loaded[1])

    return build
